#include "state/etcd_wire.hpp"

namespace tpuctl::state::etcd {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

} // namespace

int64_t int64_field(const Json& object, std::string_view name) {
  if (!object.is_object()) {
    return 0;
  }
  auto it = object.find(name);
  if (it == object.end()) {
    return 0;
  }
  if (it->is_number_unsigned()) {
    return static_cast<int64_t>(it->get<uint64_t>());
  }
  if (it->is_number_integer()) {
    return it->get<int64_t>();
  }
  if (it->is_string()) {
    // Member and cluster IDs are uint64: keep their bits (callers only compare them).
    const std::string& text = it->get_ref<const std::string&>();
    try {
      return text.starts_with('-') ? std::stoll(text) : static_cast<int64_t>(std::stoull(text));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

bool bool_field(const Json& object, std::string_view name) {
  if (!object.is_object()) {
    return false;
  }
  auto it = object.find(name);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::optional<KeyValue> parse_kv(const Json& kv) {
  KeyValue out;
  auto text = [&](const char* name) -> std::optional<std::string> {
    auto it = kv.find(name);
    if (it == kv.end() || !it->is_string()) {
      return std::string();
    }
    return base64_decode(it->get<std::string>());
  };
  auto key = text("key");
  auto value = text("value");
  if (!key || !value) {
    return std::nullopt;
  }
  out.key = std::move(*key);
  out.value = std::move(*value);
  out.create_revision = int64_field(kv, "create_revision");
  out.mod_revision = int64_field(kv, "mod_revision");
  out.version = int64_field(kv, "version");
  out.lease = int64_field(kv, "lease");
  return out;
}

std::optional<std::vector<KeyValue>> parse_kvs(const Json& range_response) {
  std::vector<KeyValue> out;
  auto it = range_response.find("kvs");
  if (it == range_response.end() || !it->is_array()) {
    return out;
  }
  for (const auto& kv : *it) {
    auto one = parse_kv(kv);
    if (!one) {
      return std::nullopt;
    }
    out.push_back(std::move(*one));
  }
  return out;
}

int64_t header_revision(const Json& response) {
  auto it = response.find("header");
  return it == response.end() ? 0 : int64_field(*it, "revision");
}

Json range_request(std::string_view key, const RangeOptions& options) {
  Json r = {{"key", base64_encode(key)}};
  if (!options.range_end.empty()) {
    r["range_end"] = base64_encode(options.range_end);
  }
  if (options.keys_only) {
    r["keys_only"] = true;
  }
  if (options.min_create_revision > 0) {
    r["min_create_revision"] = str(options.min_create_revision);
  }
  return r;
}

Json put_request(std::string_view key, std::string_view value, int64_t lease) {
  Json r = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) {
    r["lease"] = str(lease);
  }
  return r;
}

Json delete_request(std::string_view key, std::string_view range_end) {
  Json r = {{"key", base64_encode(key)}};
  if (!range_end.empty()) {
    r["range_end"] = base64_encode(range_end);
  }
  return r;
}

Json op_range(Json range) {
  return Json{{"request_range", std::move(range)}};
}
Json op_put(Json put) {
  return Json{{"request_put", std::move(put)}};
}
Json op_delete(Json del) {
  return Json{{"request_delete_range", std::move(del)}};
}

Json compare_mod_equals(std::string_view key, int64_t mod_revision) {
  return Json{{"key", base64_encode(key)},
              {"result", "EQUAL"},
              {"target", "MOD"},
              {"mod_revision", str(mod_revision)}};
}

Json compare_mod_below(std::string_view key, std::string_view range_end, int64_t below) {
  return Json{{"key", base64_encode(key)},
              {"range_end", base64_encode(range_end)},
              {"result", "LESS"},
              {"target", "MOD"},
              {"mod_revision", str(below)}};
}

Json compare_exists(std::string_view key) {
  return Json{
      {"key", base64_encode(key)}, {"result", "GREATER"}, {"target", "VERSION"}, {"version", "0"}};
}

Json txn_request(std::vector<Json> compares, std::vector<Json> success, std::vector<Json> failure) {
  Json r = Json::object();
  r["compare"] = Json(std::move(compares));
  r["success"] = Json(std::move(success));
  if (!failure.empty()) {
    r["failure"] = Json(std::move(failure));
  }
  return r;
}

Json txn_response_at(const Json& txn_response, size_t index, std::string_view which) {
  auto it = txn_response.find("responses");
  if (it == txn_response.end() || !it->is_array() || index >= it->size()) {
    return Json::object();
  }
  const Json& one = (*it)[index];
  auto w = one.find(which);
  return w == one.end() ? Json::object() : *w;
}

Json lease_grant_request(int64_t ttl_seconds) {
  return Json{{"TTL", str(ttl_seconds)}};
}

} // namespace tpuctl::state::etcd
