// How `tpuctl ... ssh`/`run` print a broadcast: --output=prefixed (default; `[HOST] line`, one
// whole line at a time, flushed per line), grouped (identical outputs once with their host list,
// like `clush -b`), jsonl (one JSON object per host as it finishes). Then, on stderr, the
// details of failed hosts and one summary line naming every failed host and why. The exit status
// of a broadcast is chosen here too.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

enum class FanoutOutput { prefixed, grouped, jsonl };

// Parses --output. Error (usage) naming the value and the three modes.
Expected<FanoutOutput> parse_fanout_output(std::string_view text);

// "[host] text\n". Never fails.
std::string prefixed_line(std::string_view host, std::string_view text);

// One host as a JSON object on one line (no newline), fields exactly: host, index, exit_code
// (null unless the remote command exited by itself), signal (name or null), error (null when
// none), duration_ms, stdout, stderr. Bytes that are not UTF-8 become U+FFFD. Never fails.
std::string jsonl_record(const remote::HostResult& result);

// The grouped text of one stream: per distinct output a header with the folded host list and
// count, then the output. Empty when no host wrote to that stream. Never fails.
std::string grouped_text(const std::vector<remote::HostResult>& results, remote::Stream stream);

// The stderr report after a broadcast: one "tpuctl: HOST: error" line per failed host that has
// an error text (at most 20, then a count), then "tpuctl: N of M hosts failed: HOSTS (why), ...".
// Empty when every host succeeded. Never fails.
std::string failure_report(const std::vector<remote::HostResult>& results);

// The exit status one host stands for: 0 ok, its exit code, 128+N for signal N (ssh's
// convention), 124 timeout (timeout(1)), 130 interrupted, 5 authentication or host key, 255
// for other transport failures (ssh's convention).
int host_exit_status(const remote::HostResult& result);

// 0 when every host succeeded, else host_exit_status() of the first failed host in job order.
int broadcast_exit_status(const std::vector<remote::HostResult>& results);

// Prints a broadcast while it runs (callbacks()) and after it ends (finish()).
class FanoutPrinter {
public:
  FanoutPrinter(FanoutOutput mode, std::ostream& out, std::ostream& err)
      : m_mode(mode), m_out(out), m_err(err) {}
  // prefixed: every line at once; jsonl: every host as it finishes; grouped: nothing live.
  remote::FanoutCallbacks callbacks();
  // grouped: the groups; every mode: the failure report on stderr.
  void finish(const std::vector<remote::HostResult>& results);

private:
  FanoutOutput m_mode;
  std::ostream& m_out;
  std::ostream& m_err;
};

} // namespace tpuctl::cli
