// `tpuctl pool import FILE`: a JSON inventory of hosts (and optionally the pool), checked as a
// whole before anything is written: one bad entry rejects the file, naming its line and field.
#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

#include "provision/pool/json_fields.hpp"
#include "provision/pool/pools.hpp"
#include "remote/jump_spec.hpp"
#include "util/json_lines.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::provision {

namespace {

// "line N, FIELD" for messages about the value at JSON `pointer`.
std::string where_in(const std::map<std::string, int>& lines, const std::string& pointer,
                     const std::string& field) {
  return "line " + std::to_string(util::line_of(lines, pointer)) + ", " + field;
}

} // namespace

Expected<Inventory> parse_inventory(const std::string& requested_pool, const std::string& text) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // Byte offset -> line for the message.
    size_t upto = std::min(e.byte, text.size());
    int line = 1 + static_cast<int>(
                       std::count(text.begin(), text.begin() + static_cast<long>(upto), '\n'));
    return usage_error("inventory is not valid JSON at line " + std::to_string(line) + ": " +
                       e.what() + " (nothing was imported)");
  } catch (const Json::exception& e) {
    // Not a syntax error but still unreadable, e.g. a number too large for a double (1e999).
    return usage_error(std::string("inventory is not valid JSON: ") + e.what() +
                       " (nothing was imported)");
  }
  Inventory inv;
  inv.lines = util::json_pointer_lines(text);
  auto where = [&](const std::string& pointer, const std::string& field) {
    return where_in(inv.lines, pointer, field);
  };
  ErrorList problems;
  if (!doc.is_object() || !doc.contains("hosts") || !doc["hosts"].is_array()) {
    return usage_error("inventory must be an object with a \"hosts\" array (and optionally a "
                       "\"pool\" object); nothing was imported");
  }
  // The pool: the file's, or the requested / resolved one.
  std::optional<PoolLayout>& new_layout = inv.new_layout;
  std::string& pool = inv.pool;
  pool = requested_pool;
  if (doc.contains("pool")) {
    const Json& p = doc["pool"];
    if (!p.is_object()) {
      problems.add(usage_error(where("/pool", "pool") + ": must be an object"));
    } else {
      if (p.contains("name") && p["name"].is_string() && pool.empty()) {
        pool = p["name"].get<std::string>();
      }
      if (p.contains("generation")) {
        std::optional<int> cph;
        if (p.contains("chips_per_host")) {
          if (auto n = json_integer(p["chips_per_host"], 1, 1024)) {
            cph = static_cast<int>(*n);
          } else {
            problems.add(usage_error(where("/pool/chips_per_host", "pool.chips_per_host") +
                                     ": must be a whole number of chips, such as 4"));
          }
        }
        std::string shape;
        if (p.contains("shape")) {
          if (p["shape"].is_string()) {
            shape = p["shape"].get<std::string>();
          } else {
            problems.add(usage_error(where("/pool/shape", "pool.shape") +
                                     ": must be a topology string such as \"8x8\" or \"4x4x4\""));
          }
        }
        auto layout = make_pool_layout(
            p["generation"].is_string() ? p["generation"].get<std::string>() : "?", cph, shape);
        if (!layout) {
          for (const auto& m : layout.error().all_messages()) {
            problems.add(usage_error(where("/pool", "pool") + ": " + m));
          }
        } else {
          new_layout = *layout;
        }
      }
    }
  }
  std::vector<util::HostSpec>& specs = inv.specs;
  std::vector<AddHostsOptions>& options = inv.options;
  const Json& hosts = doc["hosts"];
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::string base = "/hosts/" + std::to_string(i);
    std::string label = "hosts[" + std::to_string(i) + "]";
    const Json& h = hosts[i];
    if (!h.is_object()) {
      problems.add(usage_error(where(base, label) + ": must be an object"));
      continue;
    }
    for (auto it = h.begin(); it != h.end(); ++it) {
      static const std::set<std::string> k_known = {
          "host", "user", "port", "identity_file", "workdir", "proxy_jump", "coords", "labels"};
      if (!k_known.count(it.key())) {
        problems.add(usage_error(where(base + "/" + it.key(), label + "." + it.key()) +
                                 ": unknown field (known: host, user, port, identity_file, "
                                 "workdir, proxy_jump, coords, labels)"));
      }
    }
    if (!h.contains("host") || !h["host"].is_string()) {
      problems.add(
          usage_error(where(base, label + ".host") + ": missing (a host name or address)"));
      continue;
    }
    auto spec = util::expand_host_specs({h["host"].get<std::string>()});
    if (!spec || spec->size() != 1) {
      std::string why = spec ? "must name exactly one host (no ranges)" : spec.error().message;
      problems.add(usage_error(where(base + "/host", label + ".host") + ": " + why));
      continue;
    }
    AddHostsOptions opt;
    if (h.contains("user")) {
      if (!h["user"].is_string() || !util::validate_username(h["user"].get<std::string>())) {
        problems.add(
            usage_error(where(base + "/user", label + ".user") + ": not a valid login name"));
      } else {
        opt.user = h["user"].get<std::string>();
      }
    }
    if (h.contains("port")) {
      if (auto port = json_integer(h["port"], 1, 65535)) {
        opt.port = static_cast<int>(*port);
      } else {
        problems.add(usage_error(where(base + "/port", label + ".port") +
                                 ": must be a whole number from 1 to 65535"));
      }
    }
    for (const char* f : {"identity_file", "workdir"}) {
      if (h.contains(f)) {
        if (!h[f].is_string() || h[f].get<std::string>().empty()) {
          problems.add(
              usage_error(where(base + "/" + f, label + "." + f) + ": must be a non-empty string"));
        } else if (std::string(f) == "identity_file") {
          opt.identity_file = h[f].get<std::string>();
        } else {
          opt.workdir = h[f].get<std::string>();
        }
      }
    }
    if (h.contains("proxy_jump")) {
      const std::string field = where(base + "/proxy_jump", label + ".proxy_jump");
      if (!h["proxy_jump"].is_string()) {
        problems.add(usage_error(field + ": must be a string ([user@]host[:port][,...] or none)"));
      } else if (auto hops = remote::parse_jump_spec(h["proxy_jump"].get<std::string>(), field);
                 !hops) {
        problems.add(hops.error());
      } else {
        opt.proxy_jump = remote::to_string(*hops);
      }
    }
    if (h.contains("coords")) {
      // [x, y] / [x, y, z], or the "x,y,z" text tpuctl prints (pool hosts, qr describe).
      const Json& c = h["coords"];
      std::vector<std::string> parts;
      if (c.is_string()) {
        parts = util::split(c.get<std::string>(), ',');
        for (auto& part : parts) {
          part = util::trim(part);
        }
      } else if (c.is_array()) {
        for (const auto& v : c) {
          auto n = json_integer(v, 0, std::numeric_limits<int>::max());
          parts.push_back(n ? std::to_string(*n) : std::string("?"));
        }
      }
      bool ok = (parts.size() == 2 || parts.size() == 3) &&
                std::all_of(parts.begin(), parts.end(), [](const std::string& v) {
                  return !v.empty() && v.size() <= 9 &&
                         std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
                });
      if (!ok) {
        problems.add(usage_error(where(base + "/coords", label + ".coords") + ": '" +
                                 util::printable(c.is_string() ? c.get<std::string>() : c.dump()) +
                                 "' must be [x, y], [x, y, z] or \"x,y,z\" (positions from 0)"));
      } else {
        opt.coords = util::join(parts, ",");
      }
    }
    if (h.contains("labels")) {
      if (!h["labels"].is_object()) {
        problems.add(usage_error(where(base + "/labels", label + ".labels") +
                                 ": must be an object of strings"));
      } else if (auto count = check_label_count(h["labels"].size(), "a host"); !count) {
        problems.add(
            usage_error(where(base + "/labels", label + ".labels") + ": " + count.error().message));
      } else {
        for (auto it = h["labels"].begin(); it != h["labels"].end(); ++it) {
          auto kv = it.value().is_string()
                        ? parse_label(it.key() + "=" + it.value().get<std::string>())
                        : Expected<std::pair<std::string, std::string>>(
                              usage_error("value must be a string"));
          if (!kv) {
            problems.add(
                usage_error(where(base + "/labels/" + it.key(), label + ".labels." + it.key()) +
                            ": " + kv.error().message));
          } else {
            opt.labels[kv->first] = kv->second;
          }
        }
      }
    }
    specs.push_back((*spec)[0]);
    options.push_back(opt);
  }
  // Duplicates within the file.
  std::set<std::string> seen;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!seen.insert(specs[i].host).second) {
      problems.add(usage_error("host '" + specs[i].host + "' appears twice in the inventory"));
    }
  }
  if (!problems.empty()) {
    Error e = problems.combined();
    e.more.push_back("nothing was imported");
    return e;
  }
  return inv;
}

Expected<std::vector<HostEntry>> import_inventory(state::StateStore& store,
                                                  const std::string& requested_pool,
                                                  const std::string& text) {
  TPUCTL_TRY_ASSIGN(Inventory inv, parse_inventory(requested_pool, text));
  const std::string& pool = inv.pool;
  const std::optional<PoolLayout>& new_layout = inv.new_layout;
  const std::vector<util::HostSpec>& specs = inv.specs;
  const std::vector<AddHostsOptions>& options = inv.options;
  auto where = [&](const std::string& pointer, const std::string& field) {
    return where_in(inv.lines, pointer, field);
  };
  // One transaction: create the pool if the file describes it, then add every host.
  std::vector<HostEntry> result;
  auto committed = store.transact([&](state::StateStore& s) -> Expected<std::vector<state::Op>> {
    std::vector<state::Op> ops;
    std::string target = pool;
    bool creating = false;
    if (new_layout) {
      if (target.empty()) {
        return usage_error("the inventory's pool has no name: add \"name\" or use --pool");
      }
      TPUCTL_TRY(validate_pool_name(target));
      TPUCTL_TRY_ASSIGN(auto existing, s.find(state::pool_key(target)));
      creating = !existing.has_value();
    }
    if (!creating) {
      TPUCTL_TRY_ASSIGN(target, resolve_pool_name(s, target));
    }
    PoolLayout layout;
    std::set<std::string> names;
    std::set<int> used;
    if (creating) {
      PoolInfo p;
      p.name = target;
      p.layout = *new_layout;
      p.created_at_ms = util::unix_now_ms();
      p.owner = s.actor();
      layout = p.layout;
      ops.push_back(state::CreateOp{state::pool_key(target), to_json(p)});
    } else {
      TPUCTL_TRY_ASSIGN(PoolView view, load_pool(s, target));
      TPUCTL_TRY(require_pool_admin(s, view.info, "import hosts into"));
      layout = view.info.layout;
      for (const auto& h : view.hosts) {
        names.insert(h.name);
        used.insert(position_index(layout, h.coords));
      }
      ops.push_back(
          state::UpdateOp{state::pool_key(target), to_json(view.info), view.info.version});
    }
    result.clear();
    ErrorList late;
    int next = 0;
    // Explicit positions first, then the rest in order.
    std::vector<std::optional<Dims>> pos(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      if (names.count(specs[i].host)) {
        late.add(usage_error("host '" + specs[i].host + "' is already in pool '" + target + "'"));
      }
      if (options[i].coords) {
        auto p = parse_position(layout, *options[i].coords);
        if (!p) {
          late.add(usage_error(where("/hosts/" + std::to_string(i) + "/coords",
                                     "hosts[" + std::to_string(i) + "].coords") +
                               ": " + p.error().message));
          continue;
        }
        if (!used.insert(position_index(layout, *p)).second) {
          late.add(usage_error(where("/hosts/" + std::to_string(i) + "/coords",
                                     "hosts[" + std::to_string(i) + "].coords") +
                               ": position " + format_position(*p) + " is taken"));
        }
        pos[i] = *p;
      }
    }
    const size_t taken_before = used.size(); // the pool's hosts and the inventory's placed ones
    for (size_t i = 0; i < specs.size(); ++i) {
      if (pos[i]) {
        continue;
      }
      while (next < layout.capacity() && used.count(next)) {
        ++next;
      }
      if (next >= layout.capacity()) {
        PoolInfo info;
        info.layout = layout;
        late.add(pool_full_error(target, info, taken_before, specs.size()));
        break;
      }
      used.insert(next);
      pos[i] = position_of(layout, next);
    }
    if (!late.empty()) {
      Error e = late.combined();
      e.more.push_back("nothing was imported");
      return e;
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      HostEntry e;
      e.name = specs[i].host;
      e.address = specs[i].host;
      e.port = options[i].port ? options[i].port : specs[i].port; // 0: ssh_config's, else 22
      e.user = options[i].user.empty() ? specs[i].user : options[i].user;
      e.identity_file = options[i].identity_file;
      e.workdir = options[i].workdir.empty() ? k_default_workdir : options[i].workdir;
      e.proxy_jump = options[i].proxy_jump;
      e.coords = *pos[i];
      e.labels = options[i].labels;
      e.added_at_ms = util::unix_now_ms();
      ops.push_back(state::CreateOp{state::host_key(target, e.name), to_json(e)});
      result.push_back(e);
    }
    state::Event ev;
    ev.pool = target;
    ev.subject_kind = state::Kind::pool;
    ev.subject = target;
    ev.type = "HOSTS_IMPORTED";
    ev.detail = Json{{"count", specs.size()}};
    ops.push_back(state::EventOp{ev});
    return ops;
  });
  if (!committed) {
    return committed.error();
  }
  return result;
}

} // namespace tpuctl::provision
