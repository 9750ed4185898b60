// Pool inventory files (`tpuctl pool import FILE`): provision::parse_inventory, the pure part of
// import_inventory, and util::json_pointer_lines under it. Input: the file's text. Properties:
// an accepted file yields one valid host spec per entry, and every value it took from the file
// is the file's value: ports within 1..65535 and equal to the file's, coords equal to the file's
// numbers, chips_per_host equal to the file's; a rejected file has a message.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_check.hpp"
#include "provision/pool/pools.hpp"
#include "util/json_lines.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using Json = nlohmann::json;

namespace {

void check_accepted(const std::string& text, const provision::Inventory& inv) {
  const Json doc = Json::parse(text); // it parsed once, so it parses again
  const Json& hosts = doc.at("hosts");
  FUZZ_CHECK(inv.specs.size() == hosts.size() && inv.options.size() == hosts.size(), text);
  for (size_t i = 0; i < hosts.size(); ++i) {
    const Json& h = hosts[i];
    const auto& spec = inv.specs[i];
    const auto& opt = inv.options[i];
    const std::string where = text + "\n  hosts[" + std::to_string(i) + "]";
    FUZZ_CHECK(util::validate_hostname(spec.host).has_value(), where);
    FUZZ_CHECK(opt.port >= 0 && opt.port <= 65535, where);
    if (h.contains("port")) {
      FUZZ_CHECK(h["port"].is_number_integer() && h["port"] == opt.port,
                 where + ": port " + std::to_string(opt.port) + " is not the file's " +
                     h["port"].dump());
    }
    if (h.contains("coords")) {
      std::vector<std::string> numbers;
      for (const auto& v : h["coords"]) {
        numbers.push_back(v.dump());
      }
      FUZZ_CHECK(opt.coords && *opt.coords == util::join(numbers, ","),
                 where + ": coords '" + opt.coords.value_or("") + "' are not the file's " +
                     h["coords"].dump());
    }
    for (const auto& [k, v] : opt.labels) {
      FUZZ_CHECK(provision::parse_label(k + "=" + v).has_value(), where + ": label " + k);
    }
  }
  if (inv.new_layout && doc["pool"].contains("chips_per_host")) {
    const Json& cph = doc["pool"]["chips_per_host"];
    FUZZ_CHECK(cph.is_number_integer() && cph == inv.new_layout->chips_per_host,
               text + "\n  chips_per_host " + std::to_string(inv.new_layout->chips_per_host) +
                   " is not the file's " + cph.dump());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) {
    return 0; // libFuzzer makes inputs up to -max_len; larger ones are regressions and seeds
  }
  const std::string text = fuzz::text_of(data, size);
  auto lines = util::json_pointer_lines(text);
  for (const auto& [pointer, line] : lines) {
    FUZZ_CHECK(line >= 1 && util::line_of(lines, pointer) == line, pointer);
  }
  for (const std::string pool : {"", "p"}) {
    auto inv = provision::parse_inventory(pool, text);
    if (inv) {
      check_accepted(text, *inv);
    } else {
      FUZZ_CHECK(!inv.error().message.empty(), text);
    }
  }
  return 0;
}
