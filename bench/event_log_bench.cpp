// event_log_bench: how big a store gets after N queued requests have come and gone, with the
// event log's retention (state/event_retention.hpp) and without it. Store calls only (no SSH,
// no CLI): per request, the commits its life makes, each with its events as tpuctl writes them:
// create (the record, ~700 bytes, and CREATED), three state changes (ACCEPTED -> ... -> ACTIVE,
// STATE_CHANGED each), the delete (DELETING, then the record removed with DELETED).
//
//   event_log_bench --sqlite-dir DIR [--etcd HOST:PORT] [--requests 10000]
//
// Retention comes from the environment as for tpuctl (TPUCTL_EVENT_MAX, TPUCTL_EVENT_RETENTION;
// bench/event_log.sh runs it with the defaults and with TPUCTL_EVENT_MAX=0, no limit). Prints
// one JSON line per backend: requests, events kept, records left, and the store's size (SQLite:
// the database file after a checkpoint; etcd: the bytes of the live keys under the prefix, and
// the member's database size, which also holds etcd's own history until etcd compacts it).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "state/etcd_client.hpp"
#include "state/etcd_store.hpp"
#include "state/etcd_wire.hpp"
#include "state/location.hpp"
#include "state/store.hpp"

using nlohmann::json;
namespace st = tpuctl::state;

namespace {

json record(const std::string& id, const std::string& state) {
  return json{{"id", id},
              {"state", state},
              {"accelerator_type", "v5litepod-4"},
              {"owner", "alice"},
              {"labels", json::object()},
              {"metadata", {{"startup-script", std::string(200, 'x')}}},
              {"history", json::array({{{"from", "ACCEPTED"}, {"to", state}, {"reason", "bench"}}})},
              {"padding", std::string(300, 'p')}};
}

st::Event event(const std::string& pool, const std::string& id, const std::string& type,
                const std::string& from, const std::string& to) {
  st::Event e;
  e.pool = pool;
  e.subject_kind = st::Kind::queued_resource;
  e.subject = id;
  e.type = type;
  e.from_state = from;
  e.to_state = to;
  e.detail = {{"reason", "bench"}};
  return e;
}

bool life(st::StateStore& store, const std::string& pool, const std::string& id) {
  const st::Key key = st::queued_resource_key(pool, id);
  auto created = store.commit({st::CreateOp{key, record(id, "ACCEPTED")},
                               st::EventOp{event(pool, id, "CREATED", "", "ACCEPTED")}});
  if (!created) {
    std::cerr << created.error().message << "\n";
    return false;
  }
  int64_t version = created->revision;
  const char* states[] = {"ACCEPTED", "PROVISIONING", "ACTIVE", "DELETING"};
  for (int i = 1; i < 4; ++i) {
    auto moved =
        store.commit({st::UpdateOp{key, record(id, states[i]), version},
                      st::EventOp{event(pool, id, "STATE_CHANGED", states[i - 1], states[i])}});
    if (!moved) {
      std::cerr << moved.error().message << "\n";
      return false;
    }
    version = moved->revision;
  }
  auto removed = store.commit(
      {st::RemoveOp{key, version}, st::EventOp{event(pool, id, "DELETED", "DELETING", "")}});
  if (!removed) {
    std::cerr << removed.error().message << "\n";
  }
  return static_cast<bool>(removed);
}

json run(st::StateStore& store, int requests) {
  const std::string pool = "bench";
  auto made = store.commit({st::CreateOp{st::pool_key(pool), json{{"name", pool}}}});
  if (!made) {
    std::cerr << made.error().message << "\n";
    return json();
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < requests; ++i) {
    if (!life(store, pool, "r" + std::to_string(i))) {
      return json();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto events = store.events(st::EventQuery{pool, std::nullopt, "", 0, 0});
  auto left = store.list(st::Kind::queued_resource, pool);
  const auto r = st::event_retention();
  return json{{"requests", requests},
              {"events_kept", events ? static_cast<int64_t>(events->size()) : -1},
              {"records_left", left ? static_cast<int64_t>(left->records.size()) : -1},
              {"max_events", r.max_events},
              {"max_age_ms", r.max_age_ms},
              {"seconds", seconds}};
}

} // namespace

int main(int argc, char** argv) {
  std::string sqlite_dir, etcd;
  int requests = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sqlite-dir") {
      sqlite_dir = argv[i + 1];
    } else if (flag == "--etcd") {
      etcd = argv[i + 1];
    } else if (flag == "--requests") {
      requests = std::stoi(argv[i + 1]);
    } else {
      std::cerr << "event_log_bench: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (sqlite_dir.empty()) {
    std::cerr << "usage: event_log_bench --sqlite-dir DIR [--etcd HOST:PORT] [--requests N]\n";
    return 2;
  }
  {
    const std::string path = sqlite_dir + "/state.db";
    st::OpenOptions o;
    o.create = st::Creation::on_first_write;
    auto store = st::open_store("sqlite:" + path, o);
    if (!store) {
      std::cerr << store.error().message << "\n";
      return 1;
    }
    json j = run(**store, requests);
    store->reset(); // closed: the write-ahead log is checkpointed into the file
    j["backend"] = "sqlite";
    j["store_bytes"] = static_cast<int64_t>(std::filesystem::file_size(path));
    std::cout << j.dump() << std::endl;
  }
  if (!etcd.empty()) {
    const std::string prefix = "/evbench-" + std::to_string(::getpid()) + "/";
    st::OpenOptions o;
    o.create = st::Creation::on_first_write;
    auto store = st::open_store("etcd://" + etcd + prefix, o);
    if (!store) {
      std::cerr << store.error().message << "\n";
      return 1;
    }
    json j = run(**store, requests);
    // The live keys' bytes under the prefix.
    st::etcd::ClientOptions co;
    co.endpoints = {"http://" + etcd};
    st::etcd::Client client(co);
    st::etcd::RangeOptions ro;
    ro.range_end = st::etcd::prefix_end(prefix);
    int64_t bytes = 0, keys = 0;
    if (auto r = client.post("/v3/kv/range", st::etcd::range_request(prefix, ro),
                             st::etcd::Retry::anywhere)) {
      if (auto kvs = st::etcd::parse_kvs(*r)) {
        for (const auto& kv : *kvs) {
          bytes += static_cast<int64_t>(kv.key.size() + kv.value.size());
          ++keys;
        }
      }
    }
    int64_t db = -1;
    if (auto s = client.post("/v3/maintenance/status", json::object(), st::etcd::Retry::anywhere)) {
      db = st::etcd::int64_field(*s, "dbSize");
    }
    j["backend"] = "etcd";
    j["live_keys"] = keys;
    j["live_bytes"] = bytes;
    j["etcd_db_bytes"] = db;
    std::cout << j.dump() << std::endl;
  }
  return 0;
}
