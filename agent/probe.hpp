// What a worker host is: the facts `tpuctl agent probe` reports and `tpuctl pool check` gathers
// over SSH. The parsers take the text of /proc/meminfo, /etc/os-release, `df -Pk` and
// /proc/cpuinfo so the same code reads a local file or a remote command's output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::agent {

struct HostFacts {
  std::string version; // tpuctl's version on this host
  std::string hostname;
  std::string os;     // PRETTY_NAME from os-release
  std::string kernel; // uname -r
  std::string arch;   // uname -m
  int cores = 0;      // CPUs this process may run on
  int64_t memory_total_mib = 0;
  int64_t memory_available_mib = 0;
  std::vector<std::string> simd;  // e.g. sse4_2, avx, avx2, fma, f16c, avx512f
  std::vector<std::string> units; // matrix units: matrix_units(simd)
  std::string workdir;
  int64_t disk_free_mib = -1; // free space in workdir, -1 when unknown
  int64_t clock_unix_ms = 0;  // wall clock when probed (preflight compares clocks)
};

// Parses /proc/meminfo text: MemTotal and MemAvailable in MiB. Error if MemTotal is missing.
Expected<std::pair<int64_t, int64_t>> parse_meminfo(const std::string& text);

// PRETTY_NAME from os-release text (quotes removed), or NAME, or "unknown".
std::string parse_os_release(const std::string& text);

// Free MiB from `df -Pk PATH` output (second line, fourth column). Error if malformed.
Expected<int64_t> parse_df_free_mib(const std::string& text);

// The SIMD flags tpuctl cares about, from the first "flags" line of /proc/cpuinfo.
std::vector<std::string> parse_cpu_flags(const std::string& cpuinfo);

// The matrix units the SIMD flags (parse_cpu_flags) give, in a fixed order: "avx2" (with FMA),
// "avx512", "avx512-bf16", "avx512-vnni", "amx-int8", "amx-bf16" (the AMX ones also need
// amx_tile). What `kernel run` calls `isa`. Never fails.
std::vector<std::string> matrix_units(const std::vector<std::string>& simd);

// Probes this host. `workdir` is where the agent keeps its files (may not exist yet: then its
// closest existing parent is measured). Never fails as a whole: unknown facts stay at defaults.
HostFacts probe_local_host(const std::string& workdir);

} // namespace tpuctl::agent
