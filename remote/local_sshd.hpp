// A local pool of real OpenSSH servers: one `sshd` per simulated host, each on its own loopback
// address with its own host key, configuration, pid file and log, all under one pool directory.
// One client key pair per pool is authorized on every host, and known_hosts lines are written
// from the generated host keys, so strict host-key checking works with no prompt. The user's own
// ~/.ssh is never read or written. `tpuctl pool local-up` and the integration tests use it.
//
// Layout of a pool directory:
//   client_ed25519, client_ed25519.pub, authorized_keys, known_hosts
//   hosts/<name>/ssh_host_ed25519_key{,.pub}, sshd_config, sshd.pid, sshd.log
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

struct LocalHostSpec {
  std::string name;    // [A-Za-z0-9._-]+, unique in the pool; also the directory name
  std::string address; // an IPv4 loopback address (127.0.0.0/8), e.g. 127.0.0.2
  uint16_t port = 2222;
};

struct LocalSshdOptions {
  std::filesystem::path root; // the pool directory; created when missing
  std::vector<LocalHostSpec> hosts;
  // Environment for every login (sshd_config SetEnv). SHLVL=1 makes bash skip ~/.bashrc for
  // the remote commands, which matters when that file is slow (pyenv init: ~1 s per login).
  std::map<std::string, std::string> session_env;
  // Each host a home directory of its own, <host dir>/home: HOME for every login and where its
  // commands and shells start (a ForceCommand wrapper, `login` in the pool directory, changes
  // into it; sftp still works), so `~` on one host is neither another host's nor the user's own
  // home, as on separate machines.
  bool own_home = false;
  std::string sshd_program = "sshd"; // searched in PATH and the sbin directories
  std::string keygen_program = "ssh-keygen";
};

struct LocalSshdHost {
  std::string name;
  std::string address;
  uint16_t port = 0;
  std::filesystem::path dir;
  std::filesystem::path host_key; // private; the public key is host_key + ".pub"
  std::filesystem::path config;
  std::filesystem::path pid_file;
  std::filesystem::path log_file;
  std::string known_hosts_line; // "[127.0.0.2]:2222 ssh-ed25519 AAAA..."
  int pid = 0;                  // 0 when not started by this object
};

struct LocalSshdPool {
  std::filesystem::path root;
  std::filesystem::path client_key; // private key; client_key + ".pub" next to it
  std::filesystem::path known_hosts;
  std::string user;      // the login user: the current user
  std::string sshd_path; // absolute path of sshd
  std::vector<LocalSshdHost> hosts;

  // One SshTarget per host: its address and port, the pool's key and known_hosts file.
  std::vector<SshTarget> targets() const;
};

// Creates the pool directory: the client key pair (kept if present), a host key per host (kept
// if present), each sshd_config, authorized_keys and known_hosts. Starts nothing.
// Errors: usage (bad host name or address, duplicate address:port), failure (sshd or ssh-keygen
// not installed: the message names the Debian package; a file cannot be written).
Expected<LocalSshdPool> create_local_sshd_pool(const LocalSshdOptions& options);

// Starts one host's sshd (`sshd -f CONFIG -E LOG`; it daemonizes after binding) and records its
// pid. A host whose sshd is already running is left as is. As root, creates the privilege-
// separation directory /run/sshd when missing. Errors: failure with sshd's own complaint (for
// example "Address already in use") taken from the host's log.
Status start_local_sshd(const LocalSshdPool& pool, LocalSshdHost& host);

// Starts every host; on the first failure stops the ones it started and returns that error.
Status start_local_sshd_pool(LocalSshdPool& pool);

// The pid in the host's pid file if that process is alive and is this host's sshd, else 0.
int running_local_sshd_pid(const LocalSshdHost& host);

// Stops one host's sshd by the pid in its pid file: SIGCONT (in case it was stopped), SIGTERM,
// then SIGKILL after `grace`. Only a process whose command line names this host's config is
// signalled. Not running is not an error. Errors: failure if it survives SIGKILL.
Status stop_local_sshd(LocalSshdHost& host,
                       std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

// The pids of the running sshd listeners whose command line names a host configuration under the
// pool directory `root` (ROOT/hosts/NAME/sshd_config), found in /proc: what is left of a local
// pool whose state store, or even whose directory, was deleted under it.
std::vector<int> local_sshd_pids_under(const std::filesystem::path& root);

// Stops each of local_sshd_pids_under(root) as stop_local_sshd does; returns how many stopped.
// Errors: failure naming every one that survived SIGKILL.
Expected<int>
stop_local_sshd_under(const std::filesystem::path& root,
                      std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

// Stops every host; reports every host that could not be stopped.
Status stop_local_sshd_pool(LocalSshdPool& pool);

} // namespace tpuctl::remote
