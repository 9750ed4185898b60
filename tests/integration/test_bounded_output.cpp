// Output of any size, through the real binary, with real sshd on the address block 127.0.254.x
// (owned by this file). Each worker prints several MiB, far past what a host's output keeps in
// memory (remote/spool.hpp: 64 KiB a stream, the rest in a temporary file): `ssh --worker=all
// --output grouped` prints it once for the four workers, byte for byte, and jsonl gives every
// worker's whole stdout; `--stdin` delivers a few MiB to every worker; `workload logs --since`
// starts where the log stood at that time. Peak memory is the benchmark's
// (bench/output_memory.sh), never a test's.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/qr_env.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"
#include "util/strings.hpp"

using tpuctl::test::contains;
using tpuctl::test::QrEnv;
using tpuctl::test::wait_until;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("integration");

namespace {

// What `yes LINE | head -c BYTES` prints.
std::string yes_output(const std::string& line, size_t bytes) {
  std::string out;
  while (out.size() < bytes) {
    out += line;
    out += '\n';
  }
  out.resize(bytes);
  return out;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

TEST_CASE("bounded output: grouped and jsonl deliver every byte of outputs far past what is "
          "kept in memory, and --stdin delivers a large input to every worker") {
  QrEnv env(4, "127.0.254.2");
  auto made = env.run({"qr", "create", "q", "--accelerator-type", "v5litepod-16"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  constexpr size_t k_bytes = 3 * 1024 * 1024 + 7; // a cut line at the end
  const std::string want = yes_output("bounded-output-line", k_bytes);
  std::string print = "yes bounded-output-line | head -c ";
  print += std::to_string(k_bytes);

  auto grouped = env.run({"ssh", "q", "--worker=all", "--output", "grouped", "--command", print});
  REQUIRE_MESSAGE(grouped.exit_code == 0, grouped.err);
  // One group for the four workers: header, then the text once, ended by a newline.
  const auto header_end = grouped.out.find("\n---------------\n", 16);
  REQUIRE(header_end != std::string::npos);
  CHECK(contains(grouped.out.substr(0, header_end), "(4)"));
  const std::string body = grouped.out.substr(header_end + 17);
  CHECK(body.size() == want.size() + 1);
  CHECK(body.substr(0, want.size()) == want);
  CHECK(body.back() == '\n');

  auto jsonl = env.run({"ssh", "q", "--worker=all", "--output", "jsonl", "--command", print});
  REQUIRE_MESSAGE(jsonl.exit_code == 0, jsonl.err);
  const auto records = tpuctl::util::split(jsonl.out, '\n');
  size_t seen = 0;
  for (const auto& line : records) {
    if (line.empty()) {
      continue;
    }
    auto r = json::parse(line);
    ++seen;
    CHECK(r["exit_code"] == 0);
    CHECK(r["stdout"].get<std::string>().size() == want.size());
    CHECK(r["stdout"].get<std::string>() == want);
    CHECK(r["stderr"] == "");
  }
  CHECK(seen == 4);

  // 5 MiB on stdin, to every worker, read whole by each.
  std::string input = yes_output("stdin-line", 5 * 1024 * 1024);
  auto piped = tpuctl::test::run_tpuctl(
      {"ssh", "q", "--worker=all", "--stdin", "--output", "grouped", "--command", "sha256sum"},
      env.vars, input);
  REQUIRE_MESSAGE(piped.exit_code == 0, piped.err);
  CHECK_MESSAGE(contains(piped.out, tpuctl::util::sha256_hex(input) + "  -"), piped.out);
  CHECK(contains(piped.out, "(4)"));
  CHECK(env.run({"qr", "delete", "q", "--force"}).exit_code == 0);
}

TEST_CASE("bounded output: workload logs --since starts where the log stood then, and --tail "
          "cuts what that leaves") {
  QrEnv env(1, "127.0.254.20");
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-4"}).exit_code ==
          0);
  const fs::path go = env.dir.path() / "go";
  const fs::path end = env.dir.path() / "end";
  const std::string command = "echo early-1; echo early-2; while [ ! -e " + go.string() +
                              " ]; do sleep 0.1; done; echo late-1; echo late-2; while [ ! -e " +
                              end.string() + " ]; do sleep 0.1; done";
  auto started = env.run({"workload", "create", "--cluster", "c", "--workload", "w", "--command",
                          command, "--format", "json"});
  REQUIRE_MESSAGE(started.exit_code == 0, started.err);
  const std::string uid = json::parse(started.out).value("uid", "");
  REQUIRE_FALSE(uid.empty());
  // The worker's log index (agent/supervise.cpp), on this machine since the pool is local.
  fs::path index;
  REQUIRE(wait_until(
      [&] {
        for (const auto& e : fs::recursive_directory_iterator(
                 env.dir.path(), fs::directory_options::skip_permission_denied)) {
          if (e.path().filename() == "log.index" && contains(e.path().string(), uid)) {
            index = e.path();
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(60)));
  // "<ms> <size>" lines: wait for the one that counts both early lines.
  const size_t early_bytes = std::string("early-1\nearly-2\n").size();
  int64_t early_at = 0;
  REQUIRE(wait_until(
      [&] {
        std::ifstream in(index);
        int64_t ms = 0, size = 0;
        while (in >> ms >> size) {
          if (size >= static_cast<int64_t>(early_bytes) && early_at == 0) {
            early_at = ms;
          }
        }
        return early_at > 0;
      },
      std::chrono::seconds(60)));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const int64_t go_at = now_ms();
  std::ofstream(go) << "go\n";
  REQUIRE(wait_until(
      [&] {
        return contains(env.run({"workload", "logs", "w"}).out, "late-2");
      },
      std::chrono::seconds(60)));
  // A time between the early lines' index entry and the late lines: only the late ones.
  const int64_t since = now_ms() - (early_at + go_at) / 2;
  auto late = env.run({"workload", "logs", "w", "--since", std::to_string(since) + "ms"});
  REQUIRE_MESSAGE(late.exit_code == 0, late.err);
  CHECK(contains(late.out, "late-1\nlate-2\n"));
  CHECK_FALSE(contains(late.out, "early"));
  auto last =
      env.run({"workload", "logs", "w", "--since", std::to_string(since) + "ms", "--tail", "1"});
  CHECK(last.out == "late-2\n");
  auto all = env.run({"workload", "logs", "w", "--since", "1h"});
  CHECK(contains(all.out, "early-1\nearly-2\n"));
  CHECK(contains(all.out, "late-2"));
  auto bad = env.run({"workload", "logs", "w", "--since", "soon"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "--since"));
  std::ofstream(end) << "end\n";
  CHECK(env.run({"cluster", "delete", "--cluster", "c", "--force"}).exit_code == 0);
}
