#include "provision/pool/local_pool.hpp"

#include <arpa/inet.h>
#include <filesystem>
#include <set>

#include "remote/local_sshd.hpp"
#include "util/process_tree.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace fs = std::filesystem;

Expected<std::string> loopback_address(const std::string& base, int offset) {
  in_addr addr{};
  if (::inet_pton(AF_INET, base.c_str(), &addr) != 1) {
    return usage_error("--address-base: '" + base + "' is not an IPv4 address");
  }
  uint32_t host = ntohl(addr.s_addr);
  uint32_t value = host + static_cast<uint32_t>(offset);
  if ((host >> 24) != 127 || (value >> 24) != 127 || (value & 0xff) == 0 || (value & 0xff) == 255) {
    return usage_error("--address-base: " + base + " + " + std::to_string(offset) +
                       " leaves 127.0.0.0/8 or hits a .0/.255 address (local pools use loopback "
                       "addresses only; choose e.g. 127.0.0.2)");
  }
  in_addr out{};
  out.s_addr = htonl(value);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &out, text, sizeof text);
  return std::string(text);
}

namespace {

// The addresses of `hosts` hosts from `base`, skipping .0 and .255 of each /24.
Expected<std::vector<std::string>> host_addresses(const std::string& base, int hosts) {
  std::vector<std::string> out;
  int offset = 0;
  while (static_cast<int>(out.size()) < hosts) {
    auto a = loopback_address(base, offset++);
    if (!a) {
      auto direct = loopback_address(base, 0);
      if (!direct) {
        return direct.error();
      }
      // Skip .255/.0 of a /24 boundary and keep going; stop at the end of 127/8.
      if (offset > hosts + 2 * (hosts / 254 + 2)) {
        return a.error();
      }
      continue;
    }
    out.push_back(*a);
  }
  return out;
}

remote::LocalSshdOptions sshd_options(const fs::path& root, const std::vector<std::string>& addrs,
                                      int port) {
  remote::LocalSshdOptions o;
  o.root = root;
  for (const auto& a : addrs) {
    o.hosts.push_back(remote::LocalHostSpec{a, a, static_cast<uint16_t>(port)});
  }
  // bash skips ~/.bashrc for remote commands when SHLVL is set: a slow rc file would otherwise
  // cost every login (documented in the README's local pool section).
  o.session_env["SHLVL"] = "1";
  // Every process started through the pool's servers carries the pool's directory: local-down
  // finds them all in one pass, whichever host started them (they share this machine).
  o.session_env[k_local_pool_var] = root.string();
  // Each host stands for a machine of its own: its own ~ (files a command writes to ~ on one
  // host are not on the others, nor in the user's home).
  o.own_home = true;
  return o;
}

// What runs on the pool's hosts once their servers are gone: stopped in one pass over this
// machine's processes for all of them (TERM, 2 s, KILL), and one more for what they forked.
int sweep_pool_processes(const fs::path& root) {
  int stopped = 0;
  const std::string tag = std::string(k_local_pool_var) + "=" + root.string();
  for (int pass = 0; pass < 2; ++pass) {
    const auto pids = util::processes_tagged(tag);
    if (pids.empty()) {
      break;
    }
    stopped += util::stop_processes(pids, std::chrono::seconds(2)).terminated;
  }
  return stopped;
}

} // namespace

Expected<LocalUpResult> local_up(state::StateStore& store, const LocalUpOptions& options) {
  TPUCTL_TRY(validate_pool_name(options.pool));
  if (options.hosts < 1 || options.hosts > 1024) {
    return usage_error("--hosts: " + std::to_string(options.hosts) +
                       " is out of range (a local pool has 1 to 1024 hosts)");
  }
  if (options.port < 1 || options.port > 65535) {
    return usage_error("--port: " + std::to_string(options.port) + " is out of range (1-65535)");
  }
  fs::path root = fs::path(options.state_dir) / "local-pools" / options.pool;
  LocalUpResult result;

  TPUCTL_TRY_ASSIGN(auto existing, store.find(state::pool_key(options.pool)));
  if (existing) {
    TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, options.pool));
    if (view.info.local.is_null()) {
      return usage_error("pool '" + options.pool +
                         "' exists and is not a local pool (choose another --pool)");
    }
    if (static_cast<int>(view.hosts.size()) != options.hosts) {
      return usage_error("local pool '" + options.pool + "' has " +
                         util::counted(view.hosts.size(), "host") + ", not " +
                         std::to_string(options.hosts) + ": run 'tpuctl pool local-down --pool " +
                         options.pool + "' first to change its size");
    }
    std::vector<std::string> addrs;
    for (const auto& h : view.hosts) {
      addrs.push_back(h.address);
    }
    int port = view.info.local.value("port", options.port);
    TPUCTL_TRY_ASSIGN(auto sshd, remote::create_local_sshd_pool(sshd_options(
                                     view.info.local.value("root", root.string()), addrs, port)));
    for (auto& host : sshd.hosts) {
      if (remote::running_local_sshd_pid(host) == 0) {
        TPUCTL_TRY(remote::start_local_sshd(sshd, host));
        ++result.started;
      }
    }
    result.view = std::move(view);
    return result;
  }

  TPUCTL_TRY_ASSIGN(auto addrs, host_addresses(options.address_base, options.hosts));
  PoolLayout layout;
  if (options.shape.empty()) {
    TPUCTL_TRY_ASSIGN(layout,
                      compact_layout(options.generation, options.chips_per_host, options.hosts));
  } else {
    TPUCTL_TRY_ASSIGN(layout,
                      make_pool_layout(options.generation, options.chips_per_host, options.shape));
    if (layout.capacity() < options.hosts) {
      return usage_error("--shape: " + options.shape + " holds " +
                         util::counted(static_cast<size_t>(layout.capacity()), "host") +
                         ", fewer than --hosts " + std::to_string(options.hosts));
    }
  }
  TPUCTL_TRY_ASSIGN(auto sshd,
                    remote::create_local_sshd_pool(sshd_options(root, addrs, options.port)));
  TPUCTL_TRY(remote::start_local_sshd_pool(sshd));
  result.started = static_cast<int>(sshd.hosts.size());

  auto register_pool = [&]() -> Expected<PoolView> {
    Json local{{"root", root.string()},
               {"address_base", options.address_base},
               {"port", options.port},
               {"hosts", options.hosts}};
    auto created = create_pool(store, options.pool, layout, local, sshd.client_key.string(),
                               sshd.known_hosts.string());
    if (!created) {
      return created.error();
    }
    std::vector<util::HostSpec> specs;
    for (const auto& h : sshd.hosts) {
      specs.push_back(util::HostSpec{sshd.user, h.address, h.port});
    }
    AddHostsOptions add;
    add.identity_file = sshd.client_key.string();
    for (const auto& h : sshd.hosts) {
      add.workdir_by_host[h.address] = (h.dir / "work").string(); // each host its own
    }
    add.local = Json{{"sshd", true}};
    auto added = add_hosts(store, options.pool, specs, add);
    if (!added) {
      // All or nothing as the caller sees it: the pool goes again, or the error says it stays.
      if (auto removed = delete_pool(store, options.pool, true); !removed) {
        return Error(ErrorKind::partial,
                     "local pool '" + options.pool + "' was created without its hosts (adding " +
                         "them failed: " + added.error().message + "; removing the pool failed " +
                         "too: " + removed.error().message + "); delete it with 'tpuctl pool " +
                         "delete " + options.pool + " --force'");
      }
      return added.error();
    }
    return load_pool(store, options.pool);
  };
  auto view = register_pool();
  if (!view) {
    (void)remote::stop_local_sshd_pool(sshd);
    return view.error();
  }
  result.view = std::move(*view);
  result.created = true;
  return result;
}

Expected<LocalDownResult> local_down_from_disk(const std::string& pool,
                                               const std::string& state_dir) {
  TPUCTL_TRY(validate_pool_name(pool));
  const fs::path root = fs::path(state_dir) / "local-pools" / pool;
  LocalDownResult result;
  result.from_disk = true;
  result.root = root.string();
  TPUCTL_TRY_ASSIGN(result.stopped, remote::stop_local_sshd_under(root));
  result.processes = sweep_pool_processes(root);
  return result;
}

Expected<LocalDownResult> local_down(state::StateStore& store, const std::string& pool, bool force,
                                     const std::string& state_dir) {
  auto loaded = load_pool(store, pool);
  if (!loaded && loaded.error().kind == ErrorKind::not_found && !state_dir.empty()) {
    // Not in the store (it was reset, or replaced): what runs is found from the disk.
    auto result = local_down_from_disk(pool, state_dir);
    if (result && result->stopped == 0) {
      return loaded.error(); // nothing of that name here either
    }
    return result;
  }
  TPUCTL_TRY_ASSIGN(PoolView view, std::move(loaded));
  if (view.info.local.is_null()) {
    return usage_error("pool '" + pool + "' is not a local pool (use 'tpuctl pool delete')");
  }
  if (!view.claims.empty() && !force) {
    return Error(ErrorKind::failure,
                 "local pool '" + pool + "' has " + std::to_string(view.claims.size()) +
                     " claimed hosts: delete those queued resources first, or use --force",
                 "hosts_busy");
  }
  std::vector<std::string> addrs;
  for (const auto& h : view.hosts) {
    addrs.push_back(h.address);
  }
  LocalDownResult result;
  result.hosts = static_cast<int>(view.hosts.size());
  std::string root = view.info.local.value("root", std::string());
  result.root = root;
  // The servers are counted before any is stopped: once a server is gone, a connection it was
  // forking carries the server's command line with no server above it, and a later scan could
  // not tell it from a server whose pid file is gone.
  std::set<int> servers;
  if (!root.empty()) {
    for (int pid : remote::local_sshd_pids_under(root)) {
      servers.insert(pid);
    }
  }
  if (!addrs.empty()) {
    TPUCTL_TRY_ASSIGN(auto sshd, remote::create_local_sshd_pool(sshd_options(
                                     root, addrs, view.info.local.value("port", 2222))));
    for (auto& host : sshd.hosts) {
      if (int pid = remote::running_local_sshd_pid(host); pid != 0) {
        servers.insert(pid);
      }
    }
    TPUCTL_TRY(remote::stop_local_sshd_pool(sshd));
  }
  result.stopped = static_cast<int>(servers.size());
  // Anything else still running from that directory (a server whose pid file is gone, a
  // connection), then whatever was started through the servers (sessions, commands, workloads).
  if (!root.empty()) {
    TPUCTL_TRY_ASSIGN(int more, remote::stop_local_sshd_under(root));
    (void)more; // counted above, when they could still be told apart
    result.processes = sweep_pool_processes(root);
  }
  TPUCTL_TRY(delete_pool(store, pool, true));
  // Only a directory local-up made (STATE_DIR/local-pools/NAME): a damaged record naming any
  // other path removes nothing.
  const fs::path made = root;
  if (!made.empty() && made.filename() == pool && made.parent_path().filename() == "local-pools") {
    std::error_code ec;
    fs::remove_all(made, ec);
    if (ec) {
      return Error(ErrorKind::failure, "local pool '" + pool + "' is deleted, but its directory '" +
                                           made.string() +
                                           "' could not be removed: " + ec.message());
    }
    result.removed = made.string();
  }
  return result;
}

} // namespace tpuctl::provision
