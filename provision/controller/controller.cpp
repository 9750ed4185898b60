#include "provision/controller/controller.hpp"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "provision/controller/drivers.hpp"
#include "provision/controller/monitors.hpp"
#include "provision/pool/ownership.hpp"
#include "provision/pool/pools.hpp"
#include "provision/workload/workload.hpp"

namespace tpuctl::provision {

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) {
    return "localhost";
  }
  return buf;
}

// Who leads, kept by its own thread on its own connection (the essay): campaigns every TTL/3.
class Leadership {
public:
  Leadership(std::unique_ptr<state::StateStore> store, Json candidate, std::chrono::seconds ttl)
      : m_store(std::move(store)), m_candidate(std::move(candidate)), m_ttl(ttl) {}
  ~Leadership() { stop(); }
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // The first campaign, here; then the thread. Errors: the store's (k_unsupported: no elections).
  Status start() {
    TPUCTL_TRY(campaign());
    m_thread = std::thread([this] {
      std::unique_lock lock(m_mutex);
      while (!m_stopping) {
        m_wake.wait_for(lock, std::chrono::duration_cast<Ms>(m_ttl) / 3,
                        [this] { return m_stopping; });
        if (m_stopping) {
          break;
        }
        lock.unlock();
        (void)campaign();
        lock.lock();
      }
    });
    return ok();
  }

  // Leading now: the last campaign said so, and it was less than a TTL ago.
  bool leading() const {
    std::lock_guard lock(m_mutex);
    return m_ours && Clock::now() - m_confirmed < m_ttl;
  }
  Json leader() const {
    std::lock_guard lock(m_mutex);
    return m_leader;
  }

  // Stops campaigning and gives the leadership up at once.
  void stop() {
    {
      std::lock_guard lock(m_mutex);
      if (m_stopping) {
        return;
      }
      m_stopping = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) {
      m_thread.join();
    }
    (void)m_store->resign(k_controller_role);
  }

private:
  Status campaign() {
    auto r = m_store->campaign(k_controller_role, m_candidate, m_ttl);
    std::lock_guard lock(m_mutex);
    if (!r) {
      spdlog::warn("controller: the leadership could not be renewed: {}", r.error().message);
      return r.error();
    }
    m_ours = r->ours;
    m_leader = r->leader;
    if (r->ours) {
      m_confirmed = Clock::now();
    }
    return ok();
  }

  std::unique_ptr<state::StateStore> m_store;
  Json m_candidate;
  std::chrono::seconds m_ttl;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::thread m_thread;
  bool m_stopping = false;
  bool m_ours = false;
  Clock::time_point m_confirmed{};
  Json m_leader;
};

std::string describe(const Json& leader) {
  if (!leader.is_object()) {
    return "nobody";
  }
  return leader.value("id", std::string("?")) + " (" + leader.value("actor", std::string("?")) +
         ")";
}

// The monitors of the workloads of controller pools that lack one.
Status start_monitors(state::StateStore& store, const ControllerOptions& o,
                      const std::string& leader_id) {
  Launcher launcher = o.launcher;
  launcher.as_controller = true;
  launcher.leader_id = leader_id;
  TPUCTL_TRY_ASSIGN(auto pools, list_pools(store));
  for (const auto& p : pools) {
    if (p.ssh_work != SshWork::controller || (!o.pool.empty() && p.name != o.pool)) {
      continue;
    }
    TPUCTL_TRY_ASSIGN(auto workloads, list_workloads(store, p.name, ""));
    for (const auto& w : workloads) {
      ensure_monitor(launcher, store, w);
    }
  }
  return ok();
}

void sleep_for(Ms total, const remote::CancelToken* cancel) {
  for (auto waited = Ms(0); waited < total && !(cancel && cancel->cancelled()); waited += Ms(100)) {
    std::this_thread::sleep_for(Ms(100));
  }
}

} // namespace

Expected<ControllerResult> run_controller(state::StateStore& store, const ControllerOptions& o,
                                          const remote::CancelToken* cancel) {
  ControllerResult result;
  const std::string id = this_host() + ":" + std::to_string(getpid()) + ":" +
                         std::to_string(state::to_unix_ms(state::system_clock()()));
  const Json candidate{{"id", id},
                       {"actor", store.actor()},
                       {"host", this_host()},
                       {"pid", static_cast<int>(getpid())},
                       {"since_ms", state::to_unix_ms(state::system_clock()())}};
  std::unique_ptr<Leadership> leadership;
  // Does the store hold elections at all? (SQLite does not: there every controller drives.)
  if (auto probe = store.leader(k_controller_role); probe) {
    if (!o.open_store) {
      return Error(ErrorKind::failure, "controller: no second connection for the leadership");
    }
    TPUCTL_TRY_ASSIGN(auto own, o.open_store());
    leadership = std::make_unique<Leadership>(std::move(own), candidate, o.leadership_ttl);
    TPUCTL_TRY(leadership->start());
  } else if (!state::has_reason(probe.error(), state::reason::k_unsupported)) {
    return probe.error();
  }
  auto say = [&](const std::string& line) {
    spdlog::info("controller: {}", line);
    if (o.progress) {
      o.progress(line);
    }
  };
  std::string said;
  for (;;) {
    const bool leading = !leadership || leadership->leading();
    const std::string now_said =
        !leadership ? "driving (this store holds no elections: every controller drives)"
        : leading   ? "leading as " + id
                    : "standing by: " + describe(leadership->leader()) + " leads";
    if (now_said != said) {
      say(now_said);
      said = now_said;
    }
    if (leading) {
      result.led = true;
      DriveOptions drive = o.drive;
      drive.as_controller = leadership != nullptr;
      TPUCTL_TRY_ASSIGN(int n, drive_pools(store, o.pool, drive, cancel));
      result.carried += n;
      if (leadership) {
        TPUCTL_TRY(start_monitors(store, o, id));
      }
    }
    if (o.once || (cancel && cancel->cancelled())) {
      break;
    }
    sleep_for(o.interval, cancel);
    if (cancel && cancel->cancelled()) {
      break;
    }
  }
  if (leadership) {
    const Json leader = leadership->leader();
    result.leader = leadership->leading() ? id
                    : leader.is_object()  ? leader.value("id", std::string())
                                          : "";
    leadership->stop(); // resigns: a standby leads at its next campaign
  } else {
    result.leader = id;
  }
  return result;
}

bool acting_for_controller(state::StateStore& store) {
  const char* claimed = std::getenv(k_leader_env);
  if (claimed == nullptr || *claimed == '\0') {
    return false;
  }
  auto leader = store.leader(k_controller_role);
  if (!leader || !leader->is_object()) {
    return false;
  }
  return leader->value("id", std::string()) == claimed &&
         same_owner(leader->value("actor", std::string()), store.actor());
}

} // namespace tpuctl::provision
