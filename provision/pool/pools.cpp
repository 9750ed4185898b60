#include "provision/pool/pools.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <set>

#include "provision/pool/ownership.hpp"
#include "remote/jump_spec.hpp"
#include "topology/accelerator_type.hpp"
#include "util/json_lines.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::provision {

namespace {

Json dims_json(const Dims& d) {
  return Json::array({d[0], d[1], d[2]});
}

Expected<Dims> dims_from(const Json& j, const char* field) {
  if (!j.is_array() || j.size() != 3 || !j[0].is_number_integer() || !j[1].is_number_integer() ||
      !j[2].is_number_integer()) {
    return make_error(ErrorKind::failure,
                      std::string("state record field '") + field + "' is not [x, y, z]");
  }
  return Dims{j[0].get<int>(), j[1].get<int>(), j[2].get<int>()};
}

template <typename T>
T field_or(const Json& doc, const char* key, T fallback) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) {
    return fallback;
  }
  return it->get<T>();
}

} // namespace

Json to_json(const PoolInfo& p) {
  return Json{{"name", p.name},
              {"generation", std::string(p.layout.generation->name)},
              {"chips_per_host", p.layout.chips_per_host},
              {"shape", dims_json(p.layout.shape)},
              {"identity_file", p.identity_file},
              {"known_hosts", p.known_hosts},
              {"local", p.local},
              {"created_at_ms", p.created_at_ms},
              {"owner", p.owner},
              {"admins", p.admins},
              {"ssh_work", std::string(to_string(p.ssh_work))},
              {"quotas", p.quotas}};
}

Expected<PoolInfo> pool_from_json(const Json& doc) {
  try {
    PoolInfo p;
    p.name = doc.at("name").get<std::string>();
    TPUCTL_TRY_ASSIGN(Dims shape, dims_from(doc.at("shape"), "shape"));
    std::string shape_text = topology::format_dims(shape, shape[2] > 1 ? 3 : 0);
    auto gen = topology::find_generation(doc.at("generation").get<std::string>());
    if (!gen) {
      return gen.error();
    }
    shape_text = topology::format_dims(shape, (*gen)->rank);
    TPUCTL_TRY_ASSIGN(p.layout, make_pool_layout(std::string((*gen)->name),
                                                 doc.at("chips_per_host").get<int>(), shape_text));
    p.identity_file = field_or<std::string>(doc, "identity_file", "");
    p.known_hosts = field_or<std::string>(doc, "known_hosts", "");
    p.local = doc.value("local", Json(nullptr));
    p.created_at_ms = field_or<int64_t>(doc, "created_at_ms", 0);
    p.owner = field_or<std::string>(doc, "owner", "");
    if (auto a = doc.find("admins"); a != doc.end() && a->is_array()) {
      for (const auto& x : *a) {
        if (x.is_string()) {
          p.admins.push_back(x.get<std::string>());
        }
      }
    }
    // A pool made before the policy existed: anyone, as then.
    if (auto w = parse_ssh_work(field_or<std::string>(doc, "ssh_work", "anyone"))) {
      p.ssh_work = *w;
    } else {
      return w.error();
    }
    if (auto q = doc.find("quotas"); q != doc.end() && q->is_object()) {
      for (const auto& [project, chips] : q->items()) {
        if (chips.is_number_integer()) {
          p.quotas[project] = chips.get<int>();
        }
      }
    }
    return p;
  } catch (const Json::exception& e) {
    return make_error(ErrorKind::failure, std::string("pool record is malformed: ") + e.what());
  }
}

Json to_json(const HostEntry& h) {
  Json labels = Json::object();
  for (const auto& [k, v] : h.labels) {
    labels[k] = v;
  }
  Json doc{{"name", h.name},
           {"address", h.address},
           {"port", h.port},
           {"user", h.user},
           {"identity_file", h.identity_file},
           {"known_hosts", h.known_hosts},
           {"workdir", h.workdir},
           {"coords", dims_json(h.coords)},
           {"labels", labels},
           {"drain_reason", h.drain_reason},
           {"spare", h.spare},
           {"added_at_ms", h.added_at_ms},
           {"local", h.local}};
  if (!h.proxy_jump.empty()) {
    doc["proxy_jump"] = h.proxy_jump; // only then: records without one stay as they were
  }
  return doc;
}

Expected<HostEntry> host_from_json(const Json& doc) {
  try {
    HostEntry h;
    h.name = doc.at("name").get<std::string>();
    h.address = doc.at("address").get<std::string>();
    h.port = doc.at("port").get<int>();
    h.user = field_or<std::string>(doc, "user", "");
    h.identity_file = field_or<std::string>(doc, "identity_file", "");
    h.known_hosts = field_or<std::string>(doc, "known_hosts", "");
    h.workdir = field_or<std::string>(doc, "workdir", k_default_workdir);
    h.proxy_jump = field_or<std::string>(doc, "proxy_jump", "");
    TPUCTL_TRY_ASSIGN(h.coords, dims_from(doc.at("coords"), "coords"));
    const Json labels = doc.value("labels", Json::object());
    for (auto it = labels.begin(); it != labels.end(); ++it) {
      h.labels[it.key()] = it.value().get<std::string>();
    }
    h.drain_reason = field_or<std::string>(doc, "drain_reason", "");
    h.spare = field_or<bool>(doc, "spare", false);
    h.added_at_ms = field_or<int64_t>(doc, "added_at_ms", 0);
    h.local = doc.value("local", Json(nullptr));
    return h;
  } catch (const Json::exception& e) {
    return make_error(ErrorKind::failure, std::string("host record is malformed: ") + e.what());
  }
}

Status validate_pool_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  }
  if (!ok) {
    return usage_error("pool name '" + util::printable(name) +
                       "' is not valid: use letters, digits, '-', '_' and '.', starting with a "
                       "letter or digit, at most 63 characters");
  }
  return tpuctl::ok();
}

Expected<std::pair<std::string, std::string>> parse_label(const std::string& text,
                                                          std::string_view what) {
  const std::string flag(what);
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return usage_error(flag + ": '" + util::printable(text) + "' is not KEY=VALUE: write e.g. " +
                       flag + " team=ml");
  }
  std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  bool key_ok = key.size() <= 63 && std::isalnum(static_cast<unsigned char>(key[0]));
  for (char c : key) {
    key_ok = key_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                        c == '.' || c == '/');
  }
  if (!key_ok) {
    return usage_error(flag + ": key '" + util::printable(key) +
                       "' is not valid: use letters, digits, '-', '_', '.', '/', starting with a "
                       "letter or digit, at most 63 characters");
  }
  bool value_ok = value.size() <= 256 && std::none_of(value.begin(), value.end(), [](char c) {
                    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                  });
  if (!value_ok) {
    return usage_error(flag + ": the value '" + util::printable(value) + "' of '" + key +
                       "' is not valid: at most 256 characters, no control characters");
  }
  return std::make_pair(key, value);
}

Status check_label_count(size_t count, const std::string& owner) {
  if (count <= k_max_labels) {
    return tpuctl::ok();
  }
  return usage_error(std::to_string(count) + " labels: " + owner + " takes at most " +
                     std::to_string(k_max_labels) + " (as Google Cloud)");
}

Expected<std::vector<PoolInfo>> list_pools(state::StateStore& store) {
  TPUCTL_TRY_ASSIGN(auto listing, store.list(state::Kind::pool, ""));
  std::vector<PoolInfo> out;
  for (const auto& r : listing.records) {
    TPUCTL_TRY_ASSIGN(PoolInfo p, pool_from_json(r.doc));
    p.version = r.version;
    out.push_back(std::move(p));
  }
  return out;
}

Expected<std::string> resolve_pool_name(state::StateStore& store, const std::string& requested) {
  TPUCTL_TRY_ASSIGN(auto pools, list_pools(store));
  std::vector<std::string> names;
  for (const auto& p : pools) {
    names.push_back(p.name);
  }
  if (!requested.empty()) {
    if (std::find(names.begin(), names.end(), requested) != names.end()) {
      return requested;
    }
    std::string known =
        names.empty() ? "there are no pools yet" : "pools: " + util::join(names, ", ");
    auto near = util::nearest(requested, names, 1);
    return Error(ErrorKind::not_found,
                 "pool '" + requested + "' does not exist (" + known + ")" +
                     (near.empty() ? "" : "; did you mean '" + near[0] + "'?"),
                 "not_found");
  }
  if (names.size() == 1) {
    return names[0];
  }
  if (std::find(names.begin(), names.end(), "default") != names.end()) {
    return std::string("default");
  }
  if (names.empty()) {
    return Error(ErrorKind::not_found,
                 "there are no pools yet: create one with 'tpuctl pool create NAME "
                 "--generation GEN' or 'tpuctl pool local-up --hosts N'",
                 "not_found");
  }
  return usage_error("several pools exist (" + util::join(names, ", ") +
                     "): choose one with --pool NAME, TPUCTL_POOL or 'tpuctl config set pool NAME'");
}

Expected<PoolInfo> create_pool(state::StateStore& store, const std::string& name,
                               const PoolLayout& layout, Json local, std::string identity_file,
                               std::string known_hosts) {
  TPUCTL_TRY(validate_pool_name(name));
  PoolInfo p;
  p.name = name;
  p.layout = layout;
  p.local = std::move(local);
  p.identity_file = std::move(identity_file);
  p.known_hosts = std::move(known_hosts);
  p.created_at_ms = util::unix_now_ms();
  p.owner = store.actor();
  p.ssh_work = default_ssh_work(store);
  state::Event ev;
  ev.pool = name;
  ev.subject_kind = state::Kind::pool;
  ev.subject = name;
  ev.type = "POOL_CREATED";
  auto r = store.commit({state::CreateOp{state::pool_key(name), to_json(p)}, state::EventOp{ev}});
  if (!r) {
    if (state::has_reason(r.error(), state::reason::k_already_exists)) {
      return Error(ErrorKind::usage,
                   "pool '" + name + "' already exists (see 'tpuctl pool describe " + name + "')",
                   "already_exists");
    }
    return r.error();
  }
  p.version = r->revision;
  return p;
}

Expected<PoolView> load_pool(state::StateStore& store, const std::string& pool) {
  auto snap = store.snapshot(pool);
  if (!snap) {
    if (state::has_reason(snap.error(), state::reason::k_not_found)) {
      return Error(ErrorKind::not_found, "pool '" + pool + "' does not exist", "not_found");
    }
    return snap.error();
  }
  TPUCTL_TRY_ASSIGN(PoolInfo info, pool_from_json(snap->pool.doc));
  info.version = snap->pool.version;
  PoolView view{info, {}, snap->claims, HostGrid(info.layout), snap->revision};
  std::map<std::string, const state::Claim*> claim_of;
  for (const auto& c : view.claims) {
    claim_of[c.host] = &c;
  }
  for (const auto& r : snap->records) {
    if (r.key.kind != state::Kind::host) {
      continue;
    }
    TPUCTL_TRY_ASSIGN(HostEntry h, host_from_json(r.doc));
    h.version = r.version;
    if (in_grid(info.layout, h.coords)) {
      GridCell& cell = view.grid.at(h.coords);
      cell.host = h.name;
      if (claim_of.count(h.name)) {
        cell.state = CellState::claimed;
        cell.owner = claim_of[h.name]->owner;
      } else if (!h.drain_reason.empty()) {
        cell.state = CellState::drained;
        cell.owner = h.drain_reason;
      } else if (h.spare) {
        cell.state = CellState::spare;
      } else {
        cell.state = CellState::free;
      }
    }
    view.hosts.push_back(std::move(h));
  }
  std::sort(view.hosts.begin(), view.hosts.end(), [&](const HostEntry& a, const HostEntry& b) {
    return position_index(info.layout, a.coords) < position_index(info.layout, b.coords);
  });
  view.grid.refresh();
  return view;
}

namespace {

// Builds the ops that add `entries` (positions not yet assigned where coords is nullopt).
Expected<std::vector<state::Op>> plan_add(state::StateStore& store, const std::string& pool,
                                          std::vector<HostEntry>& entries,
                                          const std::vector<std::optional<Dims>>& wanted) {
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, pool));
  TPUCTL_TRY(require_pool_admin(store, view.info, "add hosts to"));
  std::set<std::string> names;
  std::set<int> used;
  for (const auto& h : view.hosts) {
    names.insert(h.name);
    used.insert(position_index(view.info.layout, h.coords));
  }
  ErrorList problems;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (names.count(entries[i].name)) {
      problems.add(Error(ErrorKind::usage,
                         "host '" + entries[i].name + "' is already in pool '" + pool + "'",
                         "already_exists"));
    }
    if (wanted[i]) {
      int idx = position_index(view.info.layout, *wanted[i]);
      if (used.count(idx)) {
        problems.add(usage_error("--coords: position " + format_position(*wanted[i]) +
                                 " of pool '" + pool + "' already holds a host"));
      }
      used.insert(idx);
      entries[i].coords = *wanted[i];
    }
  }
  int capacity = view.info.layout.capacity();
  int next = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (wanted[i]) {
      continue;
    }
    while (next < capacity && used.count(next)) {
      ++next;
    }
    if (next >= capacity) {
      problems.add(pool_full_error(pool, view.info, view.hosts.size(), entries.size()));
      break;
    }
    used.insert(next);
    entries[i].coords = position_of(view.info.layout, next);
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  std::vector<state::Op> ops;
  // Bump the pool record: concurrent add-hosts then conflict instead of sharing a position.
  Json pool_doc = to_json(view.info);
  ops.push_back(state::UpdateOp{state::pool_key(pool), pool_doc, view.info.version});
  std::vector<std::string> added;
  for (auto& e : entries) {
    e.added_at_ms = util::unix_now_ms();
    ops.push_back(state::CreateOp{state::host_key(pool, e.name), to_json(e)});
    added.push_back(e.name);
  }
  state::Event ev;
  ev.pool = pool;
  ev.subject_kind = state::Kind::pool;
  ev.subject = pool;
  ev.type = "HOSTS_ADDED";
  ev.detail = Json{{"hosts", added}};
  ops.push_back(state::EventOp{ev});
  return ops;
}

} // namespace

Error pool_full_error(const std::string& pool, const PoolInfo& info, size_t hosts_now,
                      size_t asked) {
  const int capacity = info.layout.capacity();
  const size_t free_now = capacity > static_cast<int>(hosts_now)
                              ? static_cast<size_t>(capacity) - hosts_now
                              : 0;
  return Error(ErrorKind::usage,
               "cannot add " + util::counted(asked, "host") + " to pool '" + pool +
                   "': it has room for " + util::counted(static_cast<size_t>(capacity), "host") +
                   " (grid " + topology::format_dims(info.layout.host_grid, 3) + "), " +
                   std::to_string(free_now) + " free; nothing was added: add at most " +
                   std::to_string(free_now) + ", or recreate it with a larger --shape",
               "pool_full");
}

Expected<std::vector<HostEntry>> add_hosts(state::StateStore& store, const std::string& pool,
                                           const std::vector<util::HostSpec>& specs,
                                           const AddHostsOptions& options) {
  if (options.coords && specs.size() != 1) {
    return usage_error("--coords places one host, but " + std::to_string(specs.size()) +
                       " were given (add them one at a time, or leave out --coords)");
  }
  if (!options.user.empty()) {
    TPUCTL_TRY(util::validate_username(options.user));
  }
  TPUCTL_TRY(check_label_count(options.labels.size(), "a host"));
  std::string proxy_jump;
  if (!options.proxy_jump.empty()) {
    TPUCTL_TRY_ASSIGN(auto hops, remote::parse_jump_spec(options.proxy_jump));
    proxy_jump = remote::to_string(hops);
  }
  std::vector<HostEntry> entries;
  std::vector<std::optional<Dims>> wanted;
  std::optional<Dims> coords;
  if (options.coords) {
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, pool));
    TPUCTL_TRY_ASSIGN(Dims pos, parse_position(view.info.layout, *options.coords));
    coords = pos;
  }
  for (const auto& s : specs) {
    HostEntry e;
    e.name = s.host;
    e.address = s.host;
    e.port = options.port ? options.port : s.port; // 0: ssh_config's Port, else 22
    e.user = s.user.empty() ? options.user : s.user;
    e.identity_file = options.identity_file;
    e.workdir = options.workdir.empty() ? k_default_workdir : options.workdir;
    e.proxy_jump = proxy_jump;
    if (auto it = options.workdir_by_host.find(s.host); it != options.workdir_by_host.end()) {
      e.workdir = it->second;
    }
    e.labels = options.labels;
    e.local = options.local;
    entries.push_back(std::move(e));
    wanted.push_back(coords);
  }
  std::vector<HostEntry> result;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    result = entries;
    return plan_add(s, pool, result, wanted);
  });
  if (!committed) {
    return committed.error();
  }
  return result;
}

Status remove_hosts(state::StateStore& store, const std::string& pool,
                    const std::vector<std::string>& hosts) {
  auto r = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
    TPUCTL_TRY(require_pool_admin(s, view.info, "remove hosts from"));
    ErrorList problems;
    std::vector<state::Op> ops;
    for (const auto& name : hosts) {
      auto it = std::find_if(view.hosts.begin(), view.hosts.end(),
                             [&](const HostEntry& h) { return h.name == name; });
      if (it == view.hosts.end()) {
        problems.add(Error(ErrorKind::not_found,
                           "host '" + name + "' is not in pool '" + pool + "'", "not_found"));
        continue;
      }
      auto claim = std::find_if(view.claims.begin(), view.claims.end(),
                                [&](const state::Claim& c) { return c.host == name; });
      if (claim != view.claims.end()) {
        problems.add(Error(ErrorKind::failure,
                           "host '" + name + "' is claimed by '" + claim->owner +
                               "': delete that queued resource first",
                           "hosts_busy"));
        continue;
      }
      ops.push_back(state::RemoveOp{state::host_key(pool, name), it->version});
    }
    if (!problems.empty()) {
      return problems.combined();
    }
    state::Event ev;
    ev.pool = pool;
    ev.subject_kind = state::Kind::pool;
    ev.subject = pool;
    ev.type = "HOSTS_REMOVED";
    ev.detail = Json{{"hosts", hosts}};
    ops.push_back(state::EventOp{ev});
    return ops;
  });
  if (!r) {
    return r.error();
  }
  return tpuctl::ok();
}

Expected<std::vector<HostEntry>> set_drain(state::StateStore& store, const std::string& pool,
                                           const std::vector<std::string>& hosts,
                                           const std::string& reason, state::Initiator initiator) {
  std::vector<HostEntry> result;
  auto r = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    result.clear();
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
    if (initiator == state::Initiator::user) {
      TPUCTL_TRY(
          require_pool_admin(s, view.info, reason.empty() ? "undrain hosts of" : "drain hosts of"));
    }
    std::map<std::string, const HostEntry*> by_name;
    for (const auto& h : view.hosts) {
      by_name[h.name] = &h;
    }
    ErrorList problems;
    std::vector<state::Op> ops;
    for (const auto& name : hosts) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        problems.add(Error(ErrorKind::not_found,
                           "host '" + name + "' is not in pool '" + pool + "'", "not_found"));
        continue;
      }
      HostEntry h = *it->second;
      h.drain_reason = reason;
      ops.push_back(state::UpdateOp{state::host_key(pool, name), to_json(h), h.version});
      result.push_back(std::move(h));
    }
    if (!problems.empty()) {
      return problems.combined();
    }
    state::Event ev;
    ev.pool = pool;
    ev.detail = Json{{"reason", reason}};
    ev.initiator = initiator;
    if (hosts.size() == 1) {
      const HostEntry& before = *by_name.at(hosts[0]);
      ev.subject_kind = state::Kind::host;
      ev.subject = hosts[0];
      ev.type = reason.empty() ? "HOST_UNDRAINED" : "HOST_DRAINED";
      ev.from_state = before.drain_reason.empty() ? "READY" : "DRAINED";
      ev.to_state = reason.empty() ? "READY" : "DRAINED";
    } else {
      ev.subject_kind = state::Kind::pool;
      ev.subject = pool;
      ev.type = reason.empty() ? "HOSTS_UNDRAINED" : "HOSTS_DRAINED";
      ev.detail["hosts"] = hosts;
    }
    ops.push_back(state::EventOp{ev});
    return ops;
  });
  if (!r) {
    return r.error();
  }
  for (auto& h : result) {
    h.version = r->revision;
  }
  return result;
}

Expected<std::vector<HostEntry>> set_spares(state::StateStore& store, const std::string& pool,
                                            int count) {
  std::vector<HostEntry> result;
  auto r = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    result.clear();
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
    TPUCTL_TRY(require_pool_admin(s, view.info, "set the spares of"));
    std::set<std::string> claimed;
    for (const auto& c : view.claims) {
      claimed.insert(c.host);
    }
    std::vector<HostEntry> spares, free_hosts; // in grid order (load_pool sorts the hosts)
    for (const auto& h : view.hosts) {
      if (h.spare) {
        spares.push_back(h);
      } else if (h.drain_reason.empty() && claimed.count(h.name) == 0) {
        free_hosts.push_back(h);
      }
    }
    const int most = static_cast<int>(spares.size() + free_hosts.size());
    if (count < 0 || count > most) {
      return usage_error("spares " + std::to_string(count) + " is more than pool '" + pool +
                         "' can hold back: it has " + util::counted(free_hosts.size(), "free host") +
                         " and " + util::counted(spares.size(), "spare") +
                         " (give 0 to " + std::to_string(most) +
                         ", or free hosts first: delete requests, undrain hosts)");
    }
    std::vector<state::Op> ops;
    auto update = [&](HostEntry h, bool spare) {
      h.spare = spare;
      ops.push_back(state::UpdateOp{state::host_key(pool, h.name), to_json(h), h.version});
    };
    if (count > static_cast<int>(spares.size())) {
      // More: the free hosts nearest the grid's far corner, the nearest first (distance: the
      // largest of the per-axis distances), so that the spares make one compact block there and
      // the blocks placement takes from the near corner stay whole (a row of spares across a
      // 4x2 grid would leave no 2x2 block).
      Dims far{0, 0, 0};
      for (const auto& h : view.hosts) {
        for (size_t d = 0; d < far.size(); ++d) {
          far[d] = std::max(far[d], h.coords[d]);
        }
      }
      auto distance = [&](const HostEntry& h) {
        int apart = 0;
        for (size_t d = 0; d < far.size(); ++d) {
          apart = std::max(apart, far[d] - h.coords[d]);
        }
        return apart;
      };
      std::reverse(free_hosts.begin(), free_hosts.end()); // ties: the last in grid order first
      std::stable_sort(free_hosts.begin(), free_hosts.end(),
                       [&](const HostEntry& a, const HostEntry& b) {
                         return distance(a) < distance(b);
                       });
      for (int i = 0; i < count - static_cast<int>(spares.size()); ++i) {
        update(free_hosts[static_cast<size_t>(i)], true);
      }
    } else {
      // Fewer: the ones no slice holds go first.
      std::stable_partition(spares.begin(), spares.end(),
                            [&](const HostEntry& h) { return claimed.count(h.name) == 0; });
      for (int i = 0; i < static_cast<int>(spares.size()) - count; ++i) {
        update(spares[static_cast<size_t>(i)], false);
      }
    }
    std::set<std::string> changed; // the result: the spares once the updates are applied
    for (const auto& op : ops) {
      changed.insert(std::get<state::UpdateOp>(op).key.id);
    }
    for (const auto& h : view.hosts) {
      const bool now_spare = changed.count(h.name) ? !h.spare : h.spare;
      if (now_spare) {
        HostEntry x = h;
        x.spare = true;
        result.push_back(std::move(x));
      }
    }
    state::Event ev;
    ev.pool = pool;
    ev.subject_kind = state::Kind::pool;
    ev.subject = pool;
    ev.type = "SPARES_SET";
    std::vector<std::string> names;
    for (const auto& h : result) {
      names.push_back(h.name);
    }
    ev.detail = Json{{"count", count}, {"hosts", names}};
    ev.initiator = state::Initiator::user;
    ops.push_back(state::EventOp{ev});
    return ops;
  });
  if (!r) {
    return r.error();
  }
  return result;
}

Status delete_pool(state::StateStore& store, const std::string& pool, bool force) {
  auto r = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, pool));
    TPUCTL_TRY(require_pool_admin(s, view.info, "delete"));
    std::vector<state::Op> ops;
    if (!view.claims.empty()) {
      if (!force) {
        std::vector<std::string> held;
        for (const auto& c : view.claims) {
          held.push_back(c.host + " (" + c.owner + ")");
        }
        return Error(ErrorKind::failure,
                     "pool '" + pool + "' has claimed hosts: " + util::join(held, ", ") +
                         "; delete those queued resources first, or use --force",
                     "hosts_busy");
      }
      std::map<std::string, std::vector<std::string>> by_owner;
      for (const auto& c : view.claims) {
        by_owner[c.owner].push_back(c.host);
      }
      for (auto& [owner, hosts] : by_owner) {
        ops.push_back(state::ReleaseOp{pool, hosts, owner});
      }
    }
    ops.push_back(state::RemoveOp{state::pool_key(pool), view.info.version});
    return ops;
  });
  if (!r) {
    return r.error();
  }
  return tpuctl::ok();
}

bool shares_this_machine(const PoolInfo& pool, const HostEntry& host) {
  return !pool.local.is_null() && host.local.is_object() && host.local.value("sshd", false);
}

remote::SshTarget ssh_target(const PoolInfo& pool, const HostEntry& h) {
  remote::SshTarget t;
  t.name = h.name;
  t.address = h.address;
  t.port = static_cast<uint16_t>(h.port);
  t.user = h.user;
  t.identity_file = h.identity_file.empty() ? pool.identity_file : h.identity_file;
  t.known_hosts_file = h.known_hosts.empty() ? pool.known_hosts : h.known_hosts;
  t.proxy_jump = h.proxy_jump;
  return t;
}

Status require_pool_admin(const state::StateStore& store, const PoolInfo& pool,
                          const std::string& action) {
  if (pool.admins.empty() || (!pool.owner.empty() && same_owner(pool.owner, store.actor()))) {
    return ok();
  }
  for (const auto& a : pool.admins) {
    if (same_owner(a, store.actor())) {
      return ok();
    }
  }
  return Error(ErrorKind::auth,
               "only the admins of pool '" + pool.name + "' (" + util::join(pool.admins, ", ") +
                   (pool.owner.empty() ? "" : ", and its owner " + pool.owner) + ") may " + action +
                   " it, not " + store.actor() + ": ask one of them");
}

Status require_admin_of_every_pool(state::StateStore& store, const std::string& action) {
  TPUCTL_TRY_ASSIGN(auto pools, list_pools(store));
  for (const auto& p : pools) {
    TPUCTL_TRY(require_pool_admin(store, p, action));
  }
  return ok();
}

Expected<PoolInfo> change_pool(state::StateStore& store, const std::string& pool,
                               const std::string& action, const PoolChange& change,
                               const std::string& type, const Json& detail) {
  PoolInfo out;
  auto r = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    TPUCTL_TRY_ASSIGN(auto record, s.get(state::pool_key(pool)));
    TPUCTL_TRY_ASSIGN(out, pool_from_json(record.doc));
    TPUCTL_TRY(require_pool_admin(s, out, action));
    state::Event ev;
    ev.pool = pool;
    ev.subject_kind = state::Kind::pool;
    ev.subject = pool;
    ev.type = type;
    ev.detail = detail;
    TPUCTL_TRY(change(s, out, ev.detail));
    return std::vector<state::Op>{
        state::UpdateOp{state::pool_key(pool), to_json(out), record.version}, state::EventOp{ev}};
  });
  if (!r) {
    return r.error();
  }
  return out;
}

std::optional<std::string> ssh_work_refusal(const state::StateStore& store, const PoolInfo& pool,
                                            const std::string& owner, bool as_controller) {
  return ssh_work_refusal(pool.name, pool.ssh_work, owner, SshWorker{store.actor(), as_controller});
}

Expected<PoolInfo> set_pool_ssh_work(state::StateStore& store, const std::string& pool,
                                     SshWork ssh_work) {
  if (ssh_work == SshWork::controller) {
    // The leader is elected in the store: one that holds no elections cannot have one.
    if (auto leader = store.leader(k_controller_role); !leader) {
      return Error(ErrorKind::usage,
                   "pool '" + pool + "' cannot be driven by a controller on " +
                       store.info().location +
                       ": a controller is elected in an etcd store (use --state etcd://...); "
                       "on this store choose owner or anyone");
    }
  }
  return change_pool(store, pool, "set who does the SSH work of",
                     [&](state::StateStore&, PoolInfo& p, Json&) {
                       p.ssh_work = ssh_work;
                       return ok();
                     },
                     "POOL_SSH_WORK_SET", {{"ssh_work", std::string(to_string(ssh_work))}});
}

Expected<PoolInfo> set_pool_admins(state::StateStore& store, const std::string& pool,
                                   const std::vector<std::string>& admins) {
  for (const auto& a : admins) {
    if (a.empty() || a != util::trim(a) || a.find(' ') != std::string::npos) {
      return usage_error("--admins: '" + util::printable(a) +
                         "' is not a user name (etcd user names or USER@HOST, comma-separated)");
    }
  }
  return change_pool(store, pool, "set the admins of",
                     [&](state::StateStore&, PoolInfo& p, Json&) {
                       p.admins = admins;
                       return ok();
                     },
                     "POOL_ADMINS_SET", {{"admins", admins}});
}

} // namespace tpuctl::provision
