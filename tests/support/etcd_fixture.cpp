#include "tests/support/etcd_fixture.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "state/etcd_wire.hpp"
#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace tpuctl::test {

namespace {

constexpr int k_client_port = 23790;
constexpr int k_peer_port = 23800;

std::string peer_url(const std::string& address) {
  return "http://" + address + ":" + std::to_string(k_peer_port);
}

} // namespace

std::string unique_prefix() {
  static std::atomic<int> counter{0};
  return "/t-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "/";
}

std::string EtcdCluster::client_url(const std::string& address) const {
  return std::string(m_tls ? "https://" : "http://") + address + ":" +
         std::to_string(k_client_port);
}

state::etcd::ClientOptions EtcdCluster::client_options() const {
  state::etcd::ClientOptions o;
  o.endpoints = endpoints();
  if (m_tls) {
    o.cacert = ca_file();
    o.cert = client_cert();
    o.key = client_key();
  }
  return o;
}

void EtcdCluster::make_certificates() {
  std::string openssl = util::find_program("openssl");
  if (openssl.empty()) {
    throw std::runtime_error("openssl is not installed: run scripts/deps.sh");
  }
  std::string d = m_tmp.path().string();
  std::vector<std::string> sans;
  for (const auto& m : m_members) {
    sans.push_back("IP:" + m.address);
  }
  std::ofstream(d + "/server.ext") << "subjectAltName=" << util::join(sans, ",") << "\n";
  std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                 "-nodes"};
  auto run = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), openssl);
    auto r = util::run_process(argv);
    if (!r || r->exit_code != 0) {
      throw std::runtime_error("openssl " + argv[1] +
                               " failed: " + (r ? r->err : r.error().message));
    }
  };
  auto req = [&](const std::string& name, const std::string& subject, bool self_signed) {
    std::vector<std::string> argv{"req"};
    if (self_signed) {
      argv.push_back("-x509");
    }
    argv.insert(argv.end(), ec.begin(), ec.end());
    argv.insert(argv.end(), {"-keyout", d + "/" + name + ".key", "-subj", subject, "-days", "2",
                             "-out", d + "/" + name + (self_signed ? ".pem" : ".csr")});
    run(argv);
  };
  auto sign = [&](const std::string& name, bool server) {
    std::vector<std::string> argv{"x509",
                                  "-req",
                                  "-in",
                                  d + "/" + name + ".csr",
                                  "-CA",
                                  d + "/ca.pem",
                                  "-CAkey",
                                  d + "/ca.key",
                                  "-CAcreateserial",
                                  "-days",
                                  "2",
                                  "-out",
                                  d + "/" + name + ".pem"};
    if (server) {
      argv.insert(argv.end(), {"-extfile", d + "/server.ext"});
    }
    run(argv);
  };
  req("ca", "/O=tpuctl-test-ca", true);
  req("server", "/O=tpuctl-test-server", false);
  sign("server", true);
  // No CommonName: etcd's gateway refuses CN-bearing client certificates when auth is on.
  req("client", "/O=tpuctl", false);
  sign("client", false);
}

EtcdCluster::EtcdCluster(int members, bool tls) : m_tls(tls) {
  m_etcd = util::find_program("etcd");
  if (m_etcd.empty()) {
    throw std::runtime_error("etcd is not installed (no 'etcd' in PATH): run scripts/deps.sh, "
                             "which installs Debian's etcd-server and etcd-client");
  }
  if (members != 1 && members != 3) {
    throw std::runtime_error("EtcdCluster: 1 or 3 members");
  }
  int start = static_cast<int>(::getpid() % 240) + 1;
  for (int attempt = 0; attempt < 60 && m_members.empty(); ++attempt) {
    int sub = 1 + (start + attempt * 11) % 250;
    std::vector<Member> candidate;
    bool free = true;
    for (int i = 0; free && i < members; ++i) {
      std::string addr = "127.130." + std::to_string(sub) + "." + std::to_string(i + 1);
      free = can_bind(addr, k_client_port) && can_bind(addr, k_peer_port);
      candidate.push_back({"m" + std::to_string(i + 1), addr, -1});
    }
    if (free) {
      m_members = std::move(candidate);
      m_token = "tpuctl-test-" + std::to_string(::getpid()) + "-" + std::to_string(sub);
    }
  }
  if (m_members.empty()) {
    throw std::runtime_error("EtcdCluster: no free addresses in 127.130.0.0/16");
  }
  if (m_tls) {
    make_certificates();
  }
  for (size_t i = 0; i < m_members.size(); ++i) {
    spawn(i);
  }
  wait_ready();
}

EtcdCluster::~EtcdCluster() {
  for (size_t i = 0; i < m_members.size(); ++i) {
    if (m_members[i].pid > 0) {
      kill(static_cast<int>(i));
    }
  }
}

void EtcdCluster::spawn(size_t i) {
  Member& m = m_members[i];
  std::vector<std::string> cluster;
  for (const auto& other : m_members) {
    cluster.push_back(other.name + "=" + peer_url(other.address));
  }
  std::string data = (m_tmp.path() / m.name).string();
  std::string log = (m_tmp.path() / (m.name + ".log")).string();
  std::vector<std::string> args{m_etcd,
                                "--name",
                                m.name,
                                "--data-dir",
                                data,
                                "--listen-client-urls",
                                client_url(m.address),
                                "--advertise-client-urls",
                                client_url(m.address),
                                "--listen-peer-urls",
                                peer_url(m.address),
                                "--initial-advertise-peer-urls",
                                peer_url(m.address),
                                "--initial-cluster",
                                util::join(cluster, ","),
                                "--initial-cluster-state",
                                "new",
                                "--initial-cluster-token",
                                m_token,
                                "--heartbeat-interval",
                                "50",
                                "--election-timeout",
                                "500",
                                "--enable-v2=false"};
  if (m_tls) {
    std::string d = m_tmp.path().string();
    args.insert(args.end(), {"--cert-file", d + "/server.pem", "--key-file", d + "/server.key",
                             "--trusted-ca-file", d + "/ca.pem", "--client-cert-auth"});
  }
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error("EtcdCluster: fork failed");
  }
  if (pid == 0) {
    // Dies with the test binary even if it crashes before the destructor runs.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);
    }
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  m.pid = pid;
}

void EtcdCluster::kill(int i) {
  Member& m = m_members[static_cast<size_t>(i)];
  if (m.pid <= 0) {
    return;
  }
  ::kill(m.pid, SIGKILL);
  int status = 0;
  ::waitpid(m.pid, &status, 0);
  m.pid = -1;
}

void EtcdCluster::restart(int i) {
  if (m_members[static_cast<size_t>(i)].pid > 0) {
    return;
  }
  spawn(static_cast<size_t>(i));
}

void EtcdCluster::restart_empty(bool new_identity) {
  for (size_t i = 0; i < m_members.size(); ++i) {
    kill(static_cast<int>(i));
    std::error_code ec;
    std::filesystem::remove_all(m_tmp.path() / m_members[i].name, ec);
  }
  if (new_identity) {
    m_token += "-again";
  }
  for (size_t i = 0; i < m_members.size(); ++i) {
    spawn(i);
  }
  wait_ready();
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const auto& m : m_members) {
    out.push_back(client_url(m.address));
  }
  return out;
}

std::string EtcdCluster::url(const std::string& prefix) const {
  std::vector<std::string> hosts;
  for (const auto& m : m_members) {
    hosts.push_back(m.address + ":" + std::to_string(k_client_port));
  }
  return std::string(m_tls ? "etcd+https://" : "etcd://") + util::join(hosts, ",") + prefix;
}

int EtcdCluster::leader() const {
  for (size_t i = 0; i < m_members.size(); ++i) {
    if (m_members[i].pid <= 0) {
      continue;
    }
    state::etcd::ClientOptions o = client_options();
    o.endpoints = {client_url(m_members[i].address)};
    o.request_timeout = std::chrono::seconds(2);
    state::etcd::Client c(o);
    auto status =
        c.post("/v3/maintenance/status", nlohmann::json::object(), state::etcd::Retry::anywhere);
    if (!status) {
      continue;
    }
    int64_t leader = state::etcd::int64_field(*status, "leader");
    int64_t self = state::etcd::int64_field((*status)["header"], "member_id");
    if (leader != 0 && leader == self) {
      return static_cast<int>(i);
    }
  }
  throw std::runtime_error("EtcdCluster: no running member leads");
}

std::string EtcdCluster::log_tail(size_t i) const {
  std::ifstream in(m_tmp.path() / (m_members[i].name + ".log"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  return text.size() > 1500 ? text.substr(text.size() - 1500) : text;
}

void EtcdCluster::wait_ready(std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error = "no member answered";
  for (;;) {
    bool all = true;
    bool led = false;
    for (size_t i = 0; i < m_members.size(); ++i) {
      if (m_members[i].pid <= 0) {
        continue;
      }
      int status = 0;
      if (::waitpid(m_members[i].pid, &status, WNOHANG) == m_members[i].pid) {
        throw std::runtime_error("etcd member " + m_members[i].name + " exited: " + log_tail(i));
      }
      state::etcd::ClientOptions o = client_options();
      o.endpoints = {client_url(m_members[i].address)};
      o.connect_timeout = std::chrono::milliseconds(300);
      o.request_timeout = std::chrono::seconds(1);
      state::etcd::Client c(o);
      auto status_reply =
          c.post("/v3/maintenance/status", nlohmann::json::object(), state::etcd::Retry::anywhere);
      if (!status_reply) {
        last_error = status_reply.error().message;
        all = false;
        continue;
      }
      led = led || state::etcd::int64_field(*status_reply, "leader") != 0;
    }
    if (all && led) {
      return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("etcd cluster not ready in time (" + last_error +
                               "); log of m1: " + log_tail(0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void EtcdCluster::enable_auth(const std::string& prefix,
                              const std::map<std::string, std::string>& users) {
  state::etcd::Client admin(client_options());
  auto call = [&](const std::string& path, const nlohmann::json& body) {
    auto r = admin.post(path, body, state::etcd::Retry::anywhere);
    REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  };
  using state::etcd::base64_encode;
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1); // the range of every key under the prefix
  call("/v3/auth/role/add", {{"name", "root"}});
  call("/v3/auth/user/add", {{"name", "root"}, {"password", "rootpw"}});
  call("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}});
  call("/v3/auth/role/add", {{"name", "tpuctl-rw"}});
  call("/v3/auth/role/grant", {{"name", "tpuctl-rw"},
                               {"perm",
                                {{"permType", "READWRITE"},
                                 {"key", base64_encode(prefix)},
                                 {"range_end", base64_encode(end)}}}});
  for (const auto& [user, password] : users) {
    call("/v3/auth/user/add", {{"name", user}, {"password", password}});
    call("/v3/auth/user/grant", {{"user", user}, {"role", "tpuctl-rw"}});
  }
  call("/v3/auth/enable", nlohmann::json::object());
}

std::map<std::string, std::string> etcd_user(const std::string& name) {
  return {{"TPUCTL_ETCD_USER", name}, {"TPUCTL_ETCD_PASSWORD", name + "-pw"}};
}

} // namespace tpuctl::test
