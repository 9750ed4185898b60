// A site reachable only through a bastion, for the jump host tests, in network namespaces the
// fixture creates (tpt-jump-c<pid>, tpt-jump-s<pid>; needs root):
//   - the "site" namespace holds a bastion sshd (also on 10.254.77.2:22, the site's end of a veth
//     pair) and four workers' sshd on 127.0.252.2-5:2222, addresses that exist only inside it;
//   - the "client" namespace holds the other end of the pair (10.254.77.1/30): the bastion is
//     the one way in. tpuctl (or a fan-out thread, enter_client()) runs there.
// Every sshd is a real OpenSSH server from remote::create_local_sshd_pool (own host keys, one
// client key), started inside the site. The destructor stops every process left in either
// namespace by pid (each one started by the test) and deletes them, also when a test failed.
// Without root the constructor fails the test saying why (CI runs as root): never a skip.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "remote/local_sshd.hpp"
#include "tests/support/helpers.hpp"

namespace tpuctl::test {

class JumpSite {
public:
  static constexpr const char* k_bastion = "10.254.77.2";
  // A command for the four workers: a barrier first (each adds a file to `dir`, then waits until
  // four are there, so every worker's session is open at the same time; a one-shot look at the
  // sessions would miss them, since the first workers through finish and close theirs), then
  // how many TCP connections the bastion's port 22 holds: "bastion-connections=N". Each run
  // needs its own `dir`.
  static std::string count_command(const std::string& dir);

  JumpSite();
  ~JumpSite();
  JumpSite(const JumpSite&) = delete;
  JumpSite& operator=(const JumpSite&) = delete;

  TempDir dir;
  std::string client_ns, site_ns;

private:
  // Kills what is left in the namespaces it holds (by pid) and deletes them; a member, so that
  // it also runs when the constructor fails half-way.
  struct Namespaces {
    std::vector<std::string> names;
    std::string veth; // in case it was left in this namespace
    ~Namespaces();
  } m_namespaces;

public:
  remote::LocalSshdPool pool; // hosts[0] is the bastion, hosts[1..4] the workers
  std::string hop;            // "USER@10.254.77.2:22"
  std::string known;          // known_hosts: the workers and the bastion
  std::string known_workers;  // known_hosts: the workers only (the bastion is unknown)
  std::string config;         // ssh_config: known
  std::string config_jump;    // ssh_config: ProxyJump hop for 127.0.252.*, known
  std::string config_unknown; // ssh_config: known_workers

  // Moves the calling thread into the client namespace (threads it starts follow it).
  // Returns false when that fails.
  bool enter_client() const;
  // "Accepted publickey" lines in the bastion's log so far.
  size_t bastion_logins() const;
  // `program args...` in the client namespace, with `env` added.
  util::ProcessResult run_in_client(std::vector<std::string> argv,
                                    const std::map<std::string, std::string>& env = {}) const;
};

} // namespace tpuctl::test
