#include "state/etcd_keys.hpp"

#include <cstdio>

#include "state/etcd_pages.hpp"
#include "util/strings.hpp"

namespace tpuctl::state::etcd {

namespace {

std::string page_name(int page) {
  char n[8];
  std::snprintf(n, sizeof n, "%02d", page);
  return n;
}

} // namespace

std::string KeyLayout::record(const Key& key) const {
  if (key.kind == Kind::pool) {
    return m_prefix + "pool/" + key.pool;
  }
  return m_prefix + std::string(to_string(key.kind)) + "/" + key.pool + "/" + key.id;
}

std::string KeyLayout::records_of(Kind kind, const std::string& pool) const {
  if (kind == Kind::pool) {
    return m_prefix + "pool/" + pool; // "pool/" alone when pool is empty
  }
  if (kind == Kind::host) {
    return host_pages_of(pool);
  }
  return family_of(to_string(kind), pool);
}

std::string KeyLayout::family_of(std::string_view family, const std::string& pool) const {
  std::string out = m_prefix + std::string(family) + "/";
  if (!pool.empty()) {
    out += pool + "/";
  }
  return out;
}

std::string KeyLayout::host_page(const std::string& pool, int page) const {
  return host_pages_of(pool) + page_name(page);
}

std::string KeyLayout::host_page_of(const std::string& pool, const std::string& host) const {
  return host_page(pool, page_of(host));
}

std::string KeyLayout::claim_page(const std::string& pool, int page) const {
  return claim_pages_of(pool) + page_name(page);
}

std::string KeyLayout::claim_page_of(const std::string& pool, const std::string& host) const {
  return claim_page(pool, page_of(host));
}

std::string KeyLayout::heartbeat(const std::string& pool, const std::string& host) const {
  return m_prefix + "heartbeat/" + pool + "/" + host;
}

std::string KeyLayout::event(const std::string& pool, const std::string& nonce,
                             size_t index) const {
  char n[16];
  std::snprintf(n, sizeof n, "%04zu", index);
  return m_prefix + "event/" + pool + "/" + nonce + "." + n;
}

std::optional<ParsedKey> KeyLayout::parse(std::string_view key) const {
  if (!util::starts_with(key, m_prefix)) {
    return std::nullopt;
  }
  key.remove_prefix(m_prefix.size());
  auto parts = util::split(key, '/');
  if (parts.size() < 2 || parts[0].empty() || parts[1].empty()) {
    return std::nullopt;
  }
  ParsedKey out;
  out.family = parts[0];
  if (out.family == "meta" || out.family == "commit") {
    out.rest = parts[1];
    return parts.size() == 2 ? std::optional<ParsedKey>(out) : std::nullopt;
  }
  out.pool = parts[1];
  if (out.family == "pool" || out.family == "hostset") {
    return parts.size() == 2 ? std::optional<ParsedKey>(out) : std::nullopt;
  }
  if (parts.size() != 3 || parts[2].empty()) {
    return std::nullopt;
  }
  out.rest = parts[2];
  return out;
}

std::optional<Key> KeyLayout::parse_record(std::string_view key) const {
  auto p = parse(key);
  if (!p) {
    return std::nullopt;
  }
  auto kind = parse_kind(p->family);
  if (!kind || *kind == Kind::host) {
    return std::nullopt;
  }
  return Key{*kind, p->pool, *kind == Kind::pool ? "" : p->rest};
}

} // namespace tpuctl::state::etcd
