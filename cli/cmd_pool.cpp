// tpuctl pool: the hosts tpuctl may use. Records live in the state store (state/), the logic in
// provision/pools; this file only parses flags and prints. The SSH-backed commands (check, ssh,
// scp) are in cmd_pool_remote.cpp and the local sshd pool (local-up, local-down) in
// cmd_pool_local.cpp.
#include <fstream>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/config.hpp"
#include "cli/output.hpp"
#include "cli/pool_view.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "provision/pool/pools.hpp"
#include "remote/jump_spec.hpp"
#include "util/hostlist.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

void setup_pool_remote(CLI::App& group, Registry& registry);
void setup_pool_local(CLI::App& group, Registry& registry);
void setup_pool_quota(CLI::App& group, Registry& registry);

namespace {

struct CreateOptions {
  std::string name;
  std::string generation;
  std::optional<int> chips_per_host;
  std::string shape;
};

struct AddOptions {
  std::vector<std::string> specs;
  std::string user;
  int port = 0;
  std::string identity_file;
  std::string workdir;
  std::string proxy_jump;
  std::string coords;
  std::vector<std::string> labels;
};

Expected<std::string> pool_name(Context& ctx, state::StateStore& store) {
  return resolve_pool(ctx, store);
}

void add_create(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<CreateOptions>();
  CLI::App* cmd = registry.add(
      group, "create", "create an empty pool of one TPU generation",
      [o](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto layout,
                          provision::make_pool_layout(o->generation, o->chips_per_host, o->shape));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Access::create));
        TPUCTL_TRY_ASSIGN(auto pool, provision::create_pool(*store, o->name, layout));
        TPUCTL_TRY(emit(ctx, pool_summary_json(pool, 0)));
        return 0;
      });
  cmd->add_option("NAME", o->name, "pool name")->required();
  cmd->add_option("--generation", o->generation, "v2, v3, v4, v5e (v5litepod), v5p, v6e or tpu7x")
      ->required()
      ->type_name("GEN");
  cmd->add_option("--chips-per-host", o->chips_per_host, "chips on each host (default 4)")
      ->type_name("N")
      ->check(count_in(1, 1024));
  cmd->add_option("--shape", o->shape,
                  "the pool's extent in chips, e.g. 8x4 or 4x4x4 (default: the generation's pod)")
      ->type_name("CHIPS");
}

void add_pool_list(CLI::App& group, Registry& registry) {
  registry.add(group, "list", "list pools", [](Context& ctx) -> Expected<int> {
    TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
    TPUCTL_TRY_ASSIGN(auto pools, provision::list_pools(*store));
    Json rows = Json::array();
    for (const auto& p : pools) {
      TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, p.name));
      Json row = pool_summary_json(p, static_cast<int>(view.hosts.size()));
      row["free"] = view.grid.count(provision::CellState::free);
      rows.push_back(row);
    }
    TPUCTL_TRY(emit_list(ctx, rows,
                         {{"name", "name"},
                          {"generation", "generation"},
                          {"shape", "shape"},
                          {"hosts", "hosts"},
                          {"free", "free"},
                          {"capacity", "capacity"},
                          {"local", "local"},
                          {"owner", "owner"}}));
    return 0;
  });
}

void add_pool_describe(CLI::App& group, Registry& registry) {
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = registry.add(
      group, "describe", "show a pool: its host grid, free blocks and hosts",
      [name](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, name->empty() ? resolve_pool(ctx, *store)
                                                   : provision::resolve_pool_name(*store, *name));
        TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, pool));
        TPUCTL_TRY(emit(ctx, pool_view_json(view),
                        [&](std::ostream& os, const Json&) { print_pool_view(os, view); }));
        return 0;
      });
  cmd->add_option("NAME", *name, "pool name (default: --pool, or the only pool)");
}

void add_delete(CLI::App& group, Registry& registry) {
  auto name = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  CLI::App* cmd =
      registry.add(group, "delete", "delete a pool and its host records",
                   [name, force](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
                     TPUCTL_TRY_ASSIGN(auto pool, provision::resolve_pool_name(*store, *name));
                     TPUCTL_TRY(provision::delete_pool(*store, pool, *force));
                     TPUCTL_TRY(emit(ctx, Json{{"name", pool}, {"deleted", true}}));
                     return 0;
                   });
  cmd->add_option("NAME", *name, "pool name")->required();
  cmd->add_flag("--force", *force, "delete even while hosts are claimed (releases the claims)");
}

void add_set_ssh_work(CLI::App& group, Registry& registry) {
  struct Flags {
    std::string name;
    std::string by;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = registry.add(
      group, "set-ssh-work",
      "who provisions, repairs, watches and stops the pool's requests and workloads",
      [f](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto by, provision::parse_ssh_work(f->by));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, f->name.empty()
                                         ? resolve_pool(ctx, *store)
                                         : provision::resolve_pool_name(*store, f->name));
        TPUCTL_TRY_ASSIGN(auto info, provision::set_pool_ssh_work(*store, pool, by));
        const std::string by_text(provision::to_string(info.ssh_work));
        TPUCTL_TRY(emit(ctx, Json{{"name", pool}, {"ssh_work", by_text}},
                        [&](std::ostream& os, const Json&) {
                          os << "pool " << pool << ": SSH work by " << by_text << "\n";
                        }));
        return 0;
      });
  cmd->add_option("NAME", f->name, "pool name (default: --pool, or the only pool)");
  cmd->add_option("--by", f->by, "owner, controller or anyone")->required()->type_name("WHO");
  cmd->footer(
      "owner: only a request's or workload's owner's own tpuctl (commands, and the drivers and\n"
      "monitors they start) does its SSH work, with the owner's keys; anyone else's command\n"
      "leaves it waiting and says for whom (the default of a pool made on etcd).\n"
      "controller: only `tpuctl controller run`, the elected leader (etcd stores only).\n"
      "anyone: any tpuctl process carries anything on (SQLite pools, and tpuctl before 0.2).\n"
      "Only the pool's admins (pool set-admins) and its owner may change it.");
}

void add_set_admins(CLI::App& group, Registry& registry) {
  struct Flags {
    std::string name;
    std::string admins;
    bool clear = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = registry.add(
      group, "set-admins",
      "who besides its owner may change the pool's hosts and admins, or delete it",
      [f](Context& ctx) -> Expected<int> {
        if (f->clear == !f->admins.empty()) {
          return usage_error("give --admins NAME[,NAME...] or --clear (anyone may change it)");
        }
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, f->name.empty()
                                         ? resolve_pool(ctx, *store)
                                         : provision::resolve_pool_name(*store, f->name));
        std::vector<std::string> admins;
        if (!f->clear) {
          admins = util::split(f->admins, ',');
        }
        TPUCTL_TRY_ASSIGN(auto info, provision::set_pool_admins(*store, pool, admins));
        TPUCTL_TRY(
            emit(ctx, Json{{"name", pool}, {"owner", info.owner}, {"admins", info.admins}},
                 [&](std::ostream& os, const Json&) {
                   os << "pool " << pool << ": "
                      << (info.admins.empty()
                              ? std::string("anyone may change it")
                              : "admins " + util::join(info.admins, ", ") +
                                    (info.owner.empty() ? "" : " and its owner " + info.owner))
                      << "\n";
                 }));
        return 0;
      });
  cmd->add_option("NAME", f->name, "pool name (default: --pool, or the only pool)");
  cmd->add_option("--admins", f->admins, "etcd user names (or USER@HOST), comma-separated")
      ->type_name("NAMES");
  cmd->add_flag("--clear", f->clear, "no admins: anyone may change the pool again");
}

void add_add_hosts(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<AddOptions>();
  CLI::App* cmd = registry.add(
      group, "add-hosts", "add hosts: [user@]host[:port], with ranges such as node[01-16]",
      [o](Context& ctx) -> Expected<int> {
        ErrorList problems;
        auto specs = util::expand_host_specs(o->specs);
        if (!specs) {
          problems.add(specs.error());
        }
        provision::AddHostsOptions add;
        add.user = o->user;
        add.port = o->port;
        add.identity_file = o->identity_file;
        add.workdir = o->workdir;
        if (!o->proxy_jump.empty()) {
          if (auto hops = remote::parse_jump_spec(o->proxy_jump); !hops) {
            problems.add(hops.error());
          } else {
            add.proxy_jump = o->proxy_jump;
          }
        }
        if (!o->coords.empty()) {
          add.coords = o->coords;
        }
        for (const auto& l : o->labels) {
          auto kv = provision::parse_label(l);
          if (!kv) {
            problems.add(kv.error());
          } else {
            add.labels[kv->first] = kv->second;
          }
        }
        if (!problems.empty()) {
          return problems.combined();
        }
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, pool_name(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto added, provision::add_hosts(*store, pool, *specs, add));
        Json rows = Json::array();
        for (const auto& h : added) {
          rows.push_back(host_json(h, ""));
        }
        TPUCTL_TRY(emit_list(ctx, rows, k_host_columns, host_json({}, "")));
        return 0;
      });
  cmd->add_option("SPEC", o->specs, "hosts: [user@]host[:port], e.g. node[01-16] or 10.0.0.[1-4]")
      ->required();
  o->user = active_config().get("ssh.user").value_or("");
  o->identity_file = active_config().get("ssh.identity_file").value_or("");
  cmd->add_option("--user", o->user, "login user (default: config ssh.user, else the current user)")
      ->type_name("U");
  cmd->add_option("--port", o->port, "SSH port (default: ssh_config's Port for the host, else 22)")
      ->type_name("N")
      ->check(port_number());
  cmd->add_option("--identity-file", o->identity_file, "private key for these hosts")
      ->type_name("FILE");
  cmd->add_option("--workdir", o->workdir, "where tpuctl writes on the hosts (default ~/.tpuctl)")
      ->type_name("DIR");
  cmd->add_option("--proxy-jump", o->proxy_jump,
                  "reach these hosts through jump hosts: [user@]host[:port][,...], or none "
                  "(default: ssh_config's ProxyJump)")
      ->type_name("HOPS");
  cmd->add_option("--coords", o->coords, "grid position x,y[,z] (one host only)")
      ->type_name("X,Y,Z");
  cmd->add_option("--label", o->labels, "a KEY=VALUE label (repeatable)")->type_name("K=V");
}

// Host names as typed, each with pdsh-style ranges (node[01-16], 10.0.0.[1-4]) expanded.
Expected<std::vector<std::string>> host_names(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& a : args) {
    TPUCTL_TRY_ASSIGN(auto names, util::expand_hostlist(a));
    for (auto& n : names) {
      if (seen.insert(n).second) {
        out.push_back(std::move(n));
      }
    }
  }
  return out;
}

void add_remove_hosts(CLI::App& group, Registry& registry) {
  auto hosts = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = registry.add(group, "remove-hosts", "remove hosts from a pool",
                               [hosts](Context& ctx) -> Expected<int> {
                                 TPUCTL_TRY_ASSIGN(auto names, host_names(*hosts));
                                 TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
                                 TPUCTL_TRY_ASSIGN(auto pool, pool_name(ctx, *store));
                                 TPUCTL_TRY(provision::remove_hosts(*store, pool, names));
                                 TPUCTL_TRY(emit(ctx, Json{{"removed", names}}));
                                 return 0;
                               });
  cmd->add_option("HOST", *hosts, "host names, with ranges such as node[01-16]")->required();
}

void add_hosts_list(CLI::App& group, Registry& registry) {
  registry.add(group, "hosts", "list a pool's hosts", [](Context& ctx) -> Expected<int> {
    TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
    TPUCTL_TRY_ASSIGN(auto pool, pool_name(ctx, *store));
    TPUCTL_TRY_ASSIGN(auto view, provision::load_pool(*store, pool));
    TPUCTL_TRY(
        emit_list(ctx, pool_view_json(view)["host_list"], k_host_columns, host_json({}, "")));
    return 0;
  });
}

void add_drain(CLI::App& group, Registry& registry) {
  struct DrainOptions {
    std::vector<std::string> hosts;
    std::string reason;
  };
  auto d = std::make_shared<DrainOptions>();
  auto set = [](Context& ctx, const std::vector<std::string>& hosts,
                const std::string& reason) -> Expected<int> {
    TPUCTL_TRY_ASSIGN(auto names, host_names(hosts));
    TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
    TPUCTL_TRY_ASSIGN(auto pool, pool_name(ctx, *store));
    TPUCTL_TRY_ASSIGN(auto changed, provision::set_drain(*store, pool, names, reason));
    Json rows = Json::array();
    for (const auto& h : changed) {
      rows.push_back(host_json(h, ""));
    }
    TPUCTL_TRY(emit_list(ctx, rows, k_host_columns, host_json({}, "")));
    return 0;
  };
  CLI::App* drain = registry.add(
      group, "drain", "take hosts out of service (never placed until undrained)",
      [d, set](Context& ctx) -> Expected<int> {
        if (d->reason.empty()) {
          return usage_error("--reason: say why the host is drained (e.g. --reason 'disk')");
        }
        return set(ctx, d->hosts, d->reason);
      });
  drain->add_option("HOST", d->hosts, "host names, with ranges such as node[01-16]")->required();
  drain->add_option("--reason", d->reason, "why (shown in describe and placement messages)")
      ->required()
      ->type_name("TEXT");

  auto hosts = std::make_shared<std::vector<std::string>>();
  CLI::App* undrain =
      registry.add(group, "undrain", "put drained hosts back in service",
                   [hosts, set](Context& ctx) -> Expected<int> { return set(ctx, *hosts, ""); });
  undrain->add_option("HOST", *hosts, "host names, with ranges such as node[01-16]")->required();
}

void add_spares(CLI::App& group, Registry& registry) {
  auto count = std::make_shared<std::string>();
  CLI::App* cmd = registry.add(
      group, "spares", "hold COUNT free hosts back for repairs (never placed for requests)",
      [count](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(const int64_t n, util::parse_int(*count, "spares COUNT", 0, 1 << 20));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, pool_name(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto spares, provision::set_spares(*store, pool, static_cast<int>(n)));
        Json rows = Json::array();
        for (const auto& h : spares) {
          rows.push_back(host_json(h, ""));
        }
        TPUCTL_TRY(emit_list(ctx, rows, k_host_columns, host_json({}, "")));
        return 0;
      });
  cmd->add_option("COUNT", *count, "how many (0 releases them all)")->required()->type_name("N");
}

void add_import(CLI::App& group, Registry& registry) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = registry.add(
      group, "import", "import hosts (and optionally the pool) from a JSON inventory",
      [file](Context& ctx) -> Expected<int> {
        std::ifstream in(*file);
        if (!in) {
          return usage_error("inventory file '" + *file + "' cannot be read");
        }
        std::stringstream text;
        text << in.rdbuf();
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Access::create));
        TPUCTL_TRY_ASSIGN(auto added,
                          provision::import_inventory(*store, ctx.globals.pool, text.str()));
        Json rows = Json::array();
        for (const auto& h : added) {
          rows.push_back(host_json(h, ""));
        }
        TPUCTL_TRY(emit_list(ctx, rows, k_host_columns, host_json({}, "")));
        return 0;
      });
  cmd->add_option("FILE", *file, "JSON inventory: {\"pool\": {...}?, \"hosts\": [...]}")
      ->required();
}

} // namespace

void setup_pool(CLI::App& group, Registry& registry) {
  add_create(group, registry);
  add_pool_list(group, registry);
  add_pool_describe(group, registry);
  add_delete(group, registry);
  add_add_hosts(group, registry);
  add_remove_hosts(group, registry);
  add_hosts_list(group, registry);
  add_drain(group, registry);
  add_spares(group, registry);
  add_set_admins(group, registry);
  add_set_ssh_work(group, registry);
  setup_pool_quota(group, registry);
  add_import(group, registry);
  setup_pool_remote(group, registry);
  setup_pool_local(group, registry);
}

} // namespace tpuctl::cli
