// ssh_config as OpenSSH 9.2's ssh(1) reads it, for everything tpuctl decides itself rather than
// leaving to libssh 0.10: which known_hosts files are read and in what order, the name a host's
// key is looked up under (HostKeyAlias), the certificates of an identity, IdentitiesOnly, the
// jump hosts. One resolver, used by every path that reads these (the host-key check, host
// certificates, user certificates, jump hosts), so they can never disagree about a file.
//
// What it follows, from ssh(1), ssh_config(5) and readconf.c:
// * `~` is the password database's home directory of the user running tpuctl (OpenSSH's
//   tilde_expand_filename and %d), never $HOME: with HOME pointing elsewhere (CI runners,
//   containers, `sudo -E`) ssh still reads /root/.ssh/known_hosts, and so does tpuctl.
// * Files: `--ssh-config FILE` alone (as `ssh -F FILE`), else ~/.ssh/config then
//   /etc/ssh/ssh_config; none when config processing is off (`-F none`). `Include` (globs,
//   relative to ~/.ssh or /etc/ssh) is read in place, inside the block that includes it.
// * For each keyword the first value obtained wins (IdentityFile and CertificateFile
//   accumulate); values given on the command line (the inventory's port and user) come first.
// * `Host` patterns match the name as given; `Match` takes all, host (the HostName so far, %h
//   expanded), originalhost, user, localuser, exec (run by /bin/sh, its status), final and
//   canonical (matching only in a second pass, made when some `Match final` asks for it;
//   tpuctl never canonicalises host names, so that pass is the "final" one).
// * UserKnownHostsFile and GlobalKnownHostsFile take several files; `none` means none. Their
//   defaults are ~/.ssh/known_hosts ~/.ssh/known_hosts2 and /etc/ssh/ssh_known_hosts
//   /etc/ssh/ssh_known_hosts2. `~` and the tokens %% %d %h %i %k %L %l %n %p %r %u and
//   ${VAR} are expanded as ssh does (%C is not: such a path is refused in one line).
// * HostName (%h, %%), HostKeyAlias (lowercased), Port, User, HashKnownHosts, CheckHostIP,
//   IdentitiesOnly, ProxyJump, ProxyCommand, StrictHostKeyChecking (recorded, never obeyed:
//   --strict-host-key-checking is tpuctl's, default yes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::remote {

struct SshConfigQuery {
  std::string host;     // the name as given (ssh's host argument)
  uint16_t port = 0;    // given on the command line (the inventory's); 0: none
  std::string user;     // given on the command line; empty: none
  bool process_config = true;
  std::string config_file; // as `ssh -F`; empty: ~/.ssh/config, then the system file
  std::string system_config = "/etc/ssh/ssh_config";
};

struct SshResolved {
  std::string host_arg;  // the name as given
  std::string hostname;  // after HostName, lowercased
  uint16_t port = 22;
  std::string user;
  std::vector<std::string> user_known_hosts;   // expanded, in the order ssh reads them
  std::vector<std::string> global_known_hosts; // expanded
  std::string host_key_alias;                  // lowercased; empty: none
  bool hash_known_hosts = false;
  bool check_host_ip = false;
  bool identities_only = false;
  std::string strict_host_key_checking; // as written, for diagnostics only
  std::vector<std::string> identity_files;    // as ssh -G prints them (~ kept)
  std::vector<std::string> certificate_files; // as written (expand_config_path)
  std::string proxy_jump;                     // "" when none
  std::string proxy_command;                  // "" when none
  std::vector<std::string> config_files;      // the files read, in order
};

// The password database's home directory of the real user (getpwuid(getuid())), else $HOME.
std::string user_home();

// `~` and `~/...` expanded to user_home(); `~user/...` to that user's home. Other paths as given.
std::string expand_user_path(std::string_view path);

// The options ssh would use for `query`. Errors (usage): a file that cannot be read when it
// was named (`--ssh-config`), a malformed Match, a bad Port, a %C token or an undefined ${VAR}
// in a known_hosts path, `none` beside other files; each names the file and line.
Expected<SshResolved> resolve_ssh_config(const SshConfigQuery& query);

// A path of the config (CertificateFile, IdentityFile) as ssh opens it: `~` and the %-tokens.
std::string expand_config_path(const SshResolved& r, std::string_view raw);

// The key of a known_hosts lookup for `r`: its HostKeyAlias, else "host" on port 22 and
// "[host]:port" elsewhere.
std::string known_hosts_lookup_name(const SshResolved& r);

} // namespace tpuctl::remote
