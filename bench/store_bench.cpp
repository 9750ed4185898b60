// store_bench: the state store at pod scale, store calls only (no SSH, no CLI).
//
//   store_bench --etcd HOST:PORT --sqlite-dir DIR [--tpuctl PATH] [--runs 5] [--hosts 2304]
//
// Per backend (SQLite in a scratch file, etcd under a fresh prefix per run) and per run, on a
// new tpu7x pool of --hosts host records (~330 bytes each, as `pool add-hosts` writes them):
//   add      one commit creating every host record (bulk add-hosts, local-up, import)
//   claim    reconcile's shape of a claim: read the pool's claims, then one commit claiming
//            every host for one owner (a tpu7x-18432 slice), through transact()
//   release  release_all of that owner (read its claims, one commit releasing them)
//   snapshot one snapshot() of the whole pool (what `pool describe` and `qr list` read)
// and, on the first run's pool, commits per second from 1 and from 8 writers (own handles) each
// claiming and releasing one host of its own: how fast one pool's claims can change.
// The peer, in the same process: one bare etcd txn through the same HTTP client putting 33
// values of the same total size as the claim's writes (what any etcd client pays to move those
// bytes), so claim / floor says what tpuctl adds on top of etcd itself.
// With --tpuctl, then per backend: a pool of --hosts hosts all claimed by one ACTIVE
// tpu7x-18432 request (placed by the scheduler, marked ACTIVE in the store: no SSH), and the
// wall time of whole `tpuctl qr list` and `tpuctl pool describe` processes on it (--runs each).
// Prints one JSON line per run and a markdown table of medians (min-max) on stdout.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/pool/pools.hpp"
#include "provision/queue/reconcile.hpp"
#include "provision/slice/qr_ops.hpp"
#include "state/etcd_client.hpp"
#include "state/etcd_wire.hpp"
#include "state/location.hpp"
#include "tests/support/pod_hosts.hpp"
#include "util/process.hpp"

namespace fs = std::filesystem;
using namespace tpuctl;
using nlohmann::json;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void die(const std::string& what, const Error& e) {
  std::cerr << "store_bench: " << what << ": " << e.message << "\n";
  std::exit(1);
}

using Times = std::map<std::string, double>; // step -> ms

Times run_once(state::StateStore& s, int hosts) {
  Times t;
  if (auto r = s.create(state::pool_key("pod"), {{"generation", "tpu7x"}}); !r) {
    die("create pool", r.error());
  }
  std::vector<state::Op> adds;
  std::vector<std::string> names;
  for (int i = 0; i < hosts; ++i) {
    json doc = test::pod_host_doc(i);
    names.push_back(doc["name"]);
    adds.push_back(state::CreateOp{state::host_key("pod", names.back()), doc});
  }
  double t0 = now_ms();
  if (auto r = s.commit(adds); !r) {
    die("add hosts", r.error());
  }
  t["add"] = now_ms() - t0;
  t0 = now_ms();
  auto claimed = s.transact([&](state::StateStore& st) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY(st.claims("pod"));
    return std::vector<state::Op>{state::ClaimOp{"pod", names, "whole"}};
  });
  if (!claimed) {
    die("claim", claimed.error());
  }
  t["claim"] = now_ms() - t0;
  t0 = now_ms();
  auto snap = s.snapshot("pod");
  if (!snap || snap->claims.size() != static_cast<size_t>(hosts)) {
    die("snapshot", snap ? Error(ErrorKind::failure, "claims missing") : snap.error());
  }
  t["snapshot"] = now_ms() - t0;
  t0 = now_ms();
  if (auto r = s.release_all("pod", "whole"); !r) {
    die("release", r.error());
  }
  t["release"] = now_ms() - t0;
  return t;
}

// One bare etcd txn of `values` puts totalling `bytes` (the peer).
double bare_txn(const std::string& endpoint, const std::string& prefix, size_t bytes) {
  state::etcd::ClientOptions o;
  o.endpoints = {"http://" + endpoint};
  state::etcd::Client client(o);
  std::vector<json> puts;
  const size_t values = 33;
  for (size_t i = 0; i < values; ++i) {
    puts.push_back(state::etcd::op_put(state::etcd::put_request(
        prefix + "floor/" + std::to_string(i), std::string(bytes / values, 'x'))));
  }
  json txn = state::etcd::txn_request({}, puts);
  double t0 = now_ms();
  auto r = client.post("/v3/kv/txn", txn, state::etcd::Retry::unsent_only);
  if (!r) {
    die("bare txn", r.error());
  }
  return now_ms() - t0;
}

// A pool of `hosts` hosts held whole by ACTIVE request "whole", as the CLI would leave it.
void active_pod(state::StateStore& s, int hosts) {
  auto layout = provision::make_pool_layout("tpu7x", 4, "");
  if (!layout) {
    die("layout", layout.error());
  }
  if (auto r = provision::create_pool(s, "cli", *layout); !r) {
    die("create pool", r.error());
  }
  std::vector<util::HostSpec> specs;
  for (int i = 0; i < hosts; ++i) {
    specs.push_back({"", test::pod_host_doc(i)["name"], 0});
  }
  if (auto r = provision::add_hosts(s, "cli", specs, {}); !r) {
    die("add hosts", r.error());
  }
  provision::CreateRequest req;
  req.id = "whole";
  req.pool = "cli";
  req.accelerator_type = "tpu7x-18432";
  if (auto r = provision::create_queued_resource(s, req, state::system_clock(), false); !r) {
    die("create request", r.error());
  }
  if (auto r = provision::reconcile_pool(s, "cli", state::system_clock()); !r) {
    die("place request", r.error());
  }
  auto active = s.transact([&](state::StateStore& st) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(auto qr, provision::load_queued_resource(st, "cli", "whole"));
    provision::transition(qr, provision::QrState::active, state::Initiator::service,
                          state::to_unix_ms(std::chrono::system_clock::now()), "bench");
    return std::vector<state::Op>{
        state::UpdateOp{state::queued_resource_key("cli", "whole"), to_json(qr), qr.version}};
  });
  if (!active) {
    die("mark active", active.error());
  }
}

// Commits per second on one pool from `writers` threads, each with its own store handle (as
// separate tpuctl processes have), for `seconds`: each claims one host of its own and releases
// it, over and over, through transact(). Hosts hash to the 16 pages, so writers meet on pages.
double commits_per_second(const std::string& url, int writers, double seconds) {
  std::vector<std::unique_ptr<state::StateStore>> handles;
  for (int w = 0; w < writers; ++w) {
    auto s = state::open_store(url);
    if (!s) {
      die("open " + url, s.error());
    }
    handles.push_back(std::move(*s));
  }
  std::atomic<long> commits{0};
  const double end = now_ms() + seconds * 1000;
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      auto& s = *handles[static_cast<size_t>(w)];
      const std::string host = test::pod_host_doc(w)["name"];
      const std::string owner = "writer-" + std::to_string(w);
      while (now_ms() < end) {
        auto c = s.claim_hosts("pod", {host}, owner);
        auto r = s.release_hosts("pod", {host}, owner);
        if (!c || !r) {
          die("contended claim", c ? r.error() : c.error());
        }
        commits += 2;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return static_cast<double>(commits) / seconds;
}

// Wall time of `tpuctl --state URL --pool cli ARGS...`, a whole process.
double time_cli(const std::string& tpuctl, const std::string& url,
                const std::vector<std::string>& args) {
  std::vector<std::string> argv{tpuctl, "--state", url, "--pool", "cli"};
  argv.insert(argv.end(), args.begin(), args.end());
  util::ProcessOptions o;
  o.env_unset = {"TPUCTL_STATE", "TPUCTL_POOL"};
  double t0 = now_ms();
  auto r = util::run_process(argv, o);
  double ms = now_ms() - t0;
  if (!r || r->exit_code != 0) {
    die(args[0] + " " + args[1], r ? Error(ErrorKind::failure, r->err) : r.error());
  }
  return ms;
}

} // namespace

int main(int argc, char** argv) {
  std::string etcd;
  int runs = 5;
  int hosts = 2304;
  std::string sqlite_dir;
  std::string tpuctl;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--etcd") {
      etcd = argv[i + 1];
    } else if (a == "--runs") {
      runs = std::atoi(argv[i + 1]);
    } else if (a == "--hosts") {
      hosts = std::atoi(argv[i + 1]);
    } else if (a == "--tpuctl") {
      tpuctl = argv[i + 1];
    } else if (a == "--sqlite-dir") {
      sqlite_dir = argv[i + 1];
    } else {
      std::cerr << "store_bench: unknown option '" << a << "'\n";
      return 2;
    }
  }
  if (etcd.empty() || sqlite_dir.empty() || runs < 1 || hosts < 1) {
    std::cerr << "usage: store_bench --etcd HOST:PORT --sqlite-dir DIR [--runs N] [--hosts N]\n";
    return 2;
  }
  std::map<std::string, std::map<std::string, std::vector<double>>> all; // backend, step
  std::vector<double> floor;
  const std::string stamp = std::to_string(static_cast<long long>(now_ms()));
  for (int run = 0; run < runs; ++run) {
    for (const std::string backend : {"sqlite", "etcd"}) {
      std::string prefix = "/bench-" + stamp + "-" + std::to_string(run) + "/";
      std::string url =
          backend == "etcd"
              ? "etcd://" + etcd + prefix
              : "sqlite:" + (fs::path(sqlite_dir) / ("run" + std::to_string(run) + ".db")).string();
      auto store = state::open_store(url);
      if (!store) {
        die("open " + url, store.error());
      }
      Times t = run_once(**store, hosts);
      if (run == 0) {
        // On the pool run_once left (all hosts free again): one writer, then eight.
        for (int writers : {1, 8}) {
          all[backend]["writers" + std::to_string(writers)].push_back(
              commits_per_second(url, writers, 2.0));
        }
      }
      json line{{"backend", backend}, {"run", run}, {"hosts", hosts}};
      for (const auto& [step, ms] : t) {
        all[backend][step].push_back(ms);
        line[step + "_ms"] = ms;
      }
      if (backend == "etcd") {
        // The claim rewrote 16 claim pages: ~13 bytes a host.
        floor.push_back(bare_txn(etcd, prefix, static_cast<size_t>(hosts) * 13));
        line["floor_ms"] = floor.back();
      }
      std::cout << line.dump() << "\n";
    }
  }
  auto cell = [](const std::vector<double>& v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f (%.0f-%.0f)", median(v),
                  *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
    return std::string(buf);
  };
  std::cout << "\n| backend | add " << hosts << " hosts, ms | claim all, ms | snapshot, ms | "
            << "release all, ms |\n|---|---|---|---|---|\n";
  for (const auto& [backend, steps] : all) {
    std::cout << "| " << backend << " | " << cell(steps.at("add")) << " | "
              << cell(steps.at("claim")) << " | " << cell(steps.at("snapshot")) << " | "
              << cell(steps.at("release")) << " |\n";
  }
  std::cout << "\n| backend | commits/s, 1 writer | commits/s, 8 writers |\n|---|---|---|\n";
  for (const auto& [backend, steps] : all) {
    std::cout << "| " << backend << " | " << median(steps.at("writers1")) << " | "
              << median(steps.at("writers8")) << " |\n";
  }
  std::cout << "\netcd floor (one bare txn of the claim's bytes): " << cell(floor)
            << " ms; claim / floor = " << median(all["etcd"]["claim"]) / median(floor) << "\n";
  if (tpuctl.empty()) {
    return 0;
  }
  std::cout << "\n| backend | `qr list`, ms | `pool describe`, ms |\n|---|---|---|\n";
  for (const std::string backend : {"sqlite", "etcd"}) {
    std::string url = backend == "etcd" ? "etcd://" + etcd + "/bench-" + stamp + "-cli/"
                                        : "sqlite:" + (fs::path(sqlite_dir) / "cli.db").string();
    auto store = state::open_store(url);
    if (!store) {
      die("open " + url, store.error());
    }
    active_pod(**store, hosts);
    std::vector<double> list, describe;
    for (int run = 0; run < runs; ++run) {
      list.push_back(time_cli(tpuctl, url, {"qr", "list"}));
      describe.push_back(time_cli(tpuctl, url, {"pool", "describe"}));
    }
    std::cout << "| " << backend << " | " << cell(list) << " | " << cell(describe) << " |\n";
  }
  return 0;
}
