// --filter expressions and --format value(...) fields, as pure logic over json rows.
#include <doctest/doctest.h>

#include "cli/list_filter.hpp"

using tpuctl::cli::parse_value_format;
using tpuctl::cli::RowFilter;
using Json = nlohmann::ordered_json;

TEST_SUITE_BEGIN("unit");

namespace {

const Json k_row = Json::parse(R"({"id": "train-1", "state": "ACTIVE", "chips": 64,
  "labels": {"team": "ml"}, "node_ids": ["a-0", "a-1"], "reason": ""})");

bool passes(const std::string& expr, const Json& row = k_row) {
  auto f = RowFilter::parse(expr);
  REQUIRE_MESSAGE(f, f.error().message);
  return f->matches(row);
}

} // namespace

TEST_CASE("cli::RowFilter: operators") {
  CHECK(passes("state=ACTIVE"));
  CHECK(passes("state=active")); // text compares case-insensitively
  CHECK(!passes("state!=ACTIVE"));
  CHECK(passes("id:train"));
  CHECK(!passes("id:infer"));
  CHECK(passes("node_ids:a-1")); // a list: one element equals
  CHECK(!passes("node_ids:a"));
  CHECK(passes("labels.team=ml"));
  CHECK(passes("id~^train-[0-9]+$"));
  CHECK(passes("id!~^infer"));
  CHECK(passes("chips>=64"));
  CHECK(!passes("chips>64"));
  CHECK(passes("chips<100")); // numerically: "64" < "100" though not as text
  CHECK(passes("labels:*"));
  CHECK(!passes("reason:*"));
  CHECK(passes("id='train-1'"));
  CHECK(passes("id=\"train-1\""));
  CHECK(!passes("missing=x")); // absent fields are empty
  CHECK(passes(""));           // no filter: everything
}

TEST_CASE("cli::RowFilter: AND (also implicit) binds tighter than OR; NOT, '-' and groups") {
  CHECK(passes("state=ACTIVE AND chips=64"));
  CHECK(passes("state=ACTIVE chips=64"));
  CHECK(!passes("state=ACTIVE AND chips=8"));
  CHECK(passes("state=FAILED OR chips=64"));
  CHECK(passes("state=FAILED AND chips=8 OR id:train"));
  CHECK(!passes("state=FAILED AND (chips=8 OR id:train)"));
  CHECK(!passes("NOT state=ACTIVE"));
  CHECK(passes("-state=FAILED"));
  CHECK(passes("(id~^(train|infer)-1$)"));
}

TEST_CASE("cli::RowFilter: malformed expressions are usage errors naming the position") {
  for (const char* bad : {"state", "state=ACTIVE AND", "(state=ACTIVE", "chips>", "id~(", "=x",
                          "state=ACTIVE )", "id='open"}) {
    CAPTURE(bad);
    auto f = RowFilter::parse(bad);
    REQUIRE(!f);
    CHECK(f.error().kind == tpuctl::ErrorKind::usage);
    CHECK(f.error().message.find(std::string("'") + bad + "'") != std::string::npos);
    CHECK(f.error().message.find("position") != std::string::npos);
  }
  auto f = RowFilter::parse("a=1 OR b.c~x");
  REQUIRE(f);
  CHECK(f->keys() == std::vector<std::string>{"a", "b.c"});
}

TEST_CASE("cli::RowFilter: a regex with nested repeats matches in linear time "
          "(fuzz/regressions/list_filter)") {
  // The fuzzer's input: 25 stars make 25 nested repeats, which libstdc++'s backtracking matcher
  // explored in exponential time (past 14 s on one row); now each row is one linear pass.
  const std::string stars(25, '*');
  // The leading '-' negates (gcloud's NOT): no row has 'lals.', so the term fails and the
  // whole expression holds; what matters is that it returns at all.
  CHECK(passes("-lals.~-" + stars + "=m\xa7|:"));
  CHECK(!passes("lals.~-" + stars + "=m\xa7|:"));
  CHECK(passes("id~-" + stars + "1"));
  CHECK(!passes("id~^(a*)*b$", Json{{"id", std::string(5000, 'a')}}));
  // Still POSIX extended regexes, unanchored unless anchored.
  CHECK(passes("id~rain"));
  CHECK(passes("id~^(train|infer)-[[:digit:]]{1,3}$"));
  CHECK(!passes("id~^rain"));
  CHECK(passes("state!~^(FAILED|SUSPENDED)$"));
}

TEST_CASE("cli::field_of: a list index too large for size_t is no index "
          "(fuzz/regressions/list_filter)") {
  // std::stoul threw out_of_range (uncaught) on this key.
  CHECK(tpuctl::cli::field_of(k_row, "node_ids.99994444444444444444444444444444444444444") ==
        nullptr);
  CHECK(!passes("node_ids.99994444444444444444444444444444444444444444444444=1"));
  CHECK(tpuctl::cli::field_of(k_row, "node_ids.1") == "a-1");
  CHECK(tpuctl::cli::field_of(k_row, "node_ids.2") == nullptr);
  CHECK(tpuctl::cli::field_of(k_row, "node_ids.-1") == nullptr);
}

TEST_CASE("cli::parse_value_format: fields of value(...)") {
  CHECK(*parse_value_format("value(id,state)") == std::vector<std::string>{"id", "state"});
  CHECK(*parse_value_format("value( id , labels.team )") ==
        std::vector<std::string>{"id", "labels.team"});
  CHECK(parse_value_format("json")->empty());
  CHECK(!parse_value_format("value(id"));
  CHECK(!parse_value_format("value()"));
}

TEST_CASE("cli::field_of reads gcloud's names: state.state, name, camelCase, a[0] and a[].b") {
  using tpuctl::cli::field_of;
  const Json qr = Json::parse(R"({"id": "qr-1", "state": "ACTIVE", "accelerator_type": "v4-8",
    "created_at": "2026-11-25T12:00:00Z",
    "network_endpoints": [{"ip_address": "10.0.0.2"}, {"ip_address": "10.0.0.3"}]})");
  CHECK(field_of(qr, "state.state") == "ACTIVE");
  CHECK(field_of(qr, "name") == "qr-1");
  CHECK(field_of(qr, "acceleratorType") == "v4-8");
  CHECK(field_of(qr, "createTime") == "2026-11-25T12:00:00Z");
  CHECK(field_of(qr, "networkEndpoints[0].ipAddress") == "10.0.0.2");
  CHECK(field_of(qr, "networkEndpoints[].ipAddress") == Json::array({"10.0.0.2", "10.0.0.3"}));
  CHECK(field_of(qr, "network_endpoints.1.ip_address") == "10.0.0.3");
  CHECK(field_of(qr, "nope").is_null());
  CHECK(field_of(qr, "networkEndpoints[7].ipAddress").is_null());
  // The row's own name wins over an alternate.
  CHECK(field_of(Json::parse(R"({"name": "node-1", "id": "x"})"), "name") == "node-1");
  // A gcloud --filter on its field names.
  CHECK(passes("state.state=ACTIVE AND acceleratorType:v4", qr));
}

TEST_CASE("cli::parse_value_format takes gcloud's table(field:attributes, ...) too") {
  CHECK(*parse_value_format("table(name:label=NAME,state.state:sort=1)") ==
        std::vector<std::string>{"name", "state.state"});
  CHECK(!parse_value_format("table(name"));
  CHECK(!parse_value_format("table()"));
  // Blanks around a field and before its ':' are not part of its name; blanks inside one are
  // an error, never a field no row has.
  CHECK(*parse_value_format("table( name :label=NAME , state.state :sort=1)") ==
        std::vector<std::string>{"name", "state.state"});
  const auto inner = parse_value_format("value(ame :ta,am  e)");
  REQUIRE(!inner);
  CHECK(inner.error().message.find("'am  e' has a blank inside") != std::string::npos);
}
