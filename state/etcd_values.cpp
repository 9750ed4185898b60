#include "state/etcd_values.hpp"

namespace tpuctl::state::etcd {

Error unreadable(const std::string& key, const std::string& why) {
  return Error(ErrorKind::failure,
               "the etcd state store holds key '" + key + "' that this tpuctl cannot read (" + why +
                   "): was it written by a newer tpuctl or by hand?",
               std::string(reason::k_unavailable));
}

namespace {

Expected<Json> parse_object(const KeyValue& kv) {
  Json doc = Json::parse(kv.value, nullptr, false);
  if (!doc.is_object()) {
    return unreadable(kv.key, "its value is not a JSON object");
  }
  return doc;
}

int64_t int_or(const Json& doc, const char* name) {
  auto it = doc.find(name);
  return it != doc.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::string text_or(const Json& doc, const char* name) {
  auto it = doc.find(name);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

} // namespace

Expected<ClaimValue> decode_claim(const KeyValue& kv) {
  TPUCTL_TRY_ASSIGN(Json doc, parse_object(kv));
  ClaimValue c;
  c.owner = text_or(doc, "owner");
  c.claimed_at_ms = int_or(doc, "claimed_at_ms");
  c.expires_at_ms = int_or(doc, "expires_at_ms");
  if (c.owner.empty()) {
    return unreadable(kv.key, "a claim without an owner");
  }
  return c;
}

Expected<Record> decode_record(const KeyLayout& keys, const KeyValue& kv) {
  auto key = keys.parse_record(kv.key);
  if (!key) {
    return unreadable(kv.key, "not a record key");
  }
  Record r;
  r.key = std::move(*key);
  if (auto doc = parse_object(kv)) {
    r.doc = std::move(*doc);
  } else {
    r.unreadable = describe(r.key) + " cannot be read (its stored value is not a JSON object)";
  }
  r.version = kv.mod_revision;
  r.create_revision = kv.create_revision;
  return r;
}

std::string encode_heartbeat(const Json& payload, int64_t last_seen_ms, int64_t ttl_ms) {
  return to_text(Json{{"payload", payload}, {"last_seen_ms", last_seen_ms}, {"ttl_ms", ttl_ms}});
}

Expected<Heartbeat> decode_heartbeat(const KeyLayout& keys, const KeyValue& kv) {
  auto parsed = keys.parse(kv.key);
  if (!parsed || parsed->family != "heartbeat") {
    return unreadable(kv.key, "not a heartbeat key");
  }
  TPUCTL_TRY_ASSIGN(Json doc, parse_object(kv));
  Heartbeat h;
  h.pool = parsed->pool;
  h.host = parsed->rest;
  auto p = doc.find("payload");
  h.payload = p != doc.end() && p->is_object() ? *p : Json::object();
  h.last_seen_ms = int_or(doc, "last_seen_ms");
  h.ttl_ms = int_or(doc, "ttl_ms");
  return h;
}

namespace {

Json event_json(const Event& e) {
  return Json{{"time_ms", e.time_ms},
              {"subject_kind", to_string(e.subject_kind)},
              {"subject", e.subject},
              {"type", e.type},
              {"from_state", e.from_state},
              {"to_state", e.to_state},
              {"initiator", to_string(e.initiator)},
              {"actor", e.actor},
              {"detail", e.detail}};
}

Event event_from(const Json& doc, const std::string& pool, int64_t revision) {
  Event e;
  e.revision = revision;
  e.time_ms = int_or(doc, "time_ms");
  e.pool = pool;
  e.subject_kind = parse_kind(text_or(doc, "subject_kind")).value_or(Kind::pool);
  e.subject = text_or(doc, "subject");
  e.type = text_or(doc, "type");
  e.from_state = text_or(doc, "from_state");
  e.to_state = text_or(doc, "to_state");
  e.initiator = parse_initiator(text_or(doc, "initiator")).value_or(Initiator::user);
  e.actor = text_or(doc, "actor");
  auto d = doc.find("detail");
  e.detail = d != doc.end() && d->is_object() ? *d : Json::object();
  return e;
}

} // namespace

std::string encode_events(const std::vector<Event>& events) {
  Json list = Json::array();
  for (const auto& e : events) {
    list.push_back(event_json(e));
  }
  return to_text(Json{{"events", std::move(list)}});
}

Expected<std::vector<Event>> decode_events(const KeyLayout& keys, const KeyValue& kv) {
  auto parsed = keys.parse(kv.key);
  if (!parsed || parsed->family != "event") {
    return unreadable(kv.key, "not an event key");
  }
  TPUCTL_TRY_ASSIGN(Json doc, parse_object(kv));
  std::vector<Event> out;
  auto list = doc.find("events");
  if (list == doc.end()) { // schema 1: one event per key
    out.push_back(event_from(doc, parsed->pool, kv.create_revision));
    return out;
  }
  if (!list->is_array()) {
    return unreadable(kv.key, "its events are not a list");
  }
  for (const auto& e : *list) {
    if (!e.is_object()) {
      return unreadable(kv.key, "an event that is not a JSON object");
    }
    out.push_back(event_from(e, parsed->pool, kv.create_revision));
  }
  return out;
}

} // namespace tpuctl::state::etcd
