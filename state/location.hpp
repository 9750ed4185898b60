// Choosing and opening the state store: the --state URL (or TPUCTL_STATE, which the CLI maps to
// the same flag), the default path, and the refusal of network filesystems for SQLite.
//
// Accepted forms:
//   (empty)                     the default: $XDG_STATE_HOME/tpuctl/state.db, else
//                               ~/.local/state/tpuctl/state.db
//   sqlite:PATH, sqlite:///ABS  an SQLite file; PATH may be relative (to the working directory)
//   PATH                        a bare path, the same as sqlite:PATH ("/x/state.db", "./s.db",
//                               "s.db"); a bare word without '/' or '.' ("sqlite", "etcd") and a
//                               blank value are usage errors, never file names
//   etcd://HOST:PORT[,HOST:PORT...][/PREFIX]   etcd v3 (http); etcd+https://... for TLS
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "state/store.hpp"

namespace tpuctl::state {

enum class Backend { sqlite, etcd };

struct StateLocation {
  Backend backend = Backend::sqlite;
  std::string path;                   // sqlite: absolute path of the database file
  std::vector<std::string> endpoints; // etcd: "http://host:port" or "https://host:port"
  std::string prefix;                 // etcd: key prefix ("/tpuctl/v1/" unless given)
  bool is_default = false;            // no URL was given
  std::string url() const;            // canonical: "sqlite:/abs/state.db", "etcd://h:p,h:p/pfx/"
};

// The parts of the process environment that decide paths (injected by tests).
struct PathEnvironment {
  std::string xdg_state_home; // $XDG_STATE_HOME ("" when unset)
  std::string home;           // $HOME, else the passwd entry's home directory
  std::string cwd;            // the working directory, for relative paths
  static PathEnvironment from_process();
};

// $XDG_STATE_HOME/tpuctl/state.db when XDG_STATE_HOME is an absolute path (the XDG spec ignores
// relative ones), else $HOME/.local/state/tpuctl/state.db.
// Errors: failure when neither gives a directory, saying how to choose a path.
Expected<std::string> default_state_path(const PathEnvironment& env);

// Parses a --state value. Errors: usage naming the URL and the accepted forms (unknown scheme,
// empty path, malformed etcd endpoint).
Expected<StateLocation> parse_state_url(std::string_view url, const PathEnvironment& env);

// "nfs", "cifs", "smb", "smb2", "fuse", "afs", "ceph", "lustre", "coda", "ncp" for the statfs()
// f_type of a filesystem on which SQLite's WAL and locks are unsafe; nullopt for local ones.
std::optional<std::string_view> network_filesystem_name(int64_t f_type);

// Fails (reason k_network_filesystem) when `dir` is on a network filesystem, saying why and how to
// choose another path; also fails when statfs() itself fails.
Status check_local_filesystem(const std::string& dir);

// Creates `dir` and its missing parents with mode 0700. Errors: failure naming the directory.
Status make_private_directories(const std::string& dir);

// How to reach and log in to an etcd store (ignored for SQLite).
struct EtcdAccess {
  std::string user;     // empty: no authentication
  std::string password; // never logged
  std::string cacert;   // CA bundle for etcd+https://
  std::string cert;     // client certificate (mutual TLS), with key
  std::string key;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds request_timeout{10000};
  size_t max_txn_ops = 128;               // etcd's --max-txn-ops
  size_t max_request_bytes = 1536 * 1024; // etcd's --max-request-bytes
};

// Whether opening may create a store that does not exist.
enum class Creation {
  // A missing store is an error (kind not_found, reason k_no_store) naming it, and nothing is
  // created: no file, no directory, no etcd key. Every command that does not create things.
  never,
  // Created by the first write (state/deferred_store.hpp): until then it answers as an empty
  // store, so a command that fails on bad input, or only reads, creates nothing. The commands
  // that create things (a pool, a restore, a migration's target).
  on_first_write,
  // Created as it is opened (tests and tools that write at once).
  at_open,
};

struct OpenOptions {
  Creation create = Creation::never;
  Clock clock = system_clock();
  std::chrono::milliseconds busy_timeout{10000};
  PathEnvironment env = PathEnvironment::from_process();
  EtcdAccess etcd;
};

// Opens the store `url` names: for SQLite it creates the directory (0700) and file (0600) when
// missing (options.create says when), refuses a network filesystem, and migrates the schema;
// storage the user made read-only opens read-only (StoreInfo::writable false, writes fail
// k_read_only); for etcd it reaches the cluster (state/etcd_store.hpp). Never falls back from one
// backend to another. Errors: usage for a bad URL (or TLS files given for plain http); not_found
// (reason k_no_store) for a missing store with Creation::never; failure with reasons
// k_network_filesystem, k_unavailable (naming every etcd endpoint tried), k_busy; auth for etcd
// credentials.
Expected<std::unique_ptr<StateStore>> open_store(std::string_view url,
                                                 const OpenOptions& options = {});

} // namespace tpuctl::state
