#include <doctest/doctest.h>

#include "agent/probe.hpp"

using namespace tpuctl::agent;

TEST_SUITE_BEGIN("agent");

TEST_CASE("agent::parse_meminfo reads MemTotal and MemAvailable in MiB") {
  auto r = parse_meminfo("MemTotal:       24590764 kB\nMemFree:        1 kB\n"
                         "MemAvailable:   23000000 kB\n");
  REQUIRE(r);
  CHECK(r->first == 24590764 / 1024);
  CHECK(r->second == 23000000 / 1024);
  CHECK(!parse_meminfo("garbage"));
}

TEST_CASE("agent::parse_os_release prefers PRETTY_NAME and strips quotes") {
  CHECK(parse_os_release("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 "
                         "(bookworm)\"\n") == "Debian GNU/Linux 12 (bookworm)");
  CHECK(parse_os_release("NAME=Alpine\n") == "Alpine");
  CHECK(parse_os_release("") == "unknown");
}

TEST_CASE("agent::parse_df_free_mib reads the available column of df -Pk") {
  auto r = parse_df_free_mib("Filesystem     1024-blocks      Used Available Capacity Mounted on\n"
                             "/dev/vda        263174212  16461900 235232772       7% /\n");
  REQUIRE(r);
  CHECK(*r == 235232772 / 1024);
  CHECK(!parse_df_free_mib("df: /nope: No such file or directory\n"));
}

TEST_CASE("agent::parse_cpu_flags keeps the SIMD flags that matter, in a fixed order") {
  auto flags = parse_cpu_flags("processor : 0\nflags : fpu sse4_2 fma avx2 avx f16c xsave\n"
                               "processor : 1\nflags : fpu\n");
  CHECK(flags == std::vector<std::string>{"sse4_2", "avx", "avx2", "fma", "f16c"});
}

TEST_CASE("agent::matrix_units names the units the flags give, AMX only with amx_tile") {
  using V = std::vector<std::string>;
  CHECK(matrix_units({"sse4_2", "avx", "avx2"}) == V{}); // no FMA
  CHECK(matrix_units({"avx2", "fma"}) == V{"avx2"});
  CHECK(matrix_units({"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}) ==
        V{"avx2", "avx512", "avx512-bf16", "avx512-vnni"});
  CHECK(matrix_units({"avx512_vnni", "avx512_bf16"}) == V{}); // not without avx512f
  CHECK(matrix_units({"avx2", "fma", "avx512f", "amx_tile", "amx_int8", "amx_bf16"}) ==
        V{"avx2", "avx512", "amx-int8", "amx-bf16"});
  CHECK(matrix_units({"amx_int8", "amx_bf16"}) == V{});
  // From /proc/cpuinfo text, through parse_cpu_flags.
  CHECK(matrix_units(parse_cpu_flags("flags : fpu avx2 fma avx512f avx512_vnni\n")) ==
        V{"avx2", "avx512", "avx512-vnni"});
}

TEST_CASE("agent::probe_local_host reports this machine") {
  auto f = probe_local_host("/nonexistent/dir/below/root");
  CHECK(f.cores >= 1);
  CHECK(f.memory_total_mib > 0);
  CHECK(!f.kernel.empty());
  CHECK(f.disk_free_mib > 0); // measured on the closest existing parent, "/"
  CHECK(f.clock_unix_ms > 1'700'000'000'000);
}

TEST_SUITE_END();
