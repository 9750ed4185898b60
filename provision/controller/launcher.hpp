// Starting a tpuctl of our own in the background: a detached driver (`controller drive`), a
// workload's monitor, a background delete or resize. The child gets what the caller used to
// reach the store (never a password: an etcd password comes through the inherited environment or
// a file), the caller's SSH policy, `--quiet --verbosity info`, and a log of its own under the
// state directory; it runs in its own session with stdin and stdout on /dev/null, so it outlives
// the command that started it (that is its purpose) but holds none of its terminal.
#pragma once

#include <string>
#include <vector>

namespace tpuctl::provision {

// The environment variable that names the leadership a controller's monitor acts for.
inline constexpr const char* k_leader_env = "TPUCTL_CONTROLLER_LEADER";

struct Launcher {
  std::string binary;                  // this executable (self_exe())
  std::vector<std::string> store_args; // --state URL, --etcd-user, ... (never a secret)
  std::string log_dir;                 // <state dir>/logs; empty: the children log nowhere
  std::string strict = "yes";          // their --strict-host-key-checking
  std::string ssh_config;              // their --ssh-config; empty: ~/.ssh/config
  std::string passphrase_file;         // their --identity-passphrase-file (a path, never its text)
  // The elected controller starting its own monitors: they get TPUCTL_CONTROLLER_LEADER (its
  // leadership's id), which makes them the controller's (leadership.hpp); false: a command's.
  bool as_controller = false;
  std::string leader_id;

  // The same launcher with the default SSH policy: what carries other people's requests on
  // never inherits a policy one command relaxed for itself.
  Launcher with_default_ssh() const;
};

// The path of the running executable (/proc/self/exe).
std::string self_exe();

// Starts `tpuctl <store_args> --pool POOL --quiet --verbosity info [--log-file LOG] COMMAND...
// --strict-host-key-checking P [--ssh-config F]` detached (double fork, setsid), logging to
// <log_dir>/<log_name> (0600, in a 0700 directory). Best effort: a failure is a warning, and the
// next command that needs the work done starts it again.
void spawn_detached(const Launcher& launcher, const std::string& pool,
                    const std::vector<std::string>& command, const std::string& log_name);

// spawn_detached() of `controller drive` for `pool`, logging to driver.log.
void spawn_driver(const Launcher& launcher, const std::string& pool);

} // namespace tpuctl::provision
