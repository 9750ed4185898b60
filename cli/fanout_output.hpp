// How `tpuctl ... ssh`/`run` print a broadcast: --output=prefixed (default; `[HOST] line`, one
// whole line at a time, flushed per line), grouped (identical outputs once with their host list,
// like `clush -b`), jsonl (one JSON object per host as it finishes). Then, on stderr, the
// details of failed hosts and one summary line naming every failed host and why. The exit status
// of a broadcast is chosen here too.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

enum class FanoutOutput { prefixed, grouped, jsonl };

// Parses --output. Error (usage) naming the value and the three modes.
Expected<FanoutOutput> parse_fanout_output(std::string_view text);

// "[host] text\n". Never fails.
std::string prefixed_line(std::string_view host, std::string_view text);

// Who a broadcast's job is (by job index). On a slice: its node (TPU_NAME), slice index,
// TPU_WORKER_ID and pool host; its display name is provision::worker_label(). For `pool ssh`
// (no slices) only the host is known: node, slice and worker stay empty/-1 (null in jsonl).
struct JobIdentity {
  std::string node;
  int slice = -1;
  int worker = -1;
  std::string host;
};

// {node, slice, worker, host}: how every output names a job's worker, the first fields of each
// worker row (node, slice and worker null outside a slice; `host` when the identity names none).
// Never fails.
nlohmann::ordered_json identity_json(const JobIdentity* identity, const std::string& host);

// One host as a JSON object on one line (no newline), fields exactly: node, slice, worker (null
// outside a slice), host (the pool host's name), index (the job's position in the fan-out),
// outcome, exit_code (null unless the remote command exited by itself), signal (name or null),
// error (null, or {code: outcome, message}), duration_ms, stdout, stderr; then the fields of
// `extra` (scp: source, destination). Bytes that are not UTF-8 become U+FFFD. Never fails.
std::string jsonl_record(const remote::HostResult& result, const JobIdentity* identity = nullptr,
                         const nlohmann::ordered_json* extra = nullptr);
// The same record written to `os` as it is made: stdout and stderr (HostResult::out/err, then
// what their spools hold) stream through, in bounded memory whatever their size.
void write_jsonl_record(std::ostream& os, const remote::HostResult& result,
                        const JobIdentity* identity = nullptr,
                        const nlohmann::ordered_json* extra = nullptr);

// The grouped text of one stream: per distinct output a header with the folded host list and
// count, then the output. Empty when no host wrote to that stream. Never fails.
std::string grouped_text(const std::vector<remote::HostResult>& results, remote::Stream stream);
// The same written to `os`, spooled outputs streamed from their spools (a spool that lost bytes,
// the disk full, says so after its output).
void write_grouped(std::ostream& os, const std::vector<remote::HostResult>& results,
                   remote::Stream stream);

// The stderr report after a broadcast: one "tpuctl: HOST: error" line per failed host that has
// an error text (at most 20, then a count), then "tpuctl: N of M hosts failed: HOSTS (why), ...".
// `noun` is "hosts", or "workers" on a slice. Empty when every host succeeded. Never fails.
std::string failure_report(const std::vector<remote::HostResult>& results,
                           const std::string& noun = "hosts");

// The exit status one host stands for: 0 ok, its exit code, 128+N for signal N (ssh's
// convention), 124 timeout (timeout(1)), 130 interrupted, 5 authentication or host key, 255
// for other transport failures (ssh's convention).
int host_exit_status(const remote::HostResult& result);

// 0 when every host succeeded, else host_exit_status() of the first failed host in job order.
int broadcast_exit_status(const std::vector<remote::HostResult>& results);

// Prints a broadcast while it runs (callbacks()) and after it ends (finish()).
class FanoutPrinter {
public:
  // `identities`: by job index, a slice's workers (empty for hosts of a pool).
  FanoutPrinter(FanoutOutput mode, std::ostream& out, std::ostream& err,
                std::vector<JobIdentity> identities = {})
      : m_mode(mode), m_out(out), m_err(err), m_ids(std::move(identities)) {}
  // prefixed: every line at once; jsonl: every host as it finishes; grouped: nothing live.
  remote::FanoutCallbacks callbacks();
  // grouped: the groups; every mode: the failure report on stderr.
  void finish(const std::vector<remote::HostResult>& results);
  // jsonl: fields added to every record (scp: the file's source and destination).
  void set_extra(nlohmann::ordered_json extra) { m_extra = std::move(extra); }

private:
  const JobIdentity* identity(size_t index) const {
    return index < m_ids.size() ? &m_ids[index] : nullptr;
  }

  FanoutOutput m_mode;
  std::ostream& m_out;
  std::ostream& m_err;
  std::vector<JobIdentity> m_ids;
  nlohmann::ordered_json m_extra;
  // grouped: (stream, digest, size) of the outputs kept so far
  std::set<std::tuple<int, std::string, uint64_t>> m_kept;
};

} // namespace tpuctl::cli
