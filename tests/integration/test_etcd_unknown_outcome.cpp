// A commit whose reply never comes is settled by asking the store, never guessed. The first
// endpoint of the store is a small HTTP proxy in front of a real etcd that, once, swallows a
// write transaction: either it forwards the txn and drops etcd's reply (the commit applied, the
// client cannot know), or it drops the request (nothing applied). Either way the commit must
// end applied exactly once: one claim, one event, no duplicate.
#include <arpa/inet.h>
#include <atomic>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <doctest/doctest.h>

#include "state/location.hpp"
#include "tests/support/etcd_fixture.hpp"

using namespace tpuctl;
using namespace tpuctl::state;
using tpuctl::test::EtcdCluster;
using tpuctl::test::unique_prefix;

namespace {

EtcdCluster& cluster() {
  static EtcdCluster c(1);
  return c;
}

// What the proxy does to the next write transaction: nothing; forward it and lose the reply;
// lose the request; or lose the reply of the next one and every later request (a member that
// applied a commit and then became unreachable).
enum class Sabotage { none, drop_reply, drop_request, drop_reply_then_all, drop_all };

// One-connection-at-a-time HTTP/1.1 proxy to `upstream` (answers with Connection: close).
class Proxy {
public:
  explicit Proxy(std::string upstream) : m_upstream(std::move(upstream)) {
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(m_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.130.254.1", &sa.sin_addr);
    sa.sin_port = 0; // any free port
    REQUIRE(::bind(m_fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    socklen_t len = sizeof sa;
    ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&sa), &len);
    m_port = ntohs(sa.sin_port);
    REQUIRE(::listen(m_fd, 16) == 0);
    m_thread = std::thread([this] { serve(); });
  }
  ~Proxy() {
    m_stop = true;
    ::shutdown(m_fd, SHUT_RDWR);
    ::close(m_fd);
    m_thread.join();
  }
  std::string authority() const { return "127.130.254.1:" + std::to_string(m_port); }
  void arm(Sabotage s) { m_sabotage = s; }
  int sabotaged() const { return m_done; }

private:
  void serve() {
    state::etcd::ClientOptions o;
    o.endpoints = {m_upstream};
    state::etcd::Client upstream(o);
    while (!m_stop) {
      int c = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        return;
      }
      std::string req;
      char buf[65536];
      size_t header_end = std::string::npos, length = 0;
      while (true) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) {
          break;
        }
        req.append(buf, static_cast<size_t>(n));
        if (header_end == std::string::npos &&
            (header_end = req.find("\r\n\r\n")) != std::string::npos) {
          auto cl = req.find("Content-Length: ");
          length = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
        }
        if (header_end != std::string::npos && req.size() >= header_end + 4 + length) {
          break;
        }
      }
      if (header_end == std::string::npos) {
        ::close(c);
        continue;
      }
      std::string path = req.substr(req.find(' ') + 1);
      path = path.substr(0, path.find(' '));
      std::string body = req.substr(header_end + 4, length);
      bool write_txn = path == "/v3/kv/txn" && body.find("request_put") != std::string::npos;
      Sabotage s = write_txn ? m_sabotage.load() : Sabotage::none;
      if (s == Sabotage::drop_reply || s == Sabotage::drop_request) {
        m_sabotage = Sabotage::none; // once
      } else if (s == Sabotage::drop_reply_then_all) {
        m_sabotage = Sabotage::drop_all;
        s = Sabotage::drop_reply;
      } else if (s == Sabotage::drop_all) {
        s = Sabotage::drop_request;
      }
      if (s == Sabotage::drop_request) {
        ++m_done;
        ::close(c); // as if the member died before reading it
        continue;
      }
      auto reply = upstream.post(path, nlohmann::json::parse(body, nullptr, false),
                                 state::etcd::Retry::unsent_only);
      if (s == Sabotage::drop_reply) {
        ++m_done;
        ::close(c); // applied upstream, but the answer is lost
        continue;
      }
      std::string out = reply ? reply->dump() : R"({"error":"upstream","code":14})";
      std::string head = std::string(reply ? "HTTP/1.1 200 OK" : "HTTP/1.1 503 Unavailable") +
                         "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                         "Content-Length: " +
                         std::to_string(out.size()) + "\r\n\r\n";
      std::string all = head + out;
      (void)::send(c, all.data(), all.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  std::string m_upstream;
  int m_fd = -1;
  uint16_t m_port = 0;
  std::atomic<bool> m_stop{false};
  std::atomic<Sabotage> m_sabotage{Sabotage::none};
  std::atomic<int> m_done{0};
  std::thread m_thread;
};

} // namespace

TEST_SUITE_BEGIN("integration");

TEST_CASE("EtcdStore: a commit whose reply is lost is resolved through its marker and applies "
          "exactly once") {
  std::string real = cluster().endpoints()[0];
  Proxy proxy(real);
  std::string prefix = unique_prefix();
  std::string url = "etcd://" + proxy.authority() + "," + real.substr(7) + prefix;
  OpenOptions o;
  o.create = Creation::at_open;
  o.etcd.request_timeout = std::chrono::seconds(3);
  auto opened = open_store(url, o);
  REQUIRE_MESSAGE(opened, (opened ? "" : opened.error().message));
  StateStore& s = **opened;
  REQUIRE(s.create(pool_key("p"), Json::object()));
  REQUIRE(s.create(host_key("p", "h1"), Json::object()));

  auto claim_with_event = [&](const std::string& owner) {
    return s.commit({ClaimOp{"p", {"h1"}, owner, std::chrono::seconds(0)},
                     EventOp{Event{0, 0, "p", Kind::host, "h1", "CLAIMED", "", "", Initiator::user,
                                   Json::object(), ""}}});
  };
  SUBCASE("the txn applied but its reply was lost: the marker says applied") {
    proxy.arm(Sabotage::drop_reply);
  }
  SUBCASE("the txn never reached etcd: the fence says not applied, and it is sent again") {
    proxy.arm(Sabotage::drop_request);
  }
  // Whichever endpoint the store tries first, the proxy sees the commit (it is listed first and
  // has answered every read so far).
  auto r = claim_with_event("qr-a");
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  CHECK(proxy.sabotaged() == 1);
  auto claims = s.claims("p");
  REQUIRE(claims->size() == 1);
  CHECK(claims->at(0).owner == "qr-a");
  CHECK(claims->at(0).revision == r->revision);
  CHECK(s.events({})->size() == 1); // applied once, not twice
  // The next commit goes through as usual.
  auto busy = claim_with_event("qr-b");
  REQUIRE(!busy);
  CHECK(busy.error().reason == reason::k_hosts_busy);
}

TEST_CASE("EtcdStore: a lost reply with no member left to ask is an error saying the outcome is "
          "unknown") {
  std::string real = cluster().endpoints()[0];
  Proxy proxy(real);
  // The proxy is the only endpoint; after the lost reply it loses the fences too.
  std::string url = "etcd://" + proxy.authority() + unique_prefix();
  OpenOptions o;
  o.create = Creation::at_open;
  o.etcd.request_timeout = std::chrono::milliseconds(1500);
  auto opened = open_store(url, o);
  REQUIRE(opened);
  StateStore& s = **opened;
  REQUIRE(s.create(pool_key("p"), Json::object()));
  REQUIRE(s.create(host_key("p", "h1"), Json::object()));
  proxy.arm(Sabotage::drop_reply_then_all);
  auto r = s.claim_hosts("p", {"h1"}, "qr-a");
  CHECK(proxy.sabotaged() >= 2); // the commit and at least one attempt to ask again
  REQUIRE(!r);
  CHECK(r.error().reason == reason::k_unavailable);
  CHECK(r.error().message.find("outcome is unknown") != std::string::npos);
  // It did apply (the proxy forwarded it); a later read shows it.
  proxy.arm(Sabotage::none);
  auto claims = s.claims("p");
  REQUIRE(claims);
  REQUIRE(claims->size() == 1);
  CHECK(claims->at(0).owner == "qr-a");
}
