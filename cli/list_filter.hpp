// gcloud's --filter and --format=value(...) for list commands, so scripts need no jq.
//
// Filter expressions (a subset of gcloud's): terms joined by AND (also implicit, by a space) and
// OR (AND binds tighter), each optionally negated by NOT or a leading '-', grouped with ( ):
//   KEY=VALUE    equal (case-insensitive text; numbers compare as numbers)
//   KEY!=VALUE   not equal
//   KEY:VALUE    KEY contains VALUE (a list: one element equals VALUE); KEY:* KEY is non-empty
//   KEY~REGEX    matches the extended regex anywhere;  KEY!~REGEX  does not
//   KEY<V, KEY<=V, KEY>V, KEY>=V   numeric when both sides are numbers, else text order
// KEY is a field of the row (the json field names), with dots for nested fields
// (labels.team). VALUE is a bare word or "quoted" / 'quoted' text.
//   tpuctl qr list --filter 'state=ACTIVE AND accelerator_type:v5litepod'
//   tpuctl pool hosts --filter 'state!=free OR labels.rack=r2' --format 'value(name)'
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::cli {

class RowFilter {
public:
  // Parses `expr`. Errors: usage naming the expression, the position and what was expected.
  static Expected<RowFilter> parse(std::string_view expr);
  // True when `row` (a json object) passes.
  bool matches(const nlohmann::ordered_json& row) const;
  // Every KEY the expression names (to report unknown fields).
  const std::vector<std::string>& keys() const { return m_keys; }

  struct Node;

private:
  std::shared_ptr<const Node> m_root;
  std::vector<std::string> m_keys;
};

// The fields of `value(a,b.c)`; nullopt-like empty when `format` is not a value(...) form.
// Errors: usage for `value(` without `)` or with no field.
Expected<std::vector<std::string>> parse_value_format(std::string_view format);

// The field `key` (dotted) of `row`, or null. gcloud's names for the same fields are found too
// (gcloud_alternates), so `value(state.state)` and `--filter acceleratorType=v4-8` from gcloud
// scripts work.
nlohmann::ordered_json field_of(const nlohmann::ordered_json& row, const std::string& key);

// The names tpuctl may have for gcloud's field `key`, best first: camelCase as snake_case
// (acceleratorType -> accelerator_type), `state.state` -> state, `name` -> id (a queued
// resource's), createTime -> created_at. Never fails; empty when there is none.
std::vector<std::string> gcloud_alternates(const std::string& key);

} // namespace tpuctl::cli
