// Rendezvous, the first phase of every multi-controller program (jax.distributed.initialize
// does the same with gRPC): the same binary starts on every worker of every slice, and the
// processes have to find each other with nothing but the worker environment.
//
//   1. Every process binds its ring listener on its OWN address (TPU_WORKER_HOSTNAMES[worker]),
//      ephemeral port, before anything else, so the port it announces is already accepting.
//   2. Global process 0 listens on its own address at JAX_COORDINATOR_ADDRESS's port. It never
//      binds 0.0.0.0: the slices of a local pool share one machine on different 127.x
//      addresses, and two jobs must not collide.
//   3. Every other process connects to the coordinator (retrying while it is not up yet) and
//      sends a hello frame: its process id, slice, worker, ring address, and its slice's
//      hostnames. The frame header carries the job (seed, shape, dtype, mesh, processes): the
//      coordinator rejects a different job, an impossible or duplicate process id, or bytes that
//      are not a frame, with a reject frame saying why, and keeps waiting for the right peer.
//   4. When all processes checked in, the coordinator sends everyone the table of all processes
//      of all slices; nobody needs other slices' hostnames up front. At the deadline instead it
//      names every missing process (worker, slice and, from its slice's hostnames, its address)
//      and sends that message to the processes that did check in, so every worker fails with
//      the same clear error instead of hanging.
// A worker waits for the table until `timeout` after it connected plus a 2 s grace, which is
// after the coordinator's own deadline, so it hears the coordinator's verdict. The connections
// stay open: after the gather every process reports its timings and checksum on them.
#include "agent/rendezvous.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <poll.h>

#include <spdlog/spdlog.h>

#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds k_worker_grace{2000};
constexpr milliseconds k_reject_send{1000};
constexpr size_t k_max_named = 8;

FrameHeader header(FrameType type, const JobSpec& job, int sender) {
  FrameHeader h;
  h.type = type;
  h.job = job;
  h.sender = sender;
  return h;
}

// A connection that has not completed its check-in yet.
struct Pending {
  Socket socket;
  std::string from; // the peer's address, for messages
  std::string in;
};

// The coordinator's state while processes check in.
struct Coordinator {
  const RendezvousOptions& o;
  int workers;   // per slice
  int processes; // in the job
  std::vector<std::optional<CheckIn>> checked;
  std::vector<Socket> links;
  std::vector<std::string> refused;

  // Why `c` cannot be accepted; empty when it can.
  std::string problem(const CheckIn& c) const {
    const auto& e = c.self;
    int slices = processes / workers;
    if (e.process <= 0 || e.process >= processes) {
      return "process id " + std::to_string(e.process) + " is not in 1.." +
             std::to_string(processes - 1);
    }
    if (static_cast<int>(c.slice_hostnames.size()) != workers || e.worker >= workers ||
        e.slice >= slices || e.slice * workers + e.worker != e.process) {
      return "process " + std::to_string(e.process) + " (slice " + std::to_string(e.slice) +
             ", worker " + std::to_string(e.worker) + ", " +
             std::to_string(c.slice_hostnames.size()) +
             " workers per slice) does not fit a job of " + std::to_string(slices) + " slices of " +
             std::to_string(workers) + " workers";
    }
    if (checked[static_cast<size_t>(e.process)]) {
      return "process " + std::to_string(e.process) + " already checked in (from " +
             checked[static_cast<size_t>(e.process)]->self.host + ")";
    }
    return "";
  }

  void reject(Pending& p, const std::string& why) {
    spdlog::warn("rendezvous: refused a connection from {}: {}", p.from, why);
    refused.push_back("from " + p.from + ": " + why);
    (void)write_frame(p.socket, header(FrameType::reject, o.job, 0), why,
                      SteadyClock::now() + k_reject_send);
    p.socket.close();
  }

  // Handles a complete frame in `p.in`; returns false while more bytes are needed.
  bool handle(Pending& p) {
    if (p.in.size() < k_frame_header_bytes) {
      return false;
    }
    auto h = decode_header(reinterpret_cast<const uint8_t*>(p.in.data()));
    if (!h) {
      reject(p, h.error().message);
      return true;
    }
    if (h->payload_bytes > k_max_control_payload) {
      reject(p, "a check-in of " + std::to_string(h->payload_bytes) + " bytes is too large");
      return true;
    }
    if (p.in.size() < k_frame_header_bytes + h->payload_bytes) {
      return false;
    }
    if (h->type != FrameType::hello) {
      reject(p, std::string("expected a check-in, got a ") + to_string(h->type) + " frame");
      return true;
    }
    if (h->job != o.job) {
      const std::string them = "process " + std::to_string(h->sender);
      reject(p, them + " runs a different job than the coordinator (" +
                    describe_job_mismatch(o.job, "process 0", h->job, them) +
                    "): start every worker with the same --m/--n/--k/--dtype/--mesh/--seed");
      return true;
    }
    auto c = decode_check_in(p.in.substr(k_frame_header_bytes));
    if (!c) {
      reject(p, c.error().message);
      return true;
    }
    if (auto why = problem(*c); !why.empty()) {
      reject(p, why);
      return true;
    }
    spdlog::debug("rendezvous: {} checked in", describe_process(c->self));
    auto idx = static_cast<size_t>(c->self.process);
    links[idx] = std::move(p.socket);
    checked[idx] = std::move(*c);
    return true;
  }

  // The missing processes, named, for the timeout message.
  std::string missing_text(int& missing) const {
    // A slice's hostnames, from any process of that slice that checked in (or from us).
    std::vector<std::vector<std::string>> hosts(static_cast<size_t>(processes / workers));
    hosts[static_cast<size_t>(o.self.slice)] = o.slice_hostnames;
    for (const auto& c : checked) {
      if (c) {
        hosts[static_cast<size_t>(c->self.slice)] = c->slice_hostnames;
      }
    }
    std::vector<std::string> named;
    missing = 0;
    for (int p = 1; p < processes; ++p) {
      if (checked[static_cast<size_t>(p)]) {
        continue;
      }
      ++missing;
      if (named.size() == k_max_named) {
        continue;
      }
      ProcessEntry e{p, p / workers, p % workers, "", 0};
      const auto& slice_hosts = hosts[static_cast<size_t>(e.slice)];
      if (slice_hosts.empty()) {
        named.push_back("process " + std::to_string(p) + " (slice " + std::to_string(e.slice) +
                        ", worker " + std::to_string(e.worker) +
                        ", address unknown: no process of slice " + std::to_string(e.slice) +
                        " checked in)");
      } else {
        e.host = slice_hosts[static_cast<size_t>(e.worker)];
        named.push_back(describe_process(e));
      }
    }
    std::string text = util::join(named, ", ");
    if (missing > static_cast<int>(named.size())) {
      text += " and " + std::to_string(missing - static_cast<int>(named.size())) + " more";
    }
    return text;
  }
};

Expected<Rendezvous> run_coordinator(const RendezvousOptions& o) {
  const auto start = SteadyClock::now();
  const auto deadline = start + o.timeout;
  Rendezvous out;
  out.coordinator_address = join_host_port(o.self.host, o.coordinator.port);
  TPUCTL_TRY_ASSIGN(Socket listener, listen_on(o.self.host, o.coordinator.port));
  Coordinator c{o,
                std::max(1, static_cast<int>(o.slice_hostnames.size())),
                o.job.processes,
                std::vector<std::optional<CheckIn>>(static_cast<size_t>(o.job.processes)),
                std::vector<Socket>(static_cast<size_t>(o.job.processes)),
                {}};
  std::vector<Pending> pending;
  int arrived = 0;
  while (arrived < o.job.processes - 1 && SteadyClock::now() < deadline) {
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    for (const auto& p : pending) {
      fds.push_back(pollfd{p.socket.fd(), POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), poll_timeout_ms(deadline, 100)) < 0 && errno != EINTR) {
      return make_error(ErrorKind::failure, "rendezvous: poll: " + error_text(errno));
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      Pending& p = pending[i - 1];
      if (fds[i].revents == 0) {
        continue;
      }
      char buf[4096];
      ssize_t n = ::recv(p.socket.fd(), buf, sizeof buf, 0);
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
        spdlog::debug("rendezvous: {} closed before checking in", p.from);
        p.socket.close();
        continue;
      }
      if (n > 0) {
        p.in.append(buf, static_cast<size_t>(n));
      }
      c.handle(p); // on a verdict the socket moved into links or was closed
    }
    if (fds[0].revents != 0) {
      while (true) {
        auto s = accept_until(listener, SteadyClock::now());
        if (!s) {
          break;
        }
        std::string from = peer_address(*s);
        pending.push_back(Pending{std::move(*s), from, {}});
      }
    }
    std::erase_if(pending, [](const Pending& p) { return !p.socket.valid(); });
    arrived = static_cast<int>(std::count_if(c.checked.begin(), c.checked.end(),
                                             [](const auto& x) { return x.has_value(); }));
  }
  if (arrived < o.job.processes - 1) {
    int missing = 0;
    std::string names = c.missing_text(missing);
    std::string message = "rendezvous at " + out.coordinator_address +
                          " failed: " + std::to_string(missing) + " of " +
                          std::to_string(o.job.processes) + " processes did not check in within " +
                          duration_text(o.timeout) + ": " + names;
    if (!c.refused.empty()) {
      message += "; refused " + std::to_string(c.refused.size()) +
                 " connection(s): " + util::join(c.refused, "; ");
    }
    message += " (start spmd-matmul on every worker of every slice, e.g. tpuctl ssh NAME "
               "--worker=all)";
    for (size_t p = 1; p < c.links.size(); ++p) {
      if (c.links[p].valid()) {
        (void)write_frame(c.links[p], header(FrameType::abort, o.job, 0), message,
                          SteadyClock::now() + k_reject_send);
      }
    }
    return make_error(ErrorKind::failure, message);
  }
  out.table.resize(static_cast<size_t>(o.job.processes));
  out.table[0] = o.self;
  for (int p = 1; p < o.job.processes; ++p) {
    out.table[static_cast<size_t>(p)] = c.checked[static_cast<size_t>(p)]->self;
  }
  const std::string table = encode_table(out.table);
  const auto send_deadline = SteadyClock::now() + o.timeout;
  for (int p = 1; p < o.job.processes; ++p) {
    auto st = write_frame(c.links[static_cast<size_t>(p)], header(FrameType::table, o.job, 0),
                          table, send_deadline);
    if (!st) {
      return make_error(ErrorKind::failure,
                        "rendezvous: cannot send the table to " +
                            describe_process(out.table[static_cast<size_t>(p)]) + ": " +
                            st.error().message);
    }
  }
  out.links = std::move(c.links);
  return out;
}

Expected<Rendezvous> run_worker(const RendezvousOptions& o) {
  const auto start = SteadyClock::now();
  Rendezvous out;
  out.coordinator_address = join_host_port(o.coordinator.host, o.coordinator.port);
  const std::string who =
      "the coordinator, process 0 (slice 0, worker 0) at " + out.coordinator_address;
  auto address = resolve_address(o.coordinator.host, o.coordinator.port);
  if (!address) {
    return make_error(ErrorKind::failure, "cannot reach " + who + ": " + address.error().message);
  }
  auto source = resolve_address(o.self.host, 0);
  auto link = connect_until(*address, start + o.timeout, source ? &*source : nullptr);
  if (!link) {
    return make_error(ErrorKind::failure,
                      "cannot reach " + who + " within " + duration_text(o.timeout) + ": " +
                          link.error().message +
                          " (is spmd-matmul running on slice 0 worker 0? start it on every "
                          "worker, e.g. tpuctl ssh NAME --worker=all)");
  }
  const auto wait_deadline = SteadyClock::now() + o.timeout + k_worker_grace;
  TPUCTL_TRY(write_frame(*link, header(FrameType::hello, o.job, o.self.process),
                         encode_check_in(CheckIn{o.self, o.slice_hostnames}), wait_deadline));
  auto frame = read_frame(*link, wait_deadline);
  if (!frame) {
    return make_error(ErrorKind::failure,
                      "rendezvous: no table from " + who + ": " + frame.error().message);
  }
  switch (frame->header.type) {
  case FrameType::table:
    break;
  case FrameType::reject:
    return make_error(ErrorKind::failure,
                      who + " refused " + describe_process(o.self) + ": " + frame->payload);
  case FrameType::abort:
    return make_error(ErrorKind::failure, frame->payload);
  default:
    return make_error(ErrorKind::failure, "rendezvous: " + who + " sent a " +
                                              to_string(frame->header.type) +
                                              " frame instead of the table");
  }
  if (frame->header.job != o.job) {
    return make_error(ErrorKind::failure,
                      "rendezvous: " + who + " runs a different job (" +
                          describe_job_mismatch(o.job, "process " + std::to_string(o.self.process),
                                                frame->header.job, "process 0") +
                          ")");
  }
  TPUCTL_TRY_ASSIGN(out.table, decode_table(frame->payload, o.job.processes));
  out.links.push_back(std::move(*link));
  return out;
}

} // namespace

std::string describe_process(const ProcessEntry& e) {
  return "process " + std::to_string(e.process) + " (slice " + std::to_string(e.slice) +
         ", worker " + std::to_string(e.worker) + ", " + e.host + ")";
}

std::string duration_text(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms < 1000) {
    return std::to_string(ms) + "ms";
  }
  if (ms % 1000 == 0) {
    return std::to_string(ms / 1000) + "s";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

Expected<Rendezvous> rendezvous(const RendezvousOptions& options) {
  if (options.job.processes < 1 || options.self.process < 0 ||
      options.self.process >= options.job.processes) {
    return usage_error("rendezvous: process " + std::to_string(options.self.process) +
                       " is not in a job of " + std::to_string(options.job.processes));
  }
  if (options.job.processes == 1) {
    Rendezvous single;
    single.table = {options.self};
    single.links.resize(1);
    return single;
  }
  return options.self.process == 0 ? run_coordinator(options) : run_worker(options);
}

Status send_report(const Rendezvous& r, const JobSpec& job, const WorkerReport& report,
                   std::chrono::milliseconds timeout) {
  if (r.links.empty() || !r.links[0].valid()) {
    return make_error(ErrorKind::failure, "no connection to the coordinator");
  }
  return write_frame(r.links[0], header(FrameType::report, job, report.process),
                     encode_report(report), SteadyClock::now() + timeout);
}

Expected<std::vector<WorkerReport>> collect_reports(const Rendezvous& r, const JobSpec& job,
                                                    const WorkerReport& own,
                                                    std::chrono::milliseconds timeout) {
  std::vector<WorkerReport> reports(r.table.size());
  reports[0] = own;
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<std::string> problems;
  for (size_t p = 1; p < r.table.size(); ++p) {
    auto frame = read_frame(r.links[p], deadline);
    std::string why;
    if (!frame) {
      why = frame.error().message;
    } else if (frame->header.type != FrameType::report || frame->header.job != job) {
      why = std::string("sent a ") + to_string(frame->header.type) + " frame instead of its report";
    } else {
      auto rep = decode_report(frame->payload);
      if (!rep) {
        why = rep.error().message;
      } else if (rep->process != static_cast<int>(p)) {
        why = "its report names process " + std::to_string(rep->process);
      } else {
        reports[p] = std::move(*rep);
      }
    }
    if (!why.empty()) {
      problems.push_back(describe_process(r.table[p]) + ": " + why);
    }
  }
  if (!problems.empty()) {
    return make_error(ErrorKind::failure, "no report from " + util::join(problems, "; "));
  }
  return reports;
}

} // namespace tpuctl::agent
