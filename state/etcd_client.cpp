#include "state/etcd_client.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "state/curl_api.hpp"
#include "state/etcd_wire.hpp"
#include "state/store.hpp"
#include "util/strings.hpp"

namespace tpuctl::state::etcd {

namespace {

using Clock = std::chrono::steady_clock;

struct Sink {
  std::string body;
  const std::function<bool(std::string_view)>* stream = nullptr;
  bool aborted = false; // the stream consumer asked to stop
};

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  size_t n = size * count;
  if (!sink->stream) {
    sink->body.append(data, n);
    return n;
  }
  if (sink->body.size() < 4096) {
    sink->body.append(data, std::min<size_t>(n, 4096)); // for an error reply instead of a stream
  }
  if (!(*sink->stream)(std::string_view(data, n))) {
    sink->aborted = true;
    return 0; // makes libcurl stop with CURLE_WRITE_ERROR
  }
  return n;
}

// Failures where nothing reached the server.
bool never_sent(CURLcode rc) {
  switch (rc) {
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_CIPHER:
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_URL_MALFORMAT:
    return true;
  default:
    return false;
  }
}

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) {
    return std::to_string(ms.count() / 1000) + "s";
  }
  return std::to_string(ms.count()) + "ms";
}

} // namespace

struct Client::Attempt {
  enum class Outcome {
    ok,        // a 200 with a JSON body (or a stream the consumer stopped)
    unsent,    // certainly not processed: try another endpoint
    lost,      // sent, no definite answer (timeout, dropped connection, 5xx)
    rejected,  // a definite refusal (4xx with a gRPC status)
    timed_out, // a stream reached its timeout
  };
  Outcome outcome = Outcome::unsent;
  long http = 0;
  Json body;
  int grpc_code = 0;
  std::string server_message;
  std::string what; // for messages: "connection refused", "HTTP 503: etcdserver: ..."
};

Client::Client(ClientOptions options) : m_options(std::move(options)) {
  if (curl_api().ok()) {
    m_curl = curl_api().easy_init();
  }
}

Client::~Client() {
  if (m_curl) {
    curl_api().easy_cleanup(static_cast<CURL*>(m_curl));
  }
}

void Client::configure(void* handle) const {
  CURL* c = static_cast<CURL*>(handle);
  curl_api().easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_api().easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(m_options.connect_timeout.count()));
  curl_api().easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!m_options.cacert.empty()) {
    curl_api().easy_setopt(c, CURLOPT_CAINFO, m_options.cacert.c_str());
  }
  if (!m_options.cert.empty()) {
    curl_api().easy_setopt(c, CURLOPT_SSLCERT, m_options.cert.c_str());
  }
  if (!m_options.key.empty()) {
    curl_api().easy_setopt(c, CURLOPT_SSLKEY, m_options.key.c_str());
  }
}

Client::Attempt Client::perform(void* handle, const std::string& endpoint, std::string_view path,
                                const std::string& body, std::chrono::milliseconds timeout,
                                bool with_token,
                                const std::function<bool(std::string_view)>* stream) {
  CURL* c = static_cast<CURL*>(handle);
  curl_api().easy_reset(c);
  configure(c);
  std::string url = endpoint + std::string(path);
  Sink sink;
  sink.stream = stream;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = curl_api().slist_append(nullptr, "Content-Type: application/json");
  headers =
      curl_api().slist_append(headers, "Expect:"); // no 100-continue round trip for big bodies
  std::string auth;
  if (with_token && !m_token.empty()) {
    auth = "Authorization: " + m_token;
    headers = curl_api().slist_append(headers, auth.c_str());
  }
  curl_api().easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_api().easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_api().easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_api().easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_api().easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_api().easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_write);
  curl_api().easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_api().easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_api().easy_perform(c);
  curl_api().slist_free_all(headers);

  Attempt a;
  curl_api().easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.http);
  spdlog::debug("etcd: POST {}{} -> {} (curl {})", endpoint, path, a.http, static_cast<int>(rc));
  if (rc != CURLE_OK) {
    if (sink.aborted) {
      a.outcome = Attempt::Outcome::ok;
      return a;
    }
    long sent = 0;
    curl_api().easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent);
    a.what = errbuf[0] ? std::string(errbuf) : curl_api().easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT && sent > 0) {
      a.outcome = stream ? Attempt::Outcome::timed_out : Attempt::Outcome::lost;
      a.what = "no answer within " + seconds_text(timeout);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
      a.outcome = Attempt::Outcome::unsent;
      a.what = "no connection within " + seconds_text(m_options.connect_timeout);
    } else {
      a.outcome = never_sent(rc) || sent == 0 ? Attempt::Outcome::unsent : Attempt::Outcome::lost;
      if (rc == CURLE_COULDNT_CONNECT) {
        a.what = "connection refused";
      } else if (rc == CURLE_COULDNT_RESOLVE_HOST) {
        a.what = "cannot resolve the host name";
      } else if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
                 rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE) {
        a.what = "TLS: " + a.what + " (check --etcd-cacert, --etcd-cert and --etcd-key)";
      } else if (util::starts_with(endpoint, "https://") &&
                 (rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR) && a.http == 0) {
        a.what = "the server closed the TLS connection (" + a.what +
                 "): does it want a client certificate? check --etcd-cert and --etcd-key";
      }
    }
    return a;
  }
  if (stream && a.http == 200) {
    a.outcome = Attempt::Outcome::ok; // the server ended the stream
    return a;
  }
  a.body = Json::parse(sink.body, nullptr, false);
  if (a.http == 200 && a.body.is_object()) {
    a.outcome = Attempt::Outcome::ok;
    return a;
  }
  if (!a.body.is_object()) {
    // Not etcd's gateway (a 404 "page not found" from an old etcd, a proxy's HTML page): this
    // endpoint did nothing with the request.
    a.outcome = Attempt::Outcome::unsent;
    a.what = "HTTP " + std::to_string(a.http) + " '" +
             util::printable(util::trim(sink.body.substr(0, 80))) +
             "' (is this etcd 3.4 or newer with its HTTP gateway?)";
    return a;
  }
  a.grpc_code = static_cast<int>(a.body.value("code", 0));
  a.server_message = a.body.value("message", a.body.value("error", std::string()));
  a.what = "HTTP " + std::to_string(a.http) + ": " + a.server_message;
  a.outcome = a.http >= 500 ? Attempt::Outcome::lost : Attempt::Outcome::rejected;
  return a;
}

namespace {

Error rejection(const std::string& endpoint, std::string_view path, int http, int code,
                const std::string& message, bool have_user) {
  std::string at = "etcd at " + endpoint;
  if (http == 401 || code == 16 || message.find("user name is empty") != std::string::npos ||
      message.find("authentication failed") != std::string::npos) {
    std::string fix = have_user ? "check --etcd-user and the password (--etcd-password-file or "
                                  "TPUCTL_ETCD_PASSWORD)"
                                : "it requires authentication: give --etcd-user and a password "
                                  "(--etcd-password-file or TPUCTL_ETCD_PASSWORD)";
    return Error(ErrorKind::auth, at + " refused the credentials ('" + message + "'): " + fix,
                 std::string(reason::k_unavailable));
  }
  if (http == 403 || code == 7) {
    return Error(ErrorKind::auth,
                 at + " denied permission ('" + message +
                     "'): the etcd user needs a read-write role on tpuctl's key prefix",
                 std::string(reason::k_unavailable));
  }
  if (code == 5 && message.find("lease not found") != std::string::npos) {
    return Error(ErrorKind::failure, at + ": " + message, std::string(k_lease_not_found));
  }
  if (code == 11) {
    return Error(ErrorKind::failure, at + ": " + message, std::string(k_compacted));
  }
  if (message.find("database space exceeded") != std::string::npos) {
    // etcd's quota is its "disk is full": every write is refused until space is reclaimed.
    return Error(ErrorKind::failure,
                 at + " is full: its space quota is used up ('" + message +
                     "', alarm NOSPACE), so this change was not recorded: reclaim space (etcdctl "
                     "compact, etcdctl defrag, then etcdctl alarm disarm; or restart it with a "
                     "larger --quota-backend-bytes) and run the command again",
                 std::string(reason::k_disk_full));
  }
  return Error(ErrorKind::failure,
               at + " rejected " + std::string(path) + ": '" + message + "' (HTTP " +
                   std::to_string(http) + ")",
               std::string(reason::k_invalid));
}

// `answered`: some member was reached but could not serve (an election, or no quorum).
Error unreachable(const std::vector<std::string>& failures, bool answered) {
  if (answered) {
    return Error(ErrorKind::failure,
                 "the etcd state store has no quorum or no leader (most of its members are down "
                 "or cut off): " +
                     util::join(failures, "; ") + "; start the stopped members and retry",
                 std::string(reason::k_unavailable));
  }
  return Error(ErrorKind::failure,
               "cannot reach the etcd state store: " + util::join(failures, "; ") +
                   "; check that etcd runs there, or choose the store with --state",
               std::string(reason::k_unavailable));
}

} // namespace

Expected<Json> Client::post(std::string_view path, const Json& body, Retry retry) {
  if (!m_options.user.empty() && m_token.empty()) {
    TPUCTL_TRY(authenticate());
  }
  std::string text = body.dump();
  const size_t n = m_options.endpoints.size();
  const auto deadline = Clock::now() + m_options.request_timeout;
  bool logged_in_again = false;
  for (;;) {
    const auto pass_start = Clock::now();
    std::vector<std::string> failures;
    bool transient = false;
    for (size_t i = 0; i < n; ++i) {
      size_t idx = (m_current + i) % n;
      const std::string& ep = m_options.endpoints[idx];
      Attempt a = perform(m_curl, ep, path, text, m_options.request_timeout, true, nullptr);
      switch (a.outcome) {
      case Attempt::Outcome::ok:
        m_current = idx;
        TPUCTL_TRY(check_cluster(ep, a.body, true));
        return std::move(a.body);
      case Attempt::Outcome::unsent:
      case Attempt::Outcome::timed_out:
        failures.push_back(ep + " (" + a.what + ")");
        break;
      case Attempt::Outcome::lost:
        if (retry == Retry::unsent_only) {
          m_current = (idx + 1) % n; // resolve it through another member if there is one
          return Error(ErrorKind::failure,
                       "etcd at " + ep + " did not confirm " + std::string(path) + " (" + a.what +
                           ")",
                       std::string(k_outcome_unknown));
        }
        failures.push_back(ep + " (" + a.what + ")");
        transient = true;
        break;
      case Attempt::Outcome::rejected:
        if ((a.http == 401 || a.grpc_code == 16) && !m_options.user.empty() && !logged_in_again) {
          logged_in_again = true; // the token expired: log in again, then retry this endpoint
          m_token.clear();
          TPUCTL_TRY(authenticate());
          --i;
          break;
        }
        return rejection(ep, path, static_cast<int>(a.http), a.grpc_code, a.server_message,
                         !m_options.user.empty());
      }
    }
    // Another pass helps during an election (members answer "no leader" at once), not when a
    // pass is as slow as the time left (members time out waiting for a quorum).
    if (!transient || Clock::now() + (Clock::now() - pass_start) >= deadline) {
      return unreachable(failures, transient);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // an election, most likely
  }
}

Status Client::check_cluster(const std::string& endpoint, const Json& reply, bool ordered) {
  auto header = reply.find("header");
  if (header == reply.end() || !header->is_object()) {
    return ok();
  }
  auto field = header->find("cluster_id");
  std::string id;
  if (field != header->end()) {
    id = field->is_string() ? field->get<std::string>() : field->dump();
  }
  std::string why;
  if (!id.empty() && !m_cluster_id.empty() && id != m_cluster_id) {
    why = "now answers as cluster " + id + ", not the cluster " + m_cluster_id +
          " this tpuctl was using";
  }
  const int64_t revision = int64_field(*header, "revision");
  // Linearizable reads and writes never go back in one cluster's life; a watch stream may lag.
  if (why.empty() && ordered && revision > 0 && revision < m_max_revision) {
    why = "answers at revision " + std::to_string(revision) + ", below the " +
          std::to_string(m_max_revision) +
          " it answered before (an etcd cluster's revision "
          "never goes back)";
  }
  if (!why.empty()) {
    return Error(ErrorKind::failure,
                 "etcd at " + endpoint + " " + why +
                     ": the etcd cluster was reset or replaced while tpuctl was using it, and "
                     "its state may be gone; see 'tpuctl state info', and restore a backup "
                     "with 'tpuctl state restore FILE' if it is",
                 std::string(state::reason::k_store_replaced));
  }
  if (m_cluster_id.empty()) {
    m_cluster_id = id;
  }
  if (ordered) {
    m_max_revision = std::max(m_max_revision, revision);
  }
  return ok();
}

Status Client::authenticate() {
  std::string text = Json{{"name", m_options.user}, {"password", m_options.password}}.dump();
  std::vector<std::string> failures;
  for (size_t i = 0; i < m_options.endpoints.size(); ++i) {
    size_t idx = (m_current + i) % m_options.endpoints.size();
    const std::string& ep = m_options.endpoints[idx];
    Attempt a = perform(m_curl, ep, "/v3/auth/authenticate", text, m_options.request_timeout, false,
                        nullptr);
    if (a.outcome == Attempt::Outcome::ok) {
      m_token = a.body.value("token", std::string());
      m_current = idx;
      if (m_token.empty()) {
        return Error(ErrorKind::auth,
                     "etcd at " + ep + " gave no token for user '" + m_options.user +
                         "': is authentication enabled there?",
                     std::string(reason::k_unavailable));
      }
      return ok();
    }
    if (a.outcome == Attempt::Outcome::rejected) {
      return rejection(ep, "/v3/auth/authenticate", static_cast<int>(a.http), a.grpc_code,
                       a.server_message, true);
    }
    failures.push_back(ep + " (" + a.what + ")");
  }
  return unreachable(failures, false);
}

Expected<WatchEnd> Client::watch(const Json& create_request, std::chrono::milliseconds timeout,
                                 const std::function<bool(const Json& result)>& on_result) {
  if (!m_options.user.empty() && m_token.empty()) {
    TPUCTL_TRY(authenticate());
  }
  std::string text = Json{{"create_request", create_request}}.dump();
  const auto deadline = Clock::now() + timeout;
  CURL* handle = curl_api().easy_init();
  std::unique_ptr<CURL, void (*)(CURL*)> guard(handle, curl_api().easy_cleanup);
  const size_t n = m_options.endpoints.size();
  std::vector<std::string> failures;
  size_t tried = 0;
  size_t unsent_in_pass = 0;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return WatchEnd{false, true};
    }
    std::string buffer;
    bool stop = false;
    std::optional<Error> changed; // the stream came from another cluster
    size_t idx = (m_current + tried) % n;
    const std::string& ep = m_options.endpoints[idx];
    std::function<bool(std::string_view)> stream = [&](std::string_view chunk) {
      buffer.append(chunk);
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        Json line = Json::parse(buffer.substr(0, nl), nullptr, false);
        buffer.erase(0, nl + 1);
        if (!line.is_object() || !line.contains("result")) {
          continue;
        }
        if (auto same = check_cluster(ep, line["result"], false); !same) {
          changed = same.error();
          return false;
        }
        if (on_result(line["result"])) {
          stop = true;
          return false;
        }
      }
      return true;
    };
    Attempt a = perform(handle, ep, "/v3/watch", text, left, true, &stream);
    if (changed) {
      return *changed;
    }
    if (stop) {
      return WatchEnd{true, false};
    }
    if (a.outcome == Attempt::Outcome::timed_out) {
      return WatchEnd{false, true};
    }
    if (a.outcome == Attempt::Outcome::rejected) {
      return rejection(ep, "/v3/watch", static_cast<int>(a.http), a.grpc_code, a.server_message,
                       !m_options.user.empty());
    }
    // Refused, dropped or ended by the server: try the next member with the time left.
    failures.push_back(ep + " (" + (a.what.empty() ? "stream ended" : a.what) + ")");
    unsent_in_pass += a.outcome == Attempt::Outcome::unsent ? 1 : 0;
    ++tried;
    if (tried % n == 0) {
      if (unsent_in_pass == n) {
        return unreachable(
            std::vector<std::string>(failures.end() - static_cast<long>(n), failures.end()), false);
      }
      unsent_in_pass = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

} // namespace tpuctl::state::etcd
