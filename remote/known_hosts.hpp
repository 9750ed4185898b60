// known_hosts as OpenSSH reads it, for what libssh 0.10 skips: it ignores every line that starts
// with a marker, so `@cert-authority` (a CA whose host certificates are trusted for the line's
// host patterns) and `@revoked` (a key never accepted) are read here (sshd(8) "SSH_KNOWN_HOSTS
// FILE FORMAT"). Plain lines are kept too, only to tell whether a host has one: libssh still
// does the plain-key check itself.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::remote {

enum class KnownHostsMarker { none, cert_authority, revoked };

struct KnownHostsEntry {
  std::string path; // the file it was read from
  size_t line = 0;  // 1-based
  KnownHostsMarker marker = KnownHostsMarker::none;
  std::string patterns; // as written: "a,*.b,!c" or one hashed name "|1|salt|hash"
  std::string key_type; // "ssh-ed25519"
  std::string key;      // the decoded key blob
};

struct KnownHosts {
  std::string path; // one file, or several joined by ", " (merge_known_hosts)
  bool exists = true; // false: the file was missing (read as empty)
  std::vector<KnownHostsEntry> entries;

  bool has_markers() const;
  // Entries with `marker` whose patterns match `name` ("host", or "[host]:port" off port 22).
  std::vector<const KnownHostsEntry*> matching(std::string_view name,
                                               KnownHostsMarker marker) const;
  // The @revoked entry matching `name` whose key is `key_blob`, null when none.
  const KnownHostsEntry* revoked(std::string_view name, std::string_view key_blob) const;
};

// Parses a known_hosts file's text. Plain lines that do not parse are skipped (libssh reads
// those); a marker line must be whole: an unknown marker, a marker line without a host pattern
// (`@cert-authority ssh-ed25519 AAAA...`), or one whose key is not base64 of a blob of its type
// is an error (usage) naming `path` and the line, and how to write it.
Expected<KnownHosts> parse_known_hosts(const std::string& path, std::string_view text);

// Reads and parses the file at `path` ("~/" expanded); a missing file is an empty one. Cached
// per process by path, size and modification time, so the sessions of a fan-out read it once.
Expected<std::shared_ptr<const KnownHosts>> load_known_hosts(const std::string& path);

// OpenSSH's host pattern list match: comma-separated patterns with `*` and `?`, case-
// insensitive; a matching `!pattern` rejects the name whatever else matches; a hashed name
// `|1|base64(salt)|base64(HMAC-SHA1(salt, name))` matches that one name.
bool host_patterns_match(std::string_view patterns, std::string_view name);

// "[host]:port", or "host" for port 22: the name known_hosts lines are matched against.
std::string known_hosts_name(const std::string& host, unsigned port);

// The entries of several files, in the order given (ssh reads its UserKnownHostsFile list, then
// its GlobalKnownHostsFile list, as one set); `path` lists those that exist (all of them when
// none does), for messages.
KnownHosts merge_known_hosts(const std::vector<std::shared_ptr<const KnownHosts>>& files);

// OpenSSH's check_key_in_hostkeys for a plain key: among the lines whose patterns match `name`,
// one with the key is `ok`; else one with another key (of any type) makes it `changed`; none is
// `unknown`; and a matching @revoked line with the key makes it `revoked` whatever else.
enum class HostKeyStatus { ok, changed, revoked, unknown };
struct HostKeyLookup {
  HostKeyStatus status = HostKeyStatus::unknown;
  const KnownHostsEntry* entry = nullptr; // the line that decided (null for unknown)
};
HostKeyLookup lookup_host_key(const KnownHosts& known, std::string_view name,
                              std::string_view key_blob);

// The key types of the plain lines matching `name`, in file order, each once: what ssh puts
// first in its host-key proposal (order_hostkeyalgs).
std::vector<std::string> known_key_types(const KnownHosts& known, std::string_view name);

// A known_hosts line for `name` and the key (type, blob), hashed (`|1|salt|hmac`) when `hash`.
std::string known_hosts_line(const std::string& name, const std::string& type,
                             std::string_view blob, bool hash);

} // namespace tpuctl::remote
