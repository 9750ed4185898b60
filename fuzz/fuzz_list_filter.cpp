// --filter and --format=value(...) of every list command (cli::RowFilter::parse and matches,
// parse_value_format, field_of). Input: the expression. Properties: a parsed filter evaluates on
// every kind of row (nested objects, arrays, numbers, null) and NOT(expr) is its negation; the
// keys it reports are field names; value(...) gives non-empty trimmed fields. (The negation is
// checked on expressions without parentheses or quotes, where wrapping one in "NOT (...)" cannot
// change how it groups.)
#include <string>

#include <nlohmann/json.hpp>

#include "cli/list_filter.hpp"
#include "fuzz/fuzz_check.hpp"

using namespace tpuctl;
using Json = nlohmann::ordered_json;

namespace {

const std::vector<Json>& rows() {
  static const std::vector<Json> k_rows = {
      Json::object(),
      Json{{"name", "qr-1"},
           {"state", "ACTIVE"},
           {"accelerator_type", "v5litepod-16"},
           {"hosts", 4},
           {"ratio", 0.5},
           {"ok", true},
           {"labels", {{"team", "ml"}, {"rack", "r2"}}},
           {"workers", Json::array({"node01", "node02", "w-3"})},
           {"slices", Json::array({Json{{"id", 0}, {"state", "READY"}}, Json{{"id", 1}}})},
           {"nothing", nullptr},
           {"empty", ""}},
      Json{{"name", "a b (c) 'd' \"e\""},
           {"hosts", -1e300},
           {"labels", Json::object()},
           {"workers", Json::array()}},
  };
  return k_rows;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  if (auto filter = cli::RowFilter::parse(text)) {
    const bool plain = text.find_first_of("()'\"") == std::string::npos &&
                       text.find_first_not_of(" \t\n\r\f\v") != std::string::npos;
    auto negated = cli::RowFilter::parse("NOT (" + text + ")");
    FUZZ_CHECK(!plain || negated.has_value(), "NOT (" + text + ") is rejected");
    for (const auto& key : filter->keys()) {
      FUZZ_CHECK(!key.empty(), text);
      (void)cli::field_of(rows()[1], key);
    }
    for (const auto& row : rows()) {
      const bool passes = filter->matches(row);
      if (plain) {
        FUZZ_CHECK(negated->matches(row) == !passes, "NOT (" + text + ") on " + row.dump());
      }
    }
  } else {
    FUZZ_CHECK(!filter.error().message.empty(), text);
  }
  if (auto fields = cli::parse_value_format(text)) {
    for (const auto& f : *fields) {
      FUZZ_CHECK(!f.empty() && f.front() != ' ' && f.back() != ' ', text);
      (void)cli::field_of(rows()[1], f);
    }
  }
  return 0;
}
