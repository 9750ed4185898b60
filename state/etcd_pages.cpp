#include "state/etcd_pages.hpp"

#include <tuple>

#include "state/etcd_values.hpp"

namespace tpuctl::state::etcd {

namespace {

// A non-negative integer field, 0 when absent; nullopt when present but not one.
std::optional<int64_t> revision_field(const Json& doc, const char* name) {
  auto it = doc.find(name);
  if (it == doc.end()) {
    return int64_t{0};
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return std::nullopt;
  }
  return it->get<int64_t>();
}

int64_t resolved(int64_t stored, int64_t page_revision) {
  return stored != 0 ? stored : page_revision;
}

// The top-level fields every doc of `page` has, with equal values (pages of two or more).
Json common_fields(const HostPage& page) {
  Json common = Json::object();
  if (page.size() < 2) {
    return common;
  }
  const Json& first = page.begin()->second.doc;
  for (auto f = first.begin(); f != first.end(); ++f) {
    bool shared = true;
    for (const auto& [name, rec] : page) {
      auto it = rec.doc.find(f.key());
      if (it == rec.doc.end() || *it != f.value()) {
        shared = false;
        break;
      }
    }
    if (shared) {
      common[f.key()] = f.value();
    }
  }
  return common;
}

} // namespace

int page_of(std::string_view host) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : host) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<int>(h % k_pages_per_pool);
}

std::string encode_host_page(const HostPage& page) {
  Json common = common_fields(page);
  Json hosts = Json::object();
  for (const auto& [name, rec] : page) {
    Json d = Json::object();
    for (auto f = rec.doc.begin(); f != rec.doc.end(); ++f) {
      if (!common.contains(f.key())) {
        d[f.key()] = f.value();
      }
    }
    Json entry{{"d", std::move(d)}};
    if (rec.version != 0) {
      entry["v"] = rec.version;
    }
    if (rec.create_revision != 0) {
      entry["c"] = rec.create_revision;
    }
    hosts[name] = std::move(entry);
  }
  return to_text(Json{{"common", std::move(common)}, {"hosts", std::move(hosts)}});
}

Expected<HostPage> decode_host_page(const KeyValue& kv) {
  Json doc = Json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("hosts") || !doc["hosts"].is_object()) {
    return unreadable(kv.key, "not a host page");
  }
  Json common = doc.value("common", Json::object());
  if (!common.is_object()) {
    return unreadable(kv.key, "its common fields are not a JSON object");
  }
  HostPage page;
  for (auto it = doc["hosts"].begin(); it != doc["hosts"].end(); ++it) {
    const Json& entry = it.value();
    if (!entry.is_object() || !entry.contains("d") || !entry["d"].is_object()) {
      return unreadable(kv.key, "host '" + it.key() + "' has no record");
    }
    auto v = revision_field(entry, "v");
    auto c = revision_field(entry, "c");
    if (!v || !c) {
      return unreadable(kv.key, "host '" + it.key() + "' has a version that is not a revision");
    }
    PagedRecord rec;
    rec.doc = common;
    rec.doc.update(entry["d"]);
    rec.version = resolved(*v, kv.mod_revision);
    rec.create_revision = resolved(*c, kv.mod_revision);
    page.emplace(it.key(), std::move(rec));
  }
  return page;
}

std::string encode_claim_page(const ClaimPage& page) {
  using Group = std::tuple<std::string, int64_t, int64_t, int64_t>;
  std::map<Group, std::vector<std::string>> groups;
  for (const auto& [host, c] : page) {
    groups[{c.owner, c.claimed_at_ms, c.expires_at_ms, c.revision}].push_back(host);
  }
  Json out = Json::array();
  for (auto& [g, hosts] : groups) {
    const auto& [owner, at, exp, rev] = g;
    Json j{{"owner", owner}, {"at", at}, {"hosts", std::move(hosts)}};
    if (exp != 0) {
      j["exp"] = exp;
    }
    if (rev != 0) {
      j["r"] = rev;
    }
    out.push_back(std::move(j));
  }
  return to_text(Json{{"groups", std::move(out)}});
}

Expected<ClaimPage> decode_claim_page(const KeyValue& kv) {
  Json doc = Json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("groups") || !doc["groups"].is_array()) {
    return unreadable(kv.key, "not a claim page");
  }
  ClaimPage page;
  for (const auto& g : doc["groups"]) {
    if (!g.is_object() || !g.contains("owner") || !g["owner"].is_string() ||
        g["owner"].get<std::string>().empty() || !g.contains("hosts") || !g["hosts"].is_array()) {
      return unreadable(kv.key, "a claim group without an owner or hosts");
    }
    auto at = revision_field(g, "at");
    auto exp = revision_field(g, "exp");
    auto rev = revision_field(g, "r");
    if (!at || !exp || !rev) {
      return unreadable(kv.key, "a claim group with a time or revision that is not a number");
    }
    for (const auto& h : g["hosts"]) {
      if (!h.is_string() || h.get<std::string>().empty()) {
        return unreadable(kv.key, "a claimed host that is not a name");
      }
      PagedClaim c{g["owner"].get<std::string>(), *at, *exp, resolved(*rev, kv.mod_revision)};
      if (!page.emplace(h.get<std::string>(), std::move(c)).second) {
        return unreadable(kv.key, "host '" + h.get<std::string>() + "' is claimed twice");
      }
    }
  }
  return page;
}

size_t request_bytes(std::string_view key, std::string_view value) {
  return key.size() + value.size() + 16;
}

} // namespace tpuctl::state::etcd
