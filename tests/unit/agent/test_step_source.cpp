// A worker's progress as supervise-watch reads it: the event protocol's steps and checkpoints,
// log lines matched by a step pattern, read incrementally in whole lines (real files).
#include <fstream>

#include <doctest/doctest.h>

#include "agent/step_source.hpp"
#include "tests/support/helpers.hpp"

using tpuctl::agent::compile_step_pattern;
using tpuctl::agent::FileTail;
using tpuctl::agent::StepSource;

TEST_SUITE_BEGIN("unit");

namespace {

void append(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::app | std::ios::binary) << text;
}

} // namespace

TEST_CASE("agent::FileTail reads whole lines from where it stopped; a file made anew is read "
          "from its start") {
  tpuctl::test::TempDir dir;
  const auto p = dir.path() / "f";
  FileTail tail(p.string());
  std::vector<std::string> lines;
  CHECK(!tail.read(lines)); // no file yet
  append(p, "one\ntw");
  tail.read(lines);
  CHECK(lines == std::vector<std::string>{"one"});
  append(p, "o\nthree\n");
  tail.read(lines);
  CHECK(lines == std::vector<std::string>{"one", "two", "three"});
  lines.clear();
  std::ofstream(p, std::ios::trunc) << "x\n";
  CHECK(tail.read(lines)); // shrank
  CHECK(lines == std::vector<std::string>{"x"});
  lines.clear();
  append(p, std::string(70 * 1024, 'a') + "\nafter\n"); // an over-long line is skipped
  tail.read(lines);
  CHECK(lines == std::vector<std::string>{"after"});
}

TEST_CASE("agent::StepSource: protocol steps and checkpoints, and the latest event of each kind") {
  tpuctl::test::TempDir dir;
  StepSource source(dir.path().string(), std::nullopt, 0);
  append(dir.path() / "events",
         "{\"event\": \"step\", \"step\": 0, \"time_ms\": 1000}\n"
         "not json\n"
         "{\"event\": \"checkpoint\", \"action\": \"restore\", \"step\": 0, \"seconds\": 0.25}\n"
         "{\"event\": \"step\", \"step\": 1}\n"
         "{\"event\": \"checkpoint\", \"action\": \"save\", \"step\": 1, \"seconds\": 0.5}\n"
         "{\"event\": \"compile_cache\", \"hits\": 3, \"misses\": 0}\n");
  CHECK(source.poll(5000));
  auto steps = source.take_steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].step == 0);
  CHECK(steps[0].time_ms == 1000);
  CHECK(steps[1].step == 1);
  CHECK(steps[1].time_ms == 5000); // no time given: when it was read
  CHECK(source.take_steps().empty());
  auto progress = source.progress();
  CHECK(progress["source"] == "protocol");
  CHECK(progress["steps"] == 2);
  CHECK(progress["last_step"] == 1);
  CHECK(progress["save_ms"] == 500);
  CHECK(progress["restore_ms"] == 250);
  CHECK(progress["saves"] == 1);
  CHECK(source.latest()["compile_cache"]["hits"] == 3);
  CHECK(source.latest()["step"]["step"] == 1);
  CHECK(!source.poll(6000)); // nothing new
}

TEST_CASE("agent::StepSource: log lines matching the step pattern are steps, from the attempt's "
          "start in the log; a program on the protocol is read by it alone") {
  tpuctl::test::TempDir dir;
  const auto log = dir.path() / "log";
  append(log, "completed step: 99 (an earlier attempt)\n");
  const auto start = static_cast<int64_t>(std::filesystem::file_size(log));
  append(log, "loading\ncompleted step: 0, seconds: 1.5\nnoise completed step: x\n");
  auto re = compile_step_pattern(tpuctl::agent::k_default_step_pattern);
  REQUIRE(re);
  StepSource source(dir.path().string(), *re, start);
  CHECK(source.poll(7000));
  append(log, "completed step: 1, seconds: 0.5\n");
  source.poll(7500);
  auto steps = source.take_steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].step == 0);
  CHECK(steps[0].time_ms == 7000);
  CHECK(steps[1].step == 1);
  CHECK(source.progress()["source"] == "pattern");
  // Once the program speaks the protocol, its log is no longer read for steps.
  append(dir.path() / "events", "{\"event\": \"step\", \"step\": 2, \"time_ms\": 8000}\n");
  append(log, "completed step: 3\n");
  source.poll(9000);
  steps = source.take_steps();
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].step == 2);
  CHECK(source.progress()["source"] == "protocol");
}

TEST_CASE("agent::compile_step_pattern wants a regular expression with a group") {
  CHECK(compile_step_pattern("it=([0-9]+)"));
  for (const char* bad : {"", "step \\d+", "step (\\d+"}) {
    CAPTURE(bad);
    auto r = compile_step_pattern(bad);
    REQUIRE(!r);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    CHECK(r.error().message.find("--step-pattern") == 0);
    CHECK(r.error().message.find("completed step: (\\d+)") != std::string::npos);
  }
}
