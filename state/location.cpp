#include "state/location.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <pwd.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "state/deferred_store.hpp"
#include "state/etcd_seen.hpp"
#include "state/etcd_store.hpp"
#include "state/sqlite_store.hpp"
#include "util/hostlist.hpp"
#include "util/private_files.hpp"
#include "util/strings.hpp"

namespace tpuctl::state {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_forms =
    "use sqlite:PATH, a file path, or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]";
constexpr const char* k_default_etcd_prefix = "/tpuctl/v1/";

Error bad_url(std::string_view url, const std::string& why) {
  return usage_error("state store url '" + std::string(url) + "' " + why + ": " + k_forms);
}

bool is_scheme_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
}

// The scheme of `url` ("sqlite", "etcd+https") or "" when it reads as a bare path.
std::string scheme_of(std::string_view url) {
  auto colon = url.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      !std::isalpha(static_cast<unsigned char>(url[0]))) {
    return "";
  }
  for (size_t i = 0; i < colon; ++i) {
    if (!is_scheme_char(url[i])) {
      return ""; // e.g. "./a:b" or "dir/x:y": a path
    }
  }
  return util::to_lower(url.substr(0, colon));
}

Expected<std::string> absolute_path(std::string_view url, std::string_view text,
                                    const PathEnvironment& env) {
  std::string p(text);
  if (p.empty()) {
    return bad_url(url, "has no path");
  }
  if (p.back() == '/') {
    return bad_url(url, "names a directory, not a database file (e.g. " + p + "state.db)");
  }
  if (p == "~" || util::starts_with(p, "~/")) {
    if (env.home.empty()) {
      return bad_url(url, "starts with '~' but HOME is not set");
    }
    p = env.home + p.substr(1);
  }
  fs::path path(p);
  if (path.is_relative()) {
    if (env.cwd.empty()) {
      return bad_url(url, "is relative and the working directory is unknown");
    }
    path = fs::path(env.cwd) / path;
  }
  // "x/..", "x/." and the like name a directory once normalized, however they are written.
  path = path.lexically_normal();
  if (!path.has_filename() || path.filename() == "." || path.filename() == "..") {
    return bad_url(url, "names a directory, not a database file (e.g. " +
                            (path / "state.db").lexically_normal().string() + ")");
  }
  return path.string();
}

Expected<StateLocation> parse_etcd(std::string_view url, std::string_view scheme,
                                   std::string_view rest) {
  StateLocation loc;
  loc.backend = Backend::etcd;
  if (!util::starts_with(rest, "//")) {
    return bad_url(url, "must be written " + std::string(scheme) + "://HOST:PORT");
  }
  rest.remove_prefix(2);
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  loc.prefix = slash == std::string_view::npos ? k_default_etcd_prefix : rest.substr(slash);
  if (loc.prefix.back() != '/') {
    loc.prefix += '/';
  }
  std::string http = scheme == "etcd+https" ? "https://" : "http://";
  if (authority.empty()) {
    return bad_url(url, "names no etcd endpoint");
  }
  for (const auto& hp : util::split(authority, ',')) {
    std::string host = hp, port = "2379";
    auto colon = hp.rfind(':');
    bool bracketed = !hp.empty() && hp.front() == '[';
    if (colon != std::string::npos && (!bracketed || colon > hp.find(']'))) {
      host = hp.substr(0, colon);
      port = hp.substr(colon + 1);
    }
    if (host.empty() || host == "[]") {
      return bad_url(url, "has an empty etcd host in '" + hp + "'");
    }
    // A host name, an IPv4 address or a bracketed IPv6 address; anything else ("[::1",
    // "a]b") would not survive being written back into a URL.
    const bool ipv6 = host.size() > 2 && host.front() == '[' && host.back() == ']' &&
                      host.find(':') != std::string::npos;
    const std::string bare = ipv6 ? host.substr(1, host.size() - 2) : host;
    if ((!ipv6 && bare.find_first_of("[]:") != std::string::npos) ||
        (ipv6 && bare.find_first_of("[]") != std::string::npos) || !util::validate_hostname(bare)) {
      return bad_url(url, "has an invalid etcd host '" + host +
                              "' (a host name, an IPv4 address or an IPv6 address in brackets "
                              "such as [::1])");
    }
    auto p = util::parse_int(port, "etcd port", 1, 65535);
    if (!p) {
      return bad_url(url, "has an invalid port '" + port + "' (a number from 1 to 65535)");
    }
    loc.endpoints.push_back(http + host + ":" + std::to_string(*p));
  }
  return loc;
}

Expected<std::unique_ptr<StateStore>> open_etcd(const StateLocation& loc,
                                                const OpenOptions& options) {
  const EtcdAccess& a = options.etcd;
  bool tls = util::starts_with(loc.endpoints.front(), "https://");
  if (!tls && (!a.cacert.empty() || !a.cert.empty() || !a.key.empty())) {
    return usage_error("--etcd-cacert, --etcd-cert and --etcd-key need a TLS store: write the "
                       "state URL as etcd+https://" +
                       loc.url().substr(std::string("etcd://").size()));
  }
  if (a.cert.empty() != a.key.empty()) {
    return usage_error("--etcd-cert and --etcd-key go together: give both (a client certificate "
                       "and its private key) or neither");
  }
  if (!a.password.empty() && a.user.empty()) {
    return usage_error("an etcd password was given without --etcd-user: give the user name too");
  }
  EtcdOptions o;
  o.client.endpoints = loc.endpoints;
  o.client.user = a.user;
  o.client.password = a.password;
  o.client.cacert = a.cacert;
  o.client.cert = a.cert;
  o.client.key = a.key;
  o.client.connect_timeout = a.connect_timeout;
  o.client.request_timeout = a.request_timeout;
  o.prefix = loc.prefix;
  o.location = loc.url();
  o.clock = options.clock;
  o.max_txn_ops = a.max_txn_ops;
  o.max_request_bytes = a.max_request_bytes;
  o.create = options.create != Creation::never;
  // Which cluster this machine last used this store in (no memory without a state directory).
  std::string memory;
  if (auto path = default_state_path(options.env)) {
    memory = (fs::path(*path).parent_path() / "etcd-clusters.json").string();
    SeenCluster seen = remembered_cluster(memory, loc.url());
    o.last_seen_cluster_id = seen.cluster_id;
    o.last_seen_revision = seen.revision;
  }
  TPUCTL_TRY_ASSIGN(auto store, EtcdStore::open(std::move(o)));
  if (!memory.empty()) {
    remember_cluster(memory, loc.url(), SeenCluster{store->cluster_id(), store->seen_revision()});
  }
  return std::unique_ptr<StateStore>(std::move(store));
}

} // namespace

std::string StateLocation::url() const {
  if (backend == Backend::sqlite) {
    return "sqlite:" + path;
  }
  bool tls = !endpoints.empty() && util::starts_with(endpoints.front(), "https://");
  std::vector<std::string> hosts;
  for (const auto& e : endpoints) {
    hosts.push_back(e.substr(e.find("://") + 3));
  }
  return std::string(tls ? "etcd+https://" : "etcd://") + util::join(hosts, ",") + prefix;
}

PathEnvironment PathEnvironment::from_process() {
  PathEnvironment env;
  if (const char* x = std::getenv("XDG_STATE_HOME")) {
    env.xdg_state_home = x;
  }
  if (const char* h = std::getenv("HOME"); h && *h) {
    env.home = h;
  } else {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found &&
        found->pw_dir) {
      env.home = found->pw_dir;
    }
  }
  std::error_code ec;
  auto cwd = fs::current_path(ec);
  if (!ec) {
    env.cwd = cwd.string();
  }
  return env;
}

Expected<std::string> default_state_path(const PathEnvironment& env) {
  if (!env.xdg_state_home.empty() && fs::path(env.xdg_state_home).is_absolute()) {
    return (fs::path(env.xdg_state_home) / "tpuctl" / "state.db").lexically_normal().string();
  }
  if (!env.home.empty()) {
    return (fs::path(env.home) / ".local" / "state" / "tpuctl" / "state.db")
        .lexically_normal()
        .string();
  }
  return Error(ErrorKind::failure,
               "cannot choose a place for the state store: neither XDG_STATE_HOME nor HOME is "
               "set; choose one with --state sqlite:PATH or TPUCTL_STATE=sqlite:PATH",
               std::string(reason::k_unavailable));
}

Expected<StateLocation> parse_state_url(std::string_view url, const PathEnvironment& env) {
  StateLocation loc;
  if (url.empty()) {
    TPUCTL_TRY_ASSIGN(loc.path, default_state_path(env));
    loc.is_default = true;
    return loc;
  }
  if (util::trim(url).empty()) {
    return bad_url(url, "is blank (leave --state and TPUCTL_STATE unset for the default store)");
  }
  if (util::trim(url) != url) {
    return bad_url(url, "starts or ends with blanks");
  }
  std::string scheme = scheme_of(url);
  if (scheme.empty()) {
    // A value with no scheme is a path only when it looks like one: "sqlite", "etcd" or a typo
    // of them would otherwise become a file of that name in the working directory.
    if (url.find_first_of("/.") == std::string_view::npos) {
      return bad_url(url, "has no scheme and does not look like a file path (write sqlite:" +
                              std::string(url) + ".db or ./" + std::string(url) + ")");
    }
    TPUCTL_TRY_ASSIGN(loc.path, absolute_path(url, url, env));
    return loc;
  }
  std::string_view rest = url.substr(scheme.size() + 1);
  if (scheme == "sqlite") {
    if (util::starts_with(rest, "//")) { // sqlite:///abs/path (URL form with an empty host)
      rest.remove_prefix(2);
      if (!util::starts_with(rest, "/")) {
        return bad_url(url, "names a host, but an sqlite store is a local file (sqlite:/abs/path)");
      }
    }
    TPUCTL_TRY_ASSIGN(loc.path, absolute_path(url, rest, env));
    return loc;
  }
  if (scheme == "etcd" || scheme == "etcd+http" || scheme == "etcd+https") {
    return parse_etcd(url, scheme, rest);
  }
  return bad_url(url, "has an unknown scheme '" + scheme + "'");
}

std::optional<std::string_view> network_filesystem_name(int64_t f_type) {
  struct Magic {
    uint32_t magic;
    std::string_view name;
  };
  static constexpr Magic k_network[] = {
      {0x6969, "nfs"},        {0x517B, "smb"},      {0xFF534D42, "cifs"}, {0xFE534D42, "smb2"},
      {0x65735546, "fuse"},   {0x5346414F, "afs"},  {0x6B414653, "afs"},  {0x00C36400, "ceph"},
      {0x0BD00BD0, "lustre"}, {0x73757245, "coda"}, {0x564C, "ncp"},
  };
  auto t = static_cast<uint32_t>(f_type); // f_type is signed on some ABIs
  for (const auto& m : k_network) {
    if (m.magic == t) {
      return m.name;
    }
  }
  return std::nullopt;
}

Status check_local_filesystem(const std::string& dir) {
  // A directory not created yet will live on the filesystem of its nearest existing ancestor.
  fs::path probe = fs::path(dir).lexically_normal();
  std::error_code ec;
  while (probe.has_parent_path() && probe != probe.root_path() && !fs::exists(probe, ec)) {
    probe = probe.parent_path();
  }
  struct statfs sfs {};
  if (::statfs(probe.c_str(), &sfs) != 0) {
    return Error(ErrorKind::failure,
                 "cannot inspect state directory '" + dir + "': " + std::strerror(errno),
                 std::string(reason::k_unavailable));
  }
  auto name = network_filesystem_name(static_cast<int64_t>(sfs.f_type));
  if (!name) {
    return ok();
  }
  return Error(ErrorKind::failure,
               "state directory '" + dir + "' is on a network filesystem (" + std::string(*name) +
                   "): SQLite's write-ahead log and file locks only work on a local disk, so "
                   "tpuctl processes could corrupt the state there; choose a path on a local "
                   "disk with --state sqlite:/LOCAL/PATH/state.db or TPUCTL_STATE=sqlite:PATH",
               std::string(reason::k_network_filesystem));
}

Status make_private_directories(const std::string& dir) {
  auto made = util::make_private_directories(dir);
  if (!made) {
    return Error(ErrorKind::failure,
                 made.error().message + " (the state directory; choose another path with --state)",
                 std::string(reason::k_unavailable));
  }
  return ok();
}

namespace {

// Opens the store at `loc`; creates it unless Creation::never (then a missing one is
// k_no_store).
Expected<std::unique_ptr<StateStore>> open_location(const StateLocation& loc,
                                                    const OpenOptions& options) {
  if (loc.backend == Backend::etcd) {
    return open_etcd(loc, options);
  }
  std::string dir = fs::path(loc.path).parent_path().string();
  std::error_code ec;
  const bool create = options.create != Creation::never;
  if (!create && !fs::exists(loc.path, ec)) {
    return missing_store(loc.url(), "");
  }
  // Check the filesystem before creating anything on it.
  TPUCTL_TRY(check_local_filesystem(dir));
  if (create) {
    TPUCTL_TRY(make_private_directories(dir));
  }
  SqliteOptions sqlite_options;
  sqlite_options.path = loc.path;
  sqlite_options.clock = options.clock;
  sqlite_options.busy_timeout = options.busy_timeout;
  sqlite_options.create = create;
  TPUCTL_TRY_ASSIGN(auto store, SqliteStore::open(sqlite_options));
  return std::unique_ptr<StateStore>(std::move(store));
}

// The outermost directory of `path` that does not exist yet ("" when its directory exists).
std::string first_missing_directory(const std::string& path) {
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  std::string missing;
  while (!dir.empty() && dir != dir.root_path() && !fs::exists(dir, ec)) {
    missing = dir.string();
    dir = dir.parent_path();
  }
  return missing;
}

// Undoes the creation of the SQLite store at `loc` by a creating command whose first write
// failed (a full disk): its file, unless it holds a pool after all (another process wrote
// there meanwhile) or is busy, and the directories made for it (from `made_from` down, each
// only when empty).
void discard_sqlite_store(const StateLocation& loc, const std::string& made_from) {
  std::error_code ec;
  if (fs::exists(loc.path, ec)) {
    OpenOptions existing;
    existing.create = Creation::never;
    if (auto store = open_location(loc, existing)) {
      auto pools = (*store)->list(Kind::pool, "");
      if (!pools || !pools->records.empty()) {
        return;
      }
    } else if (has_reason(store.error(), reason::k_busy)) {
      return;
    }
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      fs::remove(loc.path + suffix, ec);
    }
  }
  if (made_from.empty()) {
    return;
  }
  for (fs::path dir = fs::path(loc.path).parent_path();
       dir.string().size() >= made_from.size() && fs::remove(dir, ec); dir = dir.parent_path()) {
  }
}

} // namespace

namespace {

Expected<std::unique_ptr<StateStore>> open_store_at(const StateLocation& loc,
                                                    const OpenOptions& options) {
  if (options.create == Creation::at_open) {
    return open_location(loc, options);
  }
  OpenOptions existing = options;
  existing.create = Creation::never;
  auto store = open_location(loc, existing);
  if (store || options.create == Creation::never ||
      !(has_reason(store.error(), reason::k_no_store) ||
        (loc.backend == Backend::etcd && has_reason(store.error(), reason::k_store_replaced)))) {
    return store;
  }
  // A command that may create the store: it is created by its first write, not before.
  StoreInfo info;
  info.backend = loc.backend == Backend::sqlite ? "sqlite" : "etcd";
  info.location = loc.url();
  info.supported_schema = loc.backend == Backend::sqlite ? k_schema_version : k_etcd_schema_version;
  DeferredStore::Discarder discard;
  if (loc.backend == Backend::sqlite) {
    discard = [loc, made_from = first_missing_directory(loc.path)]() {
      discard_sqlite_store(loc, made_from);
    };
  }
  return std::unique_ptr<StateStore>(std::make_unique<DeferredStore>(
      std::move(info), [loc, options]() { return open_location(loc, options); },
      std::move(discard)));
}

// Who the store's changes are made by: the etcd user when etcd authenticates this process (its
// password or client certificate is checked by etcd), else this machine's user and host.
void set_store_actor(StateStore& store, const StateLocation& loc, const OpenOptions& options) {
  if (loc.backend == Backend::etcd && !options.etcd.user.empty()) {
    store.set_actor(options.etcd.user, true);
  } else {
    store.set_actor(local_actor(), false);
  }
}

} // namespace

Expected<std::unique_ptr<StateStore>> open_store(std::string_view url, const OpenOptions& options) {
  TPUCTL_TRY_ASSIGN(auto loc, parse_state_url(url, options.env));
  TPUCTL_TRY_ASSIGN(auto store, open_store_at(loc, options));
  set_store_actor(*store, loc, options);
  return store;
}

} // namespace tpuctl::state
