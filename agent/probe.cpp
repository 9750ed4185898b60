#include "agent/probe.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "util/build_info.hpp"
#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

Expected<std::pair<int64_t, int64_t>> parse_meminfo(const std::string& text) {
  int64_t total = -1, available = -1;
  std::istringstream in(text);
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") {
      total = kib / 1024;
    } else if (key == "MemAvailable:") {
      available = kib / 1024;
    }
  }
  if (total < 0) {
    return make_error(ErrorKind::failure, "meminfo has no MemTotal line");
  }
  return std::make_pair(total, available < 0 ? 0 : available);
}

std::string parse_os_release(const std::string& text) {
  std::string name;
  for (const auto& line : util::split(text, '\n')) {
    auto eq = line.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    std::string key = line.substr(0, eq);
    std::string value(util::trim(line.substr(eq + 1)));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "PRETTY_NAME") {
      return value;
    }
    if (key == "NAME") {
      name = value;
    }
  }
  return name.empty() ? "unknown" : name;
}

Expected<int64_t> parse_df_free_mib(const std::string& text) {
  auto lines = util::split(std::string(util::trim(text)), '\n');
  if (lines.size() < 2) {
    return make_error(ErrorKind::failure, "df output has no data line");
  }
  std::istringstream in(lines.back());
  std::string fs;
  int64_t blocks = 0, used = 0, avail = 0;
  if (!(in >> fs >> blocks >> used >> avail)) {
    return make_error(ErrorKind::failure, "df output is malformed: '" + lines.back() + "'");
  }
  return avail / 1024;
}

std::vector<std::string> matrix_units(const std::vector<std::string>& simd) {
  auto has = [&](const char* flag) {
    return std::find(simd.begin(), simd.end(), flag) != simd.end();
  };
  std::vector<std::string> out;
  if (has("avx2") && has("fma")) {
    out.push_back("avx2");
  }
  if (has("avx512f")) {
    out.push_back("avx512");
    if (has("avx512_bf16")) {
      out.push_back("avx512-bf16");
    }
    if (has("avx512_vnni")) {
      out.push_back("avx512-vnni");
    }
  }
  if (has("amx_tile")) {
    if (has("amx_int8")) {
      out.push_back("amx-int8");
    }
    if (has("amx_bf16")) {
      out.push_back("amx-bf16");
    }
  }
  return out;
}

std::vector<std::string> parse_cpu_flags(const std::string& cpuinfo) {
  static const std::vector<std::string> k_interesting = {
      "sse4_2",   "avx",      "avx2",        "fma",      "f16c",
      "avx512f",  "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
      "amx_tile", "amx_int8", "amx_bf16",    "asimd",    "sve"};
  std::vector<std::string> out;
  for (const auto& line : util::split(cpuinfo, '\n')) {
    if (!util::starts_with(line, "flags") && !util::starts_with(line, "Features")) {
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    std::istringstream in(line.substr(colon + 1));
    std::vector<std::string> flags;
    for (std::string f; in >> f;) {
      flags.push_back(f);
    }
    for (const auto& want : k_interesting) {
      if (std::find(flags.begin(), flags.end(), want) != flags.end()) {
        out.push_back(want);
      }
    }
    break;
  }
  return out;
}

HostFacts probe_local_host(const std::string& workdir) {
  HostFacts f;
  f.version = util::build::k_version;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) {
    f.hostname = host;
  }
  f.os = parse_os_release(read_file("/etc/os-release"));
  utsname u{};
  if (::uname(&u) == 0) {
    f.kernel = u.release;
    f.arch = u.machine;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    f.cores = CPU_COUNT(&set);
  } else {
    f.cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  }
  if (auto mem = parse_meminfo(read_file("/proc/meminfo"))) {
    f.memory_total_mib = mem->first;
    f.memory_available_mib = mem->second;
  }
  f.simd = parse_cpu_flags(read_file("/proc/cpuinfo"));
  f.units = matrix_units(f.simd);
  f.workdir = workdir;
  std::filesystem::path p = workdir.empty() ? "." : workdir;
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.root_path()) {
    p = p.parent_path();
  }
  struct statvfs sv {};
  if (::statvfs(p.empty() ? "." : p.c_str(), &sv) == 0) {
    f.disk_free_mib =
        static_cast<int64_t>(sv.f_bavail) * static_cast<int64_t>(sv.f_frsize) / (1024 * 1024);
  }
  f.clock_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  return f;
}

} // namespace tpuctl::agent
