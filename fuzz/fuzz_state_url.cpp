// --state URLs and TPUCTL_STATE (state::parse_state_url), in a fixed environment. Input: the
// URL. Properties: an SQLite location is an absolute, normalized path to a file (not a
// directory); an etcd location has endpoints and a prefix ending in '/'; and the canonical url()
// parses back to the same location.
#include <filesystem>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "state/location.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using namespace tpuctl::state;

namespace {

std::string describe(const StateLocation& loc) {
  return (loc.backend == Backend::sqlite
              ? "sqlite path '" + loc.path + "'"
              : "etcd " + util::join(loc.endpoints, ",") + " prefix '" + loc.prefix + "'");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) {
    return 0;
  }
  const std::string text = fuzz::text_of(data, size);
  PathEnvironment env;
  env.home = "/home/user";
  env.cwd = "/work/dir";
  env.xdg_state_home = (size % 2) ? "/xdg/state" : "";
  auto loc = parse_state_url(text, env);
  if (!loc) {
    FUZZ_CHECK(!loc.error().message.empty(), text);
    return 0;
  }
  const std::string where = "'" + text + "' -> " + describe(*loc);
  if (loc->backend == Backend::sqlite) {
    const std::filesystem::path p(loc->path);
    FUZZ_CHECK(p.is_absolute(), where);
    FUZZ_CHECK(p.lexically_normal() == p, where);
    FUZZ_CHECK(p.has_filename() && p.filename() != "." && p.filename() != "..",
               where + ": not a file name");
  } else {
    FUZZ_CHECK(!loc->endpoints.empty(), where);
    FUZZ_CHECK(!loc->prefix.empty() && loc->prefix.back() == '/', where);
  }
  const std::string url = loc->url();
  auto again = parse_state_url(url, env);
  FUZZ_CHECK(again.has_value(), where + ": its url '" + url + "' is rejected");
  FUZZ_CHECK(again->backend == loc->backend && again->path == loc->path &&
                 again->endpoints == loc->endpoints && again->prefix == loc->prefix,
             where + ": its url '" + url + "' parses as " + describe(*again));
  return 0;
}
