// The SSH settings a request is made with, kept with it.
//
// A queued resource or a workload is carried on by processes other than the command that made
// it: a detached driver provisions it (started by `--async`, or by a delete that frees the hosts
// it waits for), a workload's monitor watches and restarts its workers, a repair provisions its
// slice again. Each of those is a new tpuctl process with default flags, so without help they
// would drop what the user typed: `--ssh-config`, `--strict-host-key-checking`,
// `--identity-passphrase-file`, `--connect-timeout`. The request therefore records them
// (SshSettings, absolute paths, never a passphrase itself) and the process that carries it on
// lays them over its own options (with_settings). provision/slice/request_ssh.hpp says when: only
// in the processes of the request's owner, since one user's relaxed policy must never steer
// another user's process (nor the controller's, which works with its own identity).
#pragma once

#include <cstdint>
#include <string>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

struct SshSettings {
  std::string strict;             // yes | ask | accept-new | no; empty: the process's own
  std::string config_file;        // an ssh_config (absolute); empty: ~/.ssh/config
  std::string passphrase_file;    // --identity-passphrase-file (absolute); empty: none
  int64_t connect_timeout_ms = 0; // 0: the process's own

  bool empty() const {
    return strict.empty() && config_file.empty() && passphrase_file.empty() &&
           connect_timeout_ms == 0;
  }
  bool operator==(const SshSettings&) const = default;
};

// --strict-host-key-checking's value: yes (ask is yes: tpuctl never prompts), accept-new or no,
// in any case. Errors: usage naming the value and the choices.
Expected<HostKeyPolicy> parse_host_key_policy(const std::string& text);

// `base` with what `settings` sets: its host-key policy, ssh_config, passphrase file (asked as
// passphrase_source asks) and connect timeout; what it leaves empty stays `base`'s. Errors: usage
// (a recorded policy this version does not know).
Expected<SshOptions> with_settings(SshOptions base, const SshSettings& settings);

} // namespace tpuctl::remote
