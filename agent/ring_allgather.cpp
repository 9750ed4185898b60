// Ring all-gather.
//
// P processes, each holding block b_p. The ring is p -> p+1 (mod P). In step s (0 <= s < P-1)
// process p forwards the block it received in the previous step (its own at s = 0):
//
//   send  b_{(p - s) mod P}      to   p + 1
//   recv  b_{(p - s - 1) mod P}  from p - 1
//
// After P-1 steps every process has received the P-1 blocks it lacked, each exactly once. Every
// link carries (P-1)/P of the data, the bandwidth-optimal amount for an all-gather
// (Patarasuk & Yuan 2009), and every process sends and receives at the same time, so the
// collective runs at the speed of the slowest link: on a multi-slice job that is the cross-slice
// hop (the DCN link from the last worker of slice s to worker 0 of slice s+1), which is why the
// ring is slice-major, crossing each slice boundary once.
//
// Each step is full duplex in one thread: poll() on the outgoing and incoming sockets until the
// frame out (64-byte header + block) has been sent and the frame in has been received. Doing the
// send and the receive one after the other could deadlock: with blocks larger than the socket
// buffers every process would sit in send() while nobody reads. A step that makes no progress
// before its deadline fails, naming the neighbour it waited for.
#include "agent/ring_allgather.hpp"

#include <cerrno>
#include <poll.h>
#include <sys/socket.h>

#include <spdlog/spdlog.h>

#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

FrameHeader ring_header(FrameType type, const JobSpec& job, int sender, uint32_t aux = 0) {
  FrameHeader h;
  h.type = type;
  h.job = job;
  h.sender = sender;
  h.aux = aux;
  return h;
}

Error ring_error(std::string message) {
  return make_error(ErrorKind::failure, "ring: " + std::move(message));
}

// Accepts connections until the previous process says hello; refuses the others.
Expected<Socket> accept_prev(const JobSpec& job, int self, const ProcessEntry& prev,
                             const Socket& listener, Deadline deadline,
                             const std::string& timeout_text) {
  std::vector<std::string> refused;
  for (;;) {
    auto s = accept_until(listener, deadline);
    if (!s) {
      std::string message = describe_process(prev) +
                            ", the previous process in the ring, did not connect within " +
                            timeout_text;
      if (!refused.empty()) {
        message += "; refused " + util::join(refused, "; ");
      }
      return ring_error(message);
    }
    const std::string from = peer_address(*s);
    auto frame = read_frame(*s, deadline);
    std::string why;
    if (!frame) {
      why = frame.error().message;
    } else if (frame->header.type != FrameType::ring_hello) {
      why = std::string("expected a ring hello, got a ") + to_string(frame->header.type) + " frame";
    } else if (frame->header.job != job) {
      const std::string them = "process " + std::to_string(frame->header.sender);
      why = them + " runs a different job (" +
            describe_job_mismatch(job, "process " + std::to_string(self), frame->header.job, them) +
            ")";
    } else if (frame->header.sender != prev.process) {
      why = "it says it is process " + std::to_string(frame->header.sender) + ", expected " +
            describe_process(prev);
    }
    if (why.empty()) {
      TPUCTL_TRY(write_frame(*s, ring_header(FrameType::ring_accept, job, self), "", deadline));
      return std::move(*s);
    }
    spdlog::warn("ring: refused a connection from {}: {}", from, why);
    refused.push_back("a connection from " + from + ": " + why);
    (void)write_frame(*s, ring_header(FrameType::reject, job, self), why, deadline);
  }
}

} // namespace

Expected<RingLinks> connect_ring(const JobSpec& job, int self,
                                 const std::vector<ProcessEntry>& table, const Socket& listener,
                                 std::chrono::milliseconds timeout) {
  RingLinks ring;
  const int n = static_cast<int>(table.size());
  ring.self = self;
  ring.table = table;
  if (n <= 1) {
    return ring;
  }
  ring.next = (self + 1) % n;
  ring.prev = (self + n - 1) % n;
  const auto deadline = SteadyClock::now() + timeout;
  const auto& next = table[static_cast<size_t>(ring.next)];
  const auto& prev = table[static_cast<size_t>(ring.prev)];
  const std::string next_text =
      describe_process(next) + " at " + join_host_port(next.host, next.ring_port);
  auto address = resolve_address(next.host, next.ring_port);
  if (!address) {
    return ring_error("cannot reach the next process, " + next_text + ": " +
                      address.error().message);
  }
  const auto& me = table[static_cast<size_t>(self)];
  auto source = resolve_address(me.host, 0);
  auto out = connect_until(*address, deadline, source ? &*source : nullptr);
  if (!out) {
    return ring_error("cannot reach the next process, " + next_text + ", within " +
                      duration_text(timeout) + ": " + out.error().message);
  }
  // Hello first (it waits in the socket buffer), then accept, then read the answer: every
  // process does the same, so nobody waits for a peer that is itself waiting.
  TPUCTL_TRY(write_frame(*out, ring_header(FrameType::ring_hello, job, self), "", deadline));
  TPUCTL_TRY_ASSIGN(ring.in,
                    accept_prev(job, self, prev, listener, deadline, duration_text(timeout)));
  auto answer = read_frame(*out, deadline);
  if (!answer) {
    return ring_error("no answer from the next process, " + next_text + ": " +
                      answer.error().message);
  }
  if (answer->header.type == FrameType::reject) {
    return ring_error("the next process, " + next_text +
                      ", refused this process: " + answer->payload);
  }
  if (answer->header.type != FrameType::ring_accept || answer->header.sender != next.process) {
    return ring_error("the next process, " + next_text + ", answered with a " +
                      to_string(answer->header.type) + " frame from process " +
                      std::to_string(answer->header.sender));
  }
  ring.out = std::move(*out);
  return ring;
}

Status ring_allgather(RingLinks& ring, const JobSpec& job, uint8_t* blocks, size_t block_bytes,
                      std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(ring.table.size());
  const int p = ring.self;
  const auto& prev =
      ring.table.empty() ? ProcessEntry{} : ring.table[static_cast<size_t>(ring.prev)];
  const auto& next =
      ring.table.empty() ? ProcessEntry{} : ring.table[static_cast<size_t>(ring.next)];
  const size_t frame_bytes = k_frame_header_bytes + block_bytes;
  for (int s = 0; s + 1 < n; ++s) {
    const int send_idx = ((p - s) % n + n) % n;
    const int recv_idx = ((p - s - 1) % n + n) % n;
    const uint8_t* send_block = blocks + static_cast<size_t>(send_idx) * block_bytes;
    uint8_t* recv_block = blocks + static_cast<size_t>(recv_idx) * block_bytes;
    uint8_t out_header[k_frame_header_bytes];
    FrameHeader h = ring_header(FrameType::block, job, p, static_cast<uint32_t>(s));
    h.payload_bytes = block_bytes;
    encode_header(h, out_header);
    uint8_t in_header[k_frame_header_bytes];
    size_t sent = 0, got = 0;
    const auto deadline = SteadyClock::now() + timeout;
    const std::string step =
        "all-gather step " + std::to_string(s + 1) + " of " + std::to_string(n - 1);
    while (sent < frame_bytes || got < frame_bytes) {
      if (SteadyClock::now() >= deadline) {
        if (got < frame_bytes) {
          return ring_error(step + ": " + describe_process(prev) + " sent " + std::to_string(got) +
                            " of " + std::to_string(frame_bytes) + " bytes within " +
                            duration_text(timeout));
        }
        return ring_error(step + ": " + describe_process(next) + " took " + std::to_string(sent) +
                          " of " + std::to_string(frame_bytes) + " bytes within " +
                          duration_text(timeout));
      }
      pollfd fds[2] = {{ring.out.fd(), static_cast<short>(sent < frame_bytes ? POLLOUT : 0), 0},
                       {ring.in.fd(), static_cast<short>(got < frame_bytes ? POLLIN : 0), 0}};
      if (::poll(fds, 2, poll_timeout_ms(deadline, 200)) < 0 && errno != EINTR) {
        return ring_error("poll: " + error_text(errno));
      }
      if (sent < frame_bytes && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
        const uint8_t* src = sent < k_frame_header_bytes
                                 ? out_header + sent
                                 : send_block + (sent - k_frame_header_bytes);
        size_t len = sent < k_frame_header_bytes ? k_frame_header_bytes - sent : frame_bytes - sent;
        ssize_t w = ::send(ring.out.fd(), src, len, MSG_NOSIGNAL);
        if (w > 0) {
          sent += static_cast<size_t>(w);
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          return ring_error(step + ": sending to " + describe_process(next) +
                            " failed: " + error_text(errno));
        }
      }
      if (got < frame_bytes && (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
        uint8_t* dst = got < k_frame_header_bytes ? in_header + got
                                                  : recv_block + (got - k_frame_header_bytes);
        size_t len = got < k_frame_header_bytes ? k_frame_header_bytes - got : frame_bytes - got;
        ssize_t r = ::recv(ring.in.fd(), dst, len, 0);
        if (r == 0) {
          return ring_error(step + ": " + describe_process(prev) + " closed the connection after " +
                            std::to_string(got) + " of " + std::to_string(frame_bytes) + " bytes");
        }
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          return ring_error(step + ": receiving from " + describe_process(prev) +
                            " failed: " + error_text(errno));
        }
        if (r > 0) {
          bool header_done =
              got < k_frame_header_bytes && got + static_cast<size_t>(r) >= k_frame_header_bytes;
          got += static_cast<size_t>(r);
          if (header_done) {
            auto in = decode_header(in_header);
            std::string why;
            if (!in) {
              why = in.error().message;
            } else if (in->job != job) {
              why = "a block of a different job (" +
                    describe_job_mismatch(job, "process " + std::to_string(p), in->job,
                                          "process " + std::to_string(in->sender)) +
                    ")";
            } else if (in->type != FrameType::block || in->sender != prev.process ||
                       in->aux != static_cast<uint32_t>(s) || in->payload_bytes != block_bytes) {
              why = std::string("a ") + to_string(in->type) + " frame from process " +
                    std::to_string(in->sender) + " for step " + std::to_string(in->aux + 1) +
                    " with " + std::to_string(in->payload_bytes) + " bytes, expected a block of " +
                    std::to_string(block_bytes) + " bytes";
            }
            if (!why.empty()) {
              return ring_error(step + ": " + describe_process(prev) + " sent " + why);
            }
          }
        }
      }
    }
    spdlog::debug("ring: step {} done (sent block {}, received block {})", s + 1, send_idx,
                  recv_idx);
  }
  return ok();
}

} // namespace tpuctl::agent
