// Real concurrency on one SQLite state file: forked processes (each with its own connection, as
// separate tpuctl invocations have) race to claim overlapping hosts and to increment one counter.
// Each child logs every successful commit with its revision; the parent then checks that no host
// was ever held by two owners at once (claim/release revision intervals never overlap), that no
// increment was lost, and that every failure was a clean hosts_busy or conflict, never a raw
// "database is locked". Children never touch doctest: they _exit() with a status.
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "state/sqlite_store.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;
using namespace tpuctl::state;

namespace {

constexpr int k_hosts = 12;

Expected<std::unique_ptr<SqliteStore>> open_path(const std::string& path) {
  SqliteOptions o;
  o.path = path;
  return SqliteStore::open(o);
}

// Blocks until the parent closes the write end, so all children start together.
void wait_for_start(int fd) {
  char c;
  while (::read(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

// One racing tpuctl: `rounds` times claim 3 random hosts, increment the counter (alternately
// through transact() and a hand-written get/update CAS loop), release the hosts.
int race_child(const std::string& path, int index, int rounds, const std::string& log_path) {
  std::ofstream log(log_path);
  auto opened = open_path(path);
  if (!opened) {
    log << "error open " << opened.error().message << "\n";
    return 2;
  }
  StateStore& s = **opened;
  std::mt19937 rng(static_cast<unsigned>(index) * 7919u + 1u);
  auto fail = [&](const Error& e) {
    log << "error " << e.reason << " " << e.message << "\n";
    return 3;
  };
  auto increment = [&](bool use_transact) -> int {
    if (use_transact) {
      auto r = s.transact([](StateStore& st) -> Expected<std::vector<Op>> {
        TPUCTL_TRY_ASSIGN(auto rec, st.get(pool_key("p")));
        Json doc = rec.doc;
        doc["counter"] = doc["counter"].get<int64_t>() + 1;
        return std::vector<Op>{UpdateOp{pool_key("p"), doc, rec.version}};
      });
      if (!r) {
        return fail(r.error());
      }
      log << "inc " << r->revision << "\n";
      return 0;
    }
    for (;;) {
      auto rec = s.get(pool_key("p"));
      if (!rec) {
        return fail(rec.error());
      }
      Json doc = rec->doc;
      doc["counter"] = doc["counter"].get<int64_t>() + 1;
      std::this_thread::yield(); // widen the read-write window
      auto r = s.update(pool_key("p"), doc, rec->version);
      if (r) {
        log << "inc " << r->revision << "\n";
        return 0;
      }
      if (!has_reason(r.error(), reason::k_conflict)) {
        return fail(r.error());
      }
      log << "conflict\n";
    }
  };
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> all;
    for (int h = 0; h < k_hosts; ++h) {
      all.push_back("h" + std::to_string(h));
    }
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<std::string> want(all.begin(), all.begin() + 3);
    std::string owner = "qr-" + std::to_string(index) + "-" + std::to_string(round);
    Event ev{0,
             0,
             "p",
             Kind::queued_resource,
             owner,
             "STATE_CHANGED",
             "WAITING_FOR_RESOURCES",
             "PROVISIONING",
             Initiator::service,
             Json::object(),
             ""};
    auto c = s.commit({ClaimOp{"p", want, owner, std::chrono::seconds(0)}, EventOp{ev}});
    if (!c && !has_reason(c.error(), reason::k_hosts_busy)) {
      return fail(c.error());
    }
    if (c) {
      log << "claim " << c->revision << " " << owner;
      for (const auto& h : want) {
        log << " " << h;
      }
      log << "\n";
    } else {
      log << "busy\n";
    }
    if (int rc = increment(round % 2 == 0); rc != 0) {
      return rc;
    }
    if (c) {
      auto r = s.release_hosts("p", want, owner);
      if (!r) {
        return fail(r.error());
      }
      log << "release " << r->revision << " " << owner << "\n";
    }
  }
  log << "done\n";
  return log.good() ? 0 : 4;
}

// Forks `n` children running body(i), releases them at once, waits (killing stragglers by PID
// after `limit`) and returns their exit statuses.
std::vector<int> run_children(int n, const std::function<int(int)>& body,
                              std::chrono::seconds limit) {
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(gate[1]);
      wait_for_start(gate[0]);
      int rc = 5;
      try {
        rc = body(i);
      } catch (...) {
        rc = 6;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]); // go
  std::vector<int> status(static_cast<size_t>(n), -1);
  auto deadline = std::chrono::steady_clock::now() + limit;
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) {
        continue;
      }
      int ws = 0;
      if (::waitpid(pids[i], &ws, WNOHANG) == pids[i]) {
        status[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (status[i] == -1) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
          status[i] = 999;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("state::SqliteStore: 16 racing processes never double-claim a host or lose an update") {
  tpuctl::test::TempDir tmp;
  std::string path = (tmp.path() / "state.db").string();
  {
    auto s = open_path(path);
    REQUIRE(s);
    REQUIRE((*s)->create(pool_key("p"), {{"counter", 0}}));
    for (int h = 0; h < k_hosts; ++h) {
      REQUIRE((*s)->create(host_key("p", "h" + std::to_string(h)), Json::object()));
    }
  } // closed before fork: a child must never inherit a live SQLite connection

  constexpr int k_children = 16;
  constexpr int k_rounds = 12;
  auto log_of = [&](int i) {
    return (tmp.path() / ("child-" + std::to_string(i) + ".log")).string();
  };
  auto status = run_children(
      k_children, [&](int i) { return race_child(path, i, k_rounds, log_of(i)); },
      std::chrono::seconds(120));

  // Parse every child's log.
  struct Hold {
    int64_t from;
    int64_t to;
    std::string owner;
  };
  std::map<std::string, std::vector<Hold>> holds;                              // host -> holds
  std::map<std::string, std::pair<int64_t, std::vector<std::string>>> claimed; // owner -> claim
  int64_t increments = 0, conflicts = 0, busy = 0;
  std::vector<std::string> errors;
  for (int i = 0; i < k_children; ++i) {
    CAPTURE(i);
    CHECK(status[static_cast<size_t>(i)] == 0);
    std::ifstream in(log_of(i));
    std::string line;
    bool done = false;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string what;
      ls >> what;
      if (what == "claim") {
        int64_t rev;
        std::string owner, h;
        ls >> rev >> owner;
        std::vector<std::string> hosts;
        while (ls >> h) {
          hosts.push_back(h);
        }
        claimed[owner] = {rev, hosts};
      } else if (what == "release") {
        int64_t rev;
        std::string owner;
        ls >> rev >> owner;
        auto it = claimed.find(owner);
        REQUIRE(it != claimed.end());
        for (const auto& h : it->second.second) {
          holds[h].push_back({it->second.first, rev, owner});
        }
        claimed.erase(it);
      } else if (what == "inc") {
        ++increments;
      } else if (what == "conflict") {
        ++conflicts;
      } else if (what == "busy") {
        ++busy;
      } else if (what == "done") {
        done = true;
      } else {
        errors.push_back(line);
      }
    }
    CHECK(done);
  }
  CHECK(errors.empty());
  for (const auto& e : errors) {
    MESSAGE(e);
    CHECK(e.find("database is locked") == std::string::npos);
  }
  CHECK(claimed.empty()); // every claim was released

  // No host was ever held by two owners at once.
  int64_t successful_claims = 0;
  for (auto& [host, list] : holds) {
    std::sort(list.begin(), list.end(),
              [](const Hold& a, const Hold& b) { return a.from < b.from; });
    for (size_t k = 1; k < list.size(); ++k) {
      CAPTURE(host);
      CAPTURE(list[k - 1].owner);
      CAPTURE(list[k].owner);
      CHECK(list[k].from >= list[k - 1].to);
    }
  }
  for (const auto& [host, list] : holds) {
    successful_claims += static_cast<int64_t>(list.size());
  }
  successful_claims /= 3;
  MESSAGE("claims won: " << successful_claims << ", lost to busy hosts: " << busy
                         << ", increments: " << increments
                         << ", CAS conflicts retried: " << conflicts);
  CHECK(increments == int64_t{k_children} * k_rounds);
  CHECK(successful_claims + busy == int64_t{k_children} * k_rounds);

  // The store agrees with what the children were told.
  auto s = open_path(path);
  REQUIRE(s);
  CHECK((*s)->get(pool_key("p"))->doc["counter"] == increments);
  CHECK((*s)->claims("p")->empty());
  CHECK(static_cast<int64_t>((*s)->events(EventQuery{"p", std::nullopt, "", 0, 0})->size()) ==
        successful_claims);
}

TEST_CASE("state::SqliteStore: processes opening a new file at once migrate it exactly once") {
  tpuctl::test::TempDir tmp;
  std::string path = (tmp.path() / "fresh.db").string();
  constexpr int k_children = 8;
  auto status = run_children(
      k_children,
      [&](int i) {
        auto s = open_path(path);
        if (!s) {
          std::fprintf(stderr, "child %d: %s\n", i, s.error().message.c_str());
          return 2;
        }
        return (*s)->create(pool_key("p" + std::to_string(i)), Json::object()) ? 0 : 3;
      },
      std::chrono::seconds(60));
  for (int i = 0; i < k_children; ++i) {
    CAPTURE(i);
    CHECK(status[static_cast<size_t>(i)] == 0);
  }
  auto s = open_path(path);
  REQUIRE(s);
  CHECK((*s)->info().schema_version == k_schema_version);
  auto pools = (*s)->list(Kind::pool, "");
  REQUIRE(pools);
  CHECK(pools->records.size() == k_children);
  CHECK(pools->revision == k_children); // one commit each, nothing lost to a second migration
}
