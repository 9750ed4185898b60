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
  bool pool_from_config = false; // `pool` is the config file's (a --zone given overrides it)
  std::string zone;     // gcloud's --zone (or CLOUDSDK_COMPUTE_ZONE): a pool's name (compat.hpp)
  bool zone_flag = false; // `zone` came from --zone (not CLOUDSDK_COMPUTE_ZONE)
  // gcloud's and xpk's --project (or --billing-project): the project a create is charged to, and
  // the one project a list shows; "" when not given (see charged_project()).
  std::string project;
  // Reaching an etcd store (state/location.hpp EtcdAccess); the password itself comes from
  // --etcd-password-file or TPUCTL_ETCD_PASSWORD, never from the command line.
  std::string etcd_user;          // --etcd-user, env TPUCTL_ETCD_USER
  std::string etcd_password_file; // --etcd-password-file, env TPUCTL_ETCD_PASSWORD_FILE
  std::string etcd_cacert;        // --etcd-cacert, env TPUCTL_ETCD_CACERT
  std::string etcd_cert;          // --etcd-cert, env TPUCTL_ETCD_CERT
  std::string etcd_key;           // --etcd-key, env TPUCTL_ETCD_KEY
  std::string filter;             // --filter=EXPR (list commands; cli/list_filter.hpp)
  std::string sort_by;            // --sort-by=FIELD[,~FIELD] (gcloud's; '~' is descending)
  std::string limit;              // --limit=N|unlimited (gcloud's): at most N rows
};

struct Context {
  GlobalOptions globals;
  Format format = Format::table;
  std::vector<std::string> value_fields; // Format::value: the fields to print
  bool value_table = false;    // --format 'table(a,b)' (gcloud's): those fields as a table
  bool value_csv = false;      // --format 'csv(a,b)': comma-separated, quoted as CSV
  bool value_heading = true;   // csv: a header line, unless csv[no-heading](...)
  size_t row_limit = 0;        // --limit: at most this many rows; 0: all
  bool json_lines = false;     // --format jsonl (streams such as qr list --watch)
  std::ostream* out = nullptr; // results only
  std::ostream* err = nullptr; // errors, progress and notices

  std::ostream& stdout_stream() const { return *out; }
  std::ostream& stderr_stream() const { return *err; }
  bool machine_format() const { return format != Format::table; }
};

} // namespace tpuctl::cli
