// Jump hosts in process (see jump_hub.hpp for the shape). The hub's thread:
//   1. connects to the bastion with SshSession::connect, as any worker: the bastion's own
//      ssh_config entry, the run's host-key policy and known_hosts, the worker's identity file
//      (else ssh-agent and the default keys); a bastion behind other bastions is reached through
//      their hubs. A failure ends the hub, and every worker behind it fails with one line naming
//      the bastion; a transient one lets the next connect start a new hub.
//   2. serves: worker threads queue requests (host, port) and wake it through an eventfd. Each
//      request becomes a direct-tcpip channel, opened in non-blocking mode so that a slow or
//      unreachable worker never stalls the bytes of the others; once open, a socketpair joins it
//      to the worker's session. One poll() covers the eventfd, the bastion's socket and every
//      pump's socket.
//   3. pumps: socket -> channel only as far as the channel's window allows (a write never waits
//      for a window), channel -> socket through a bounded buffer (a slow reader stops the
//      channel reads, so its window closes and the worker's sshd waits: flow control end to
//      end). The worker closing its socket closes the channel; the channel's EOF shuts the
//      socket for writing, so the worker's session sees the connection end.
//   4. stops when the run's JumpHubs and the last session using it let it go: channels and
//      sockets closed, the bastion's session disconnected, the thread joined.
#include "remote/jump_hub.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <libssh/libssh.h>
#include <spdlog/spdlog.h>

namespace tpuctl::remote::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Request {
  std::string host;
  unsigned port = 22;
  bool done = false;
  bool abandoned = false; // the worker stopped waiting (cancelled): its socket is closed here
  int fd = -1;
  std::optional<Failure> failure;
};

struct Pump {
  ssh_channel channel = nullptr;
  int fd = -1;
  std::string to_fd;        // from the channel, not yet written to the socket
  bool channel_eof = false; // the channel sends no more: the socket was shut for writing
  bool done = false;
};

struct Opening {
  std::shared_ptr<Request> request;
  ssh_channel channel = nullptr;
  Clock::time_point deadline;
};

} // namespace

class JumpHub {
public:
  JumpHub(std::string name, SshTarget bastion, const SshOptions& options,
          const IdentityStore& identities, const CancelToken* cancel)
      : m_name(std::move(name)), m_target(std::move(bastion)), m_options(options),
        m_identities(identities), m_cancel(cancel) {
    m_options.tty = false;
    m_options.stdin_data = nullptr;
    m_wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    m_thread = std::thread([this] { run(); });
  }
  JumpHub(const JumpHub&) = delete;
  JumpHub& operator=(const JumpHub&) = delete;

  ~JumpHub() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    wake();
    m_slot.interrupt(); // a bastion still connecting gives up at once
    m_thread.join();
    if (m_wake >= 0) {
      ::close(m_wake);
    }
  }

  // A failed hub whose failure another try may not give: the registry starts a new one.
  bool replaceable() {
    std::lock_guard lock(m_mutex);
    return m_failed && m_failure && m_failure->transient;
  }

  std::pair<int, std::optional<Failure>> open(const std::string& host, unsigned port,
                                              const CancelToken* cancel) {
    auto request = std::make_shared<Request>();
    request->host = host;
    request->port = port;
    {
      std::lock_guard lock(m_mutex);
      if (m_failed) {
        return {-1, m_failure};
      }
      m_requests.push_back(request);
    }
    wake();
    std::unique_lock lock(m_mutex);
    while (!request->done) {
      if (cancel != nullptr && cancel->cancelled()) {
        request->abandoned = true;
        return {-1, Failure{Outcome::interrupted, "interrupted while connecting"}};
      }
      m_cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    return {request->fd, request->failure};
  }

private:
  void wake() {
    uint64_t one = 1;
    if (m_wake >= 0) {
      [[maybe_unused]] auto n = ::write(m_wake, &one, sizeof one);
    }
  }

  void finish(const std::shared_ptr<Request>& request, int fd, std::optional<Failure> failure) {
    std::lock_guard lock(m_mutex);
    if (request->abandoned) {
      if (fd >= 0) {
        ::close(fd);
      }
    } else {
      request->fd = fd;
      request->failure = std::move(failure);
    }
    request->done = true;
    m_cv.notify_all();
  }

  // Ends the hub: every request waiting now or later gets `failure`.
  void fail(Failure failure) {
    std::vector<std::shared_ptr<Request>> waiting;
    {
      std::lock_guard lock(m_mutex);
      m_failed = true;
      m_failure = failure;
      waiting.swap(m_requests);
    }
    for (auto& r : waiting) {
      finish(r, -1, failure);
    }
  }

  std::string named(const std::string& message) const {
    if (message.rfind("jump host ", 0) == 0) {
      return message; // already names the hop that failed
    }
    return "jump host '" + m_name + "': " + message;
  }

  void run() {
    install_thread_logging();
    ThreadKeys keys;
    WorkerContext ctx{m_slot, keys, m_identities, m_cancel};
    Connected c = connect_with_retries(ctx, m_options, m_target, m_attempt);
    if (c.failure) {
      fail(Failure{c.failure->outcome, named(c.failure->message), c.failure->transient});
      return;
    }
    spdlog::debug("jump host {}: connected ({})", m_name, c.session->host_label());
    serve(c.session->handle());
    // c.session ends here: the bastion's session is disconnected (and, several hops, the
    // session to the hop before it released).
  }

  void open_channels(ssh_session s, std::vector<Opening>& openings, std::vector<Pump>& pumps) {
    ssh_set_blocking(s, 0);
    for (auto it = openings.begin(); it != openings.end();) {
      const Request& r = *it->request;
      int rc = ssh_channel_open_forward(it->channel, r.host.c_str(), static_cast<int>(r.port),
                                        "127.0.0.1", 65535);
      bool abandoned;
      {
        std::lock_guard lock(m_mutex);
        abandoned = it->request->abandoned;
      }
      if (rc == SSH_AGAIN && !abandoned && Clock::now() < it->deadline) {
        ++it;
        continue;
      }
      const std::string where = r.host + ":" + std::to_string(r.port);
      int sv[2] = {-1, -1};
      if (rc == SSH_OK && !abandoned &&
          ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
        ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
        pumps.push_back(Pump{it->channel, sv[0], {}, false, false});
        finish(it->request, sv[1], std::nullopt);
      } else {
        std::optional<Failure> failure;
        if (abandoned) {
          failure = Failure{Outcome::interrupted, "interrupted while connecting"};
        } else if (rc == SSH_AGAIN) {
          failure = Failure{Outcome::unreachable,
                            "jump host '" + m_name + "' could not reach " + where + " within " +
                                std::to_string(m_options.connect_timeout.count() / 1000) + "s",
                            true};
        } else if (rc == SSH_OK) {
          failure = Failure{Outcome::error,
                            std::string("cannot make a socket pair: ") + std::strerror(errno)};
        } else {
          const std::string why = ssh_get_error(s);
          Outcome outcome =
              why.find("refused") != std::string::npos ? Outcome::refused : Outcome::unreachable;
          std::string hint;
          if (why.find("prohibited") != std::string::npos) {
            outcome = Outcome::error;
            hint = " (the jump host's sshd must allow TCP forwarding: AllowTcpForwarding)";
          }
          failure = Failure{outcome, "jump host '" + m_name + "' could not open a connection to " +
                                         where + ": " + why + hint};
        }
        ssh_channel_free(it->channel);
        finish(it->request, -1, failure);
      }
      it = openings.erase(it);
    }
    ssh_set_blocking(s, 1);
  }

  // Moves what can move without waiting, both ways.
  static void pump(Pump& p, char* buf) {
    // worker -> channel, as far as the window allows
    for (uint32_t window = ssh_channel_window_size(p.channel); window > 0;
         window = ssh_channel_window_size(p.channel)) {
      ssize_t n = ::read(p.fd, buf, std::min<size_t>(window, k_pump_chunk));
      if (n > 0) {
        if (ssh_channel_write(p.channel, buf, static_cast<uint32_t>(n)) != n) {
          p.done = true;
          return;
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        break;
      }
      p.done = true; // the worker's session closed its socket (libssh never half-closes)
      return;
    }
    // channel -> worker, through a bounded buffer
    while (!p.channel_eof && p.to_fd.size() < k_pump_pending) {
      int n = ssh_channel_read_nonblocking(p.channel, buf, k_pump_chunk, 0);
      if (n > 0) {
        p.to_fd.append(buf, static_cast<size_t>(n));
      } else if (n == SSH_EOF) {
        p.channel_eof = true;
      } else if (n == 0) {
        break;
      } else {
        p.done = true;
        return;
      }
    }
    while (!p.to_fd.empty()) {
      ssize_t n = ::send(p.fd, p.to_fd.data(), p.to_fd.size(), MSG_NOSIGNAL);
      if (n > 0) {
        p.to_fd.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        break;
      } else {
        p.done = true;
        return;
      }
    }
    if ((p.channel_eof || ssh_channel_is_closed(p.channel)) && p.to_fd.empty()) {
      ::shutdown(p.fd, SHUT_WR); // the worker's session reads the end of the connection
      p.channel_eof = true;
    }
  }

  static void close_pump(Pump& p) {
    ssh_channel_close(p.channel);
    ssh_channel_free(p.channel);
    ::close(p.fd);
  }

  void serve(ssh_session s) {
    std::vector<Opening> openings;
    std::vector<Pump> pumps;
    std::vector<char> buf(k_pump_chunk);
    std::optional<Failure> lost;
    while (true) {
      std::vector<std::shared_ptr<Request>> fresh;
      {
        std::lock_guard lock(m_mutex);
        if (m_stop) {
          break;
        }
        fresh.swap(m_requests);
      }
      uint64_t count = 0;
      [[maybe_unused]] auto drained = ::read(m_wake, &count, sizeof count);
      for (auto& r : fresh) {
        ssh_channel channel = ssh_channel_new(s);
        if (channel == nullptr) {
          finish(r, -1,
                 Failure{Outcome::error,
                         named(std::string("cannot open a channel: ") + ssh_get_error(s))});
          continue;
        }
        openings.push_back(Opening{r, channel, Clock::now() + m_options.connect_timeout});
      }
      if (!openings.empty()) {
        open_channels(s, openings, pumps);
      }
      for (auto& p : pumps) {
        pump(p, buf.data());
      }
      for (auto it = pumps.begin(); it != pumps.end();) {
        if (it->done) {
          close_pump(*it);
          it = pumps.erase(it);
        } else {
          ++it;
        }
      }
      if (ssh_is_connected(s) == 0 || (ssh_get_status(s) & (SSH_CLOSED | SSH_CLOSED_ERROR))) {
        lost = Failure{Outcome::error,
                       named(std::string("the connection was lost: ") + ssh_get_error(s)), true};
        break;
      }
      std::vector<pollfd> fds;
      fds.push_back(pollfd{m_wake, POLLIN, 0});
      fds.push_back(pollfd{ssh_get_fd(s), POLLIN, 0});
      for (const auto& p : pumps) {
        short events = 0;
        if (ssh_channel_window_size(p.channel) > 0) {
          events |= POLLIN;
        }
        if (!p.to_fd.empty()) {
          events |= POLLOUT;
        }
        // Nothing to wait for on this socket (its window is shut, nothing buffered): left out,
        // so that a hang-up there cannot spin the loop; the bastion's socket wakes it.
        fds.push_back(pollfd{events != 0 ? p.fd : -1, events, 0});
      }
      ::poll(fds.data(), fds.size(), openings.empty() ? 200 : 20);
    }
    for (auto& o : openings) {
      ssh_channel_free(o.channel);
      finish(o.request, -1, lost ? *lost : Failure{Outcome::interrupted, named("the run ended")});
    }
    for (auto& p : pumps) {
      close_pump(p);
    }
    fail(lost ? *lost : Failure{Outcome::interrupted, named("the run ended")});
  }

  const std::string m_name; // the hop as given ("user@bastion:22")
  const SshTarget m_target;
  SshOptions m_options;
  SshOptions m_attempt; // what the bastion's session refers to (connect_with_retries)
  const IdentityStore& m_identities;
  const CancelToken* m_cancel;
  WorkerSlot m_slot;
  int m_wake = -1;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false;
  bool m_failed = false;
  std::optional<Failure> m_failure;
  std::vector<std::shared_ptr<Request>> m_requests;
  std::thread m_thread; // last: started when everything above is ready
};

JumpHubs::~JumpHubs() {
  std::map<std::string, std::shared_ptr<JumpHub>> hubs;
  {
    std::lock_guard lock(m_mutex);
    hubs.swap(m_hubs);
  }
  hubs.clear(); // each hub no session holds any more stops and joins its thread here
}

JumpSocket JumpHubs::open(WorkerContext& ctx, const SshOptions& options, const SshTarget& target,
                          const std::vector<JumpHop>& chain, const std::string& host,
                          unsigned port) {
  const std::string key =
      to_string(chain) + "\n" + target.identity_file + "\n" + target.known_hosts_file;
  std::shared_ptr<JumpHub> hub;
  {
    std::lock_guard lock(m_mutex);
    auto& slot = m_hubs[key];
    if (!slot || slot->replaceable()) {
      const JumpHop& last = chain.back();
      SshTarget bastion;
      bastion.name = to_string(last);
      bastion.address = last.host;
      bastion.port = last.port;
      bastion.user = last.user;
      bastion.identity_file = target.identity_file;
      bastion.known_hosts_file = target.known_hosts_file;
      bastion.proxy_jump = chain.size() == 1
                               ? std::string("none")
                               : to_string(std::vector<JumpHop>(chain.begin(), chain.end() - 1));
      slot = std::make_shared<JumpHub>(to_string(last), std::move(bastion), options, ctx.identities,
                                       ctx.cancel);
    }
    hub = slot;
  }
  auto [fd, failure] = hub->open(host, port, ctx.cancel);
  return JumpSocket{fd, failure ? nullptr : hub, failure};
}

} // namespace tpuctl::remote::detail
