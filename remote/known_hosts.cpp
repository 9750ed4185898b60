#include "remote/known_hosts.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <sys/stat.h>

#include "remote/file_cache.hpp"
#include "remote/ssh_config.hpp"
#include "remote/ssh_crypto.hpp"
#include "remote/ssh_wire.hpp"

namespace tpuctl::remote {

namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Glob match with `*` and `?`, case-insensitive (OpenSSH match_pattern after lowercasing).
bool glob(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || lower(p[pi]) == lower(s[si]))) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') {
    ++pi;
  }
  return pi == p.size();
}

bool hashed_match(std::string_view hashed, std::string_view name) {
  // |1|salt|hash
  std::string_view rest = hashed.substr(3);
  size_t bar = rest.find('|');
  if (bar == std::string_view::npos) {
    return false;
  }
  auto salt = wire::base64_decode(rest.substr(0, bar));
  auto hash = wire::base64_decode(rest.substr(bar + 1));
  if (!salt || !hash) {
    return false;
  }
  auto mac = crypto::hmac_sha1(*salt, name);
  return mac && *mac == *hash;
}

bool is_key_type(std::string_view s) {
  return s == "ssh-ed25519" || s == "ssh-rsa" || s == "ssh-dss" || s.rfind("ecdsa-sha2-", 0) == 0 ||
         s.rfind("sk-", 0) == 0 || s.find("-cert-v01@openssh.com") != std::string_view::npos;
}

} // namespace

bool KnownHosts::has_markers() const {
  for (const auto& e : entries) {
    if (e.marker != KnownHostsMarker::none) {
      return true;
    }
  }
  return false;
}

std::vector<const KnownHostsEntry*> KnownHosts::matching(std::string_view name,
                                                         KnownHostsMarker marker) const {
  std::vector<const KnownHostsEntry*> out;
  for (const auto& e : entries) {
    if (e.marker == marker && host_patterns_match(e.patterns, name)) {
      out.push_back(&e);
    }
  }
  return out;
}

const KnownHostsEntry* KnownHosts::revoked(std::string_view name, std::string_view key_blob) const {
  for (const KnownHostsEntry* e : matching(name, KnownHostsMarker::revoked)) {
    if (e->key == key_blob) {
      return e;
    }
  }
  return nullptr;
}

bool host_patterns_match(std::string_view patterns, std::string_view name) {
  if (patterns.rfind("|1|", 0) == 0) {
    return hashed_match(patterns, name);
  }
  bool found = false;
  size_t start = 0;
  while (start <= patterns.size()) {
    size_t comma = patterns.find(',', start);
    std::string_view p = patterns.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    bool negated = !p.empty() && p[0] == '!';
    if (negated) {
      p.remove_prefix(1);
    }
    if (!p.empty() && glob(p, name)) {
      if (negated) {
        return false;
      }
      found = true;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    start = comma + 1;
  }
  return found;
}

std::string known_hosts_name(const std::string& host, unsigned port) {
  return port == 22 || port == 0 ? host : "[" + host + "]:" + std::to_string(port);
}

KnownHosts merge_known_hosts(const std::vector<std::shared_ptr<const KnownHosts>>& files) {
  KnownHosts out;
  std::string all;
  for (const auto& f : files) {
    all += (all.empty() ? "" : ", ") + f->path;
    if (f->exists) {
      out.path += (out.path.empty() ? "" : ", ") + f->path;
    }
    out.entries.insert(out.entries.end(), f->entries.begin(), f->entries.end());
  }
  if (out.path.empty()) {
    out.path = all;
  }
  return out;
}

HostKeyLookup lookup_host_key(const KnownHosts& known, std::string_view name,
                              std::string_view key_blob) {
  HostKeyLookup out;
  for (const KnownHostsEntry* e : known.matching(name, KnownHostsMarker::none)) {
    if (e->key == key_blob) {
      out = {HostKeyStatus::ok, e};
      break;
    }
    out = {HostKeyStatus::changed, e};
  }
  if (const KnownHostsEntry* r = known.revoked(name, key_blob)) {
    out = {HostKeyStatus::revoked, r};
  }
  return out;
}

std::vector<std::string> known_key_types(const KnownHosts& known, std::string_view name) {
  std::vector<std::string> out;
  for (const KnownHostsEntry* e : known.matching(name, KnownHostsMarker::none)) {
    if (std::find(out.begin(), out.end(), e->key_type) == out.end()) {
      out.push_back(e->key_type);
    }
  }
  return out;
}

std::string known_hosts_line(const std::string& name, const std::string& type,
                             std::string_view blob, bool hash) {
  std::string host = name;
  if (hash) {
    std::string salt(20, '\0');
    std::ifstream random("/dev/urandom", std::ios::binary);
    random.read(salt.data(), static_cast<std::streamsize>(salt.size()));
    auto mac = crypto::hmac_sha1(salt, name);
    if (random && mac) {
      host = "|1|" + wire::base64_encode(salt) + "|" + wire::base64_encode(*mac);
    }
  }
  return host + " " + type + " " + wire::base64_encode(blob) + "\n";
}

Expected<KnownHosts> parse_known_hosts(const std::string& path, std::string_view text) {
  KnownHosts out;
  out.path = path;
  std::istringstream in{std::string(text)};
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream fields(line);
    std::string first;
    if (!(fields >> first) || first[0] == '#') {
      continue;
    }
    KnownHostsEntry e;
    e.path = path;
    e.line = number;
    const std::string where = "known_hosts file '" + path + "' line " + std::to_string(number);
    if (first[0] == '@') {
      if (first == "@cert-authority") {
        e.marker = KnownHostsMarker::cert_authority;
      } else if (first == "@revoked") {
        e.marker = KnownHostsMarker::revoked;
      } else {
        return Error{ErrorKind::usage,
                     where + ": unknown marker '" + first + "' (known: @cert-authority, @revoked)"};
      }
      const std::string how = " (write '" + first + " HOST-PATTERNS KEY-TYPE BASE64-KEY', e.g. '" +
                              first + " *.example.com ssh-ed25519 AAAA...')";
      std::string patterns, type, key;
      fields >> patterns >> type >> key;
      if (patterns.empty() || is_key_type(patterns)) {
        return Error{ErrorKind::usage, where + ": " + first + " line has no host pattern" + how};
      }
      if (type.empty() || key.empty()) {
        return Error{ErrorKind::usage, where + ": " + first + " line has no key" + how};
      }
      auto blob = wire::base64_decode(key);
      wire::Reader r(blob ? std::string_view(*blob) : std::string_view());
      if (!blob || r.string() != type) {
        return Error{ErrorKind::usage,
                     where + ": the key is not base64 of a '" + type + "' key" + how};
      }
      e.patterns = patterns;
      e.key_type = type;
      e.key = *blob;
    } else {
      std::string type, key;
      fields >> type >> key;
      auto blob = wire::base64_decode(key);
      if (type.empty() || !blob) {
        continue;
      }
      e.patterns = first;
      e.key_type = type;
      e.key = *blob;
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

Expected<std::shared_ptr<const KnownHosts>> load_known_hosts(const std::string& path) {
  static FileCache<KnownHosts> cache;
  return cache.get(expand_user_path(path),
                   [&](const std::string& text, bool exists) -> Expected<KnownHosts> {
                     TPUCTL_TRY_ASSIGN(auto parsed, parse_known_hosts(path, text));
                     parsed.exists = exists;
                     return parsed;
                   });
}

} // namespace tpuctl::remote
