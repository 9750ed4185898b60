// The configuration file (cli::Config::parse, what Config::load does with the file's text) and
// one value as `tpuctl config set KEY VALUE` checks it (validate_config_value). Input: the file's
// text; when it holds a newline, the text before it is also tried as a key and the rest as its
// value. Properties: an accepted file holds only known keys whose values pass validation; a
// value that passes can be set and read back.
#include <string>

#include "cli/config.hpp"
#include "fuzz/fuzz_check.hpp"

using namespace tpuctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  if (auto config = cli::Config::parse("/fuzz/config.json", text)) {
    for (const auto& [key, value] : config->values()) {
      FUZZ_CHECK(cli::validate_config_value(key, value).has_value(), key + "=" + value);
    }
  } else {
    FUZZ_CHECK(!config.error().message.empty(), text);
  }
  if (auto nl = text.find('\n'); nl != std::string::npos) {
    const std::string key = text.substr(0, nl);
    const std::string value = text.substr(nl + 1);
    cli::Config config;
    auto set = config.set(key, value);
    FUZZ_CHECK(set.has_value() == cli::validate_config_value(key, value).has_value(), text);
    if (set) {
      FUZZ_CHECK(config.get(key) == value, key + "=" + value);
    }
  }
  return 0;
}
