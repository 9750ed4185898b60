// What every command receives: the global flags, the output streams and the chosen format.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tpuctl::cli {

// value: --format 'value(f1,f2)', the named fields tab-separated, one row per line (gcloud).
enum class Format { table, json, yaml, value };

// Global flags; each is accepted before or after the command words.
struct GlobalOptions {
  std::string format = "table"; // --format=table|json|yaml
  bool quiet = false;           // --quiet/-q: no progress or notices on stderr
  std::string verbosity = "warning";
  std::string log_file; // --log-file=PATH
  std::string state;    // --state=URL, env TPUCTL_STATE
  std::string pool;     // --pool=NAME, env TPUCTL_POOL
  std::string filter;   // --filter=EXPR (list commands; cli/list_filter.hpp)
};

struct Context {
  GlobalOptions globals;
  Format format = Format::table;
  std::vector<std::string> value_fields; // Format::value: the fields to print
  std::ostream* out = nullptr;           // results only
  std::ostream* err = nullptr;           // errors, progress and notices

  std::ostream& stdout_stream() const { return *out; }
  std::ostream& stderr_stream() const { return *err; }
  bool machine_format() const { return format != Format::table; }
};

} // namespace tpuctl::cli
