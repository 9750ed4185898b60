// Real etcd servers for tests: a one- or three-member cluster of Debian's /usr/bin/etcd on
// loopback, in a scratch data directory, stopped by pid (SIGKILL + waitpid) when the object dies.
//
// Addresses: the 127.130.0.0/16 block belongs to the etcd tests. A cluster picks a third octet
// by probing (starting from a pid-derived value) until every member's ports bind, and member i
// listens on 127.130.<sub>.<i+1>, client port 23790, peer port 23800, so parallel test files and
// two build trees do not collide, and the system's etcd service on :2379 is never touched.
// Members run with a 50 ms heartbeat and a 500 ms election timeout (an election takes ~1 s).
//
// With tls, the fixture makes a CA, a server certificate for the members' addresses and a client
// certificate without a CommonName (openssl), and members serve https only to clients that
// present a certificate of that CA (--client-cert-auth).
//
// A missing etcd (or openssl) binary is a test failure (the exception says to run
// scripts/deps.sh), never a silent skip.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "state/etcd_client.hpp"
#include "tests/support/helpers.hpp"

namespace tpuctl::test {

class EtcdCluster {
public:
  // Starts `members` (1 or 3) etcd processes and waits until they have a leader. Throws
  // std::runtime_error naming the reason (and the member's log) when that fails.
  explicit EtcdCluster(int members = 1, bool tls = false);
  // Kills every member by pid.
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(m_members.size()); }
  // "http://127.130.S.1:23790" ("https://" with tls), ... for every member (running or not).
  std::vector<std::string> endpoints() const;
  // The --state URL for the cluster: "etcd://127.130.S.1:23790,.../PREFIX/" (etcd+https://
  // with tls; the default prefix when `prefix` is empty).
  std::string url(const std::string& prefix = "") const;
  // The member that leads now (asks the running members). Throws when none answers.
  int leader() const;
  // SIGKILL + waitpid of member i.
  void kill(int i);
  // Starts member i again on its data directory (it rejoins the cluster).
  void restart(int i);
  // Kills every member, deletes their data directories and starts them again: an empty cluster
  // at revision 1. With `new_identity` under another cluster token, so its cluster id differs;
  // without, etcd derives the same cluster id from the same members and token. Waits until
  // ready.
  void restart_empty(bool new_identity);
  bool running(int i) const { return m_members[static_cast<size_t>(i)].pid > 0; }
  // Waits until every running member answers and one of them leads. Throws on timeout.
  void wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  const std::filesystem::path& dir() const { return m_tmp.path(); }
  // With tls: the CA bundle, and the client certificate and key.
  std::string ca_file() const { return (m_tmp.path() / "ca.pem").string(); }
  std::string client_cert() const { return (m_tmp.path() / "client.pem").string(); }
  std::string client_key() const { return (m_tmp.path() / "client.key").string(); }
  // Client options that reach this cluster (TLS files included).
  state::etcd::ClientOptions client_options() const;
  // Turns etcd's authentication on, as a team's shared store has it: a root user, a role
  // "tpuctl-rw" that may read and write the keys under `prefix`, and each of `users` (name ->
  // password) with that role. REQUIREs every call.
  void enable_auth(const std::string& prefix, const std::map<std::string, std::string>& users);

private:
  struct Member {
    std::string name;
    std::string address;
    pid_t pid = -1;
  };
  void spawn(size_t i);
  void make_certificates();
  std::string log_tail(size_t i) const;
  std::string client_url(const std::string& address) const;

  TempDir m_tmp;
  std::string m_etcd;
  std::string m_token;
  bool m_tls = false;
  std::vector<Member> m_members;
};

// The environment of a tpuctl run as etcd user `name`, whose password (enable_auth) is
// "<name>-pw": TPUCTL_ETCD_USER and TPUCTL_ETCD_PASSWORD.
std::map<std::string, std::string> etcd_user(const std::string& name);

// A unique key prefix ("/t-<pid>-<n>/") so several stores share one cluster without seeing
// each other.
std::string unique_prefix();

} // namespace tpuctl::test
