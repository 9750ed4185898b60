// tpuctl pool local-up / local-down: a pool of real sshd servers on loopback addresses.
#include <filesystem>
#include <optional>

#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/pool_view.hpp"
#include "cli/runtime_options.hpp"
#include "cli/state_access.hpp"
#include "cli/values.hpp"
#include "provision/pool/local_pool.hpp"
#include "provision/pool/pools.hpp"
#include "state/location.hpp"

namespace tpuctl::cli {

namespace {

struct UpOptions {
  provision::LocalUpOptions up;
  std::optional<int> chips_per_host;
};

void add_local_up(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<UpOptions>();
  CLI::App* cmd = registry.add(
      group, "local-up", "start a local pool: one real sshd per host on a loopback address",
      [o](Context& ctx) -> Expected<int> {
        provision::LocalUpOptions up = o->up;
        up.chips_per_host = o->chips_per_host;
        if (!ctx.globals.pool.empty()) {
          up.pool = ctx.globals.pool;
        }
        TPUCTL_TRY_ASSIGN(up.state_dir, state_dir(ctx));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx, Access::create));
        TPUCTL_TRY_ASSIGN(auto result, provision::local_up(*store, up));
        if (!ctx.globals.quiet && !ctx.machine_format()) {
          ctx.stderr_stream() << "tpuctl: local pool '" << up.pool
                              << "': " << (result.created ? "created, " : "already up, ")
                              << result.started << " sshd started\n";
        }
        Json j = pool_view_json(result.view);
        j["sshd_started"] = result.started;
        TPUCTL_TRY(
            emit(ctx, j, [&](std::ostream& os, const Json&) { print_pool_view(os, result.view); }));
        return 0;
      });
  cmd->add_option("--hosts", o->up.hosts, "number of hosts (default 8)")
      ->type_name("N")
      ->check(count_in(1, 4096));
  cmd->add_option("--generation", o->up.generation, "TPU generation (default v5e)")
      ->type_name("GEN");
  cmd->add_option("--chips-per-host", o->chips_per_host, "chips on each host (default 4)")
      ->type_name("N")
      ->check(count_in(1, 1024));
  cmd->add_option("--shape", o->up.shape,
                  "the pool's extent in chips (default: a compact block for --hosts)")
      ->type_name("CHIPS");
  cmd->add_option("--address-base", o->up.address_base,
                  "first loopback address; host i listens on base+i (default 127.0.0.2)")
      ->type_name("ADDR");
  cmd->add_option("--port", o->up.port, "the port every sshd listens on (default 2222)")
      ->type_name("N")
      ->check(port_number());
  cmd->footer("The pool is named by --pool (default 'local'). Each sshd has its own host key; "
              "one client key\nand a known_hosts file for the pool live under the state "
              "directory. Your ~/.ssh is not touched.\n");
}

// The one pool of the store that local-up made (its directory STATE_DIR/local-pools/NAME is
// there), nullopt when none or several.
std::optional<std::string> only_local_pool(state::StateStore& store, const std::string& dir) {
  auto pools = provision::list_pools(store);
  if (!pools) {
    return std::nullopt;
  }
  std::optional<std::string> found;
  for (const auto& p : *pools) {
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::path(dir) / "local-pools" / p.name, ec)) {
      if (found) {
        return std::nullopt;
      }
      found = p.name;
    }
  }
  return found;
}

void add_local_down(CLI::App& group, Registry& registry) {
  auto force = std::make_shared<bool>(false);
  CLI::App* cmd = registry.add(
      group, "local-down", "stop a local pool's sshd servers, delete the pool and its files",
      [force](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto dir, state_dir(ctx));
        std::string pool = ctx.globals.pool.empty() ? "local" : ctx.globals.pool;
        auto store = open_state(ctx, Drivers::none);
        Expected<provision::LocalDownResult> result = Error();
        if (store) {
          // The pool every command uses: --pool, TPUCTL_POOL, the config's, else the only one
          // (else "local", whose servers may still be found from the disk).
          if (auto resolved = resolve_pool(ctx, **store)) {
            pool = *resolved;
          } else if (resolved.error().kind != ErrorKind::not_found) {
            // Several pools and none named: the only one local-up made is the one meant.
            auto only = only_local_pool(**store, dir);
            if (ctx.globals.pool.empty() && only) {
              pool = *only;
            } else {
              return resolved.error();
            }
          }
          result = provision::local_down(**store, pool, *force, dir);
        } else if (state::has_reason(store.error(), state::reason::k_no_store) ||
                   state::has_reason(store.error(), state::reason::k_store_replaced)) {
          // No store to ask: the servers are found from the disk.
          result = provision::local_down_from_disk(pool, dir);
          if (result && result->stopped == 0) {
            return store.error();
          }
        } else {
          return store.error();
        }
        TPUCTL_TRY(result);
        if (result->from_disk && !ctx.globals.quiet) {
          ctx.stderr_stream() << "tpuctl: notice: the state store has no local pool '" << pool
                              << "': stopped the " << result->stopped
                              << " sshd servers found running from " << result->root << "\n";
        }
        TPUCTL_TRY(emit(
            ctx, Json{{"pool", pool},
                      {"hosts", result->hosts},
                      {"sshd_stopped", result->stopped},
                      {"processes_stopped", result->processes},
                      {"found_from_disk", result->from_disk},
                      {"removed_dir", result->removed.empty() ? Json() : Json(result->removed)}}));
        return 0;
      });
  cmd->add_flag("--force", *force, "also when hosts are claimed by queued resources");
  cmd->footer(
      "Takes the pool --pool names, else the only pool (as every command does). Stops\n"
      "its sshd servers and everything started through them (processes_stopped), then\n"
      "removes the pool's directory under the state directory (local-pools/NAME/: host and\n"
      "client keys, known_hosts, sshd configs, each host's workdir with the agents).");
}

} // namespace

void setup_pool_local(CLI::App& group, Registry& registry) {
  add_local_up(group, registry);
  add_local_down(group, registry);
}

} // namespace tpuctl::cli
