// A small client for etcd v3's HTTP/JSON gateway over libcurl: POST a JSON body to a /v3/ path
// on one of several endpoints, with failover, token authentication and TLS.
//
// Failover. Endpoints are tried in turn, starting with the last one that answered. A request
// that never left this machine (connection refused, no route, DNS, TLS handshake, connect
// timeout) is always retried on the next endpoint. What happens to a request that was sent but
// got no definite answer (a timeout, a dropped connection, a 5xx such as "context deadline
// exceeded" when the cluster has lost quorum) depends on the caller's Retry:
//   * Retry::anywhere (reads and idempotent writes): try the next endpoint, and keep cycling for
//     up to the request timeout while members answer with transient errors (an election);
//   * Retry::unsent_only (a txn that must apply at most once): stop and return reason
//     k_outcome_unknown; the caller resolves it by re-reading (state/etcd_store.hpp).
// When every endpoint failed the Error has reason state::reason::k_unavailable and names each
// endpoint with its failure.
//
// Authentication. With a user name, the client logs in at /v3/auth/authenticate and sends the
// token as "Authorization: <token>" (etcd 3.4 refuses a "Bearer " prefix); a 401 (expired token)
// logs in again once. Neither the password nor the token is ever logged.
//
// One Client is used from one thread (it keeps one libcurl handle for connection reuse).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::state::etcd {

using Json = nlohmann::json;

// Error::reason values only the etcd backend sees (it turns them into state::reason ones).
inline constexpr std::string_view k_outcome_unknown = "etcd_outcome_unknown";
inline constexpr std::string_view k_lease_not_found = "etcd_lease_not_found";
inline constexpr std::string_view k_compacted = "etcd_compacted";

struct ClientOptions {
  std::vector<std::string> endpoints; // "http://host:port" or "https://host:port"
  std::string user;                   // empty: no authentication
  std::string password;
  std::string cacert; // PEM file of the CA that signed the servers' certificates (https)
  std::string cert;   // client certificate (mutual TLS); needs `key`
  std::string key;
  std::chrono::milliseconds connect_timeout{2000};
  // Above etcd's own server-side write timeout (5 s + 2 election timeouts), so that a store
  // without quorum answers "context deadline exceeded" before the client gives up.
  std::chrono::milliseconds request_timeout{10000};
};

enum class Retry { anywhere, unsent_only };

// How a watch stream ended.
struct WatchEnd {
  bool stopped = false;   // on_result returned true
  bool timed_out = false; // the timeout passed first
};

class Client {
public:
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // POSTs `body` to `path` ("/v3/kv/range") and returns the reply's JSON.
  // Errors: k_unavailable (no endpoint gave an answer; every one is named), k_outcome_unknown
  // (Retry::unsent_only: sent, no definite answer), ErrorKind::auth for a failed login, an
  // expired token or a permission denied, k_lease_not_found, k_compacted, and otherwise a
  // failure quoting etcd's message (reason state::reason::k_invalid).
  Expected<Json> post(std::string_view path, const Json& body, Retry retry);

  // Opens a watch (`create_request` is the WatchCreateRequest) and calls on_result with every
  // "result" object the stream delivers until it returns true or `timeout` passes. Connection
  // failures move to the next endpoint. Errors: k_unavailable, ErrorKind::auth.
  Expected<WatchEnd> watch(const Json& create_request, std::chrono::milliseconds timeout,
                           const std::function<bool(const Json& result)>& on_result);

  const std::vector<std::string>& endpoints() const { return m_options.endpoints; }
  // The id of the cluster that answered first ("" before any answer), and the highest revision
  // an answer carried. Every later answer must come from the same cluster, and a post()'s at no
  // lower revision: otherwise the cluster was reset or replaced under this process, an error
  // with reason state::reason::k_store_replaced.
  const std::string& cluster_id() const { return m_cluster_id; }
  int64_t max_revision() const { return m_max_revision; }

private:
  struct Attempt;
  Attempt perform(void* handle, const std::string& endpoint, std::string_view path,
                  const std::string& body, std::chrono::milliseconds timeout, bool with_token,
                  const std::function<bool(std::string_view)>* stream);
  Status authenticate();
  // `ordered`: the reply of a linearizable request (post), whose revision may not go back.
  Status check_cluster(const std::string& endpoint, const Json& reply, bool ordered);
  void configure(void* handle) const;

  ClientOptions m_options;
  void* m_curl = nullptr; // CURL*
  size_t m_current = 0;   // the endpoint that answered last
  std::string m_token;
  std::string m_cluster_id;
  int64_t m_max_revision = 0;
};

} // namespace tpuctl::state::etcd
