// Goodput by steps through the binary: a scripted job reports its steps (the event protocol,
// with the times it measured itself, and MaxText's `completed step: N` lines), fails once and
// restarts from an earlier step, and `workload describe` gives Google's badput buckets, checked
// against the same arithmetic done here on the script's own timestamps. Real sshd on the address
// block 127.174.x (owned by this file), a scratch HOME and SQLite store.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/machine.hpp"
#include "util/strings.hpp"

using nlohmann::json;

TEST_SUITE_BEGIN("integration");

namespace {

// Attempt 0 runs steps 0-8 and dies during step 8; attempt 1 resumes at step 5 (as from a
// checkpoint after step 4) and runs to step 14. Each step is a 0.4 s sleep; each attempt sleeps
// 1 s before its first step. Worker 0 reports each step's start (its own clock) on the event
// protocol and prints "T <attempt> <step> <unix ms>" for the test's own arithmetic; every worker
// prints MaxText's line too.
const char* const k_script = R"(a=$TPUCTL_WORKLOAD_ATTEMPT
sleep 1
if [ "$a" = 0 ]; then i=0; last=8; else i=5; last=14; fi
while [ $i -le $last ]; do
  now=$(date +%s%3N)
  if [ "$TPU_WORKER_ID" = 0 ]; then
    echo "{\"event\": \"step\", \"step\": $i, \"time_ms\": $now}" >> "$TPUCTL_EVENTS"
    echo "T $a $i $now"
  fi
  echo "completed step: $i, seconds: 0.4"
  sleep 0.4
  if [ "$a" = 0 ] && [ $i = 8 ]; then exit 3; fi
  i=$((i + 1))
done
)";

struct Timeline {
  std::map<int, std::map<int, int64_t>> at; // attempt -> step -> start (ms)
};

// "2026-12-07T06:18:54.837Z" (how describe writes times) as unix ms.
int64_t unix_ms(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  REQUIRE(std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                      &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) == 7);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
}

Timeline timeline_of(const std::string& log) {
  Timeline t;
  for (const auto& line : tpuctl::test::lines_starting(log, "T ")) {
    auto f = tpuctl::util::split(line, ' ');
    REQUIRE(f.size() == 4);
    t.at[std::stoi(f[1])][std::stoi(f[2])] = std::stoll(f[3]);
  }
  return t;
}

} // namespace

TEST_CASE("goodput by steps: a job that reports its steps, fails once and resumes from an "
          "earlier step gets Google's badput buckets, by arithmetic on its own timestamps") {
  tpuctl::test::WorkloadEnv env(4, tpuctl::test::free_address_base("127.174.", 0, 250, 4));
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"})
              .exit_code == 0);
  env.create_workload("c", "steps", k_script, {"--max-restarts", "1"});
  json done;
  tpuctl::test::wait_until(
      [&] {
        auto r = env.run({"workload", "describe", "steps", "--format", "json"});
        done = r.exit_code == 0 ? json::parse(r.out) : json();
        return done.is_object() && (done["state"] == "SUCCEEDED" || done["state"] == "FAILED");
      },
      std::chrono::seconds(180));
  INFO(done.dump());
  REQUIRE(done["state"] == "SUCCEEDED");
  CHECK(done["restarts"] == 1);
  const std::string node = done["workers"][0]["node"].get<std::string>();
  auto logs = env.run({"workload", "logs", "steps", "--node", node, "--worker", "0"});
  const Timeline t = timeline_of(logs.out);
  REQUIRE(t.at.count(0) == 1);
  REQUIRE(t.at.count(1) == 1);
  const auto& a0 = t.at.at(0);
  const auto& a1 = t.at.at(1);
  REQUIRE(a0.size() == 9);
  REQUIRE(a1.size() == 10);

  const json g = done["goodput"];
  REQUIRE(g["kind"] == "steps");
  const json s = g["steps"];
  const json bad = s["badput"];
  // The same arithmetic, on the script's timestamps: step times are differences of starts.
  std::vector<int64_t> times;
  for (int n = 1; n <= 8; ++n) {
    times.push_back(a0.at(n) - a0.at(n - 1));
  }
  for (int n = 6; n <= 14; ++n) {
    times.push_back(a1.at(n) - a1.at(n - 1));
  }
  CHECK(s["disruptions"] == 1);
  // Steps 5-7 of attempt 0 were done again: from step 5's start to step 8's (the last one).
  CHECK(bad["wasted_progress_from_disruption_ms"] == a0.at(8) - a0.at(5));
  // From that last step's start to the restarted attempt's start (as describe gives it): after
  // attempt 0 died (step 8 sleeps 0.4 s, then it exits).
  const int64_t start0 = unix_ms(done["started_at"].get<std::string>());
  const int64_t start1 = unix_ms(done["attempt_started_at"].get<std::string>());
  const int64_t recovery = bad["infrastructure_recovery_from_disruption_ms"].get<int64_t>();
  CHECK(recovery == start1 - a0.at(8));
  CHECK(recovery >= 400);
  // Productive: steps 0-4 of attempt 0 (their times), steps 5-13 of attempt 1, and step 14, the
  // last, closed by the end; each attempt's first step up to the ideal step time only.
  const int64_t ideal = s["ideal_step_ms"].get<int64_t>();
  CHECK(ideal >= *std::min_element(times.begin(), times.end()));
  CHECK(ideal <= *std::max_element(times.begin(), times.end()));
  int64_t productive_known = 0;
  for (int n = 1; n <= 4; ++n) {
    productive_known += a0.at(n + 1) - a0.at(n);
  }
  productive_known += std::min(a0.at(1) - a0.at(0), ideal);
  for (int n = 6; n <= 13; ++n) {
    productive_known += a1.at(n + 1) - a1.at(n);
  }
  productive_known += std::min(a1.at(6) - a1.at(5), ideal);
  const int64_t productive = s["productive_ms"].get<int64_t>();
  const int64_t last_step = productive - productive_known; // step 14: its start to the end
  CHECK(last_step >= 400);
  CHECK(last_step <= 400 + 20000); // the end is when the monitor saw it end
  // Every millisecond in one bucket, and the headline is productive / total.
  int64_t sum = productive;
  for (const auto& [name, ms] : bad.items()) {
    sum += ms.get<int64_t>();
  }
  CHECK(sum == s["total_ms"].get<int64_t>());
  CHECK(g["goodput"].get<double>() ==
        doctest::Approx(static_cast<double>(productive) / s["total_ms"].get<int64_t>())
            .epsilon(0.001));
  CHECK(s["last_productive_step"] == 14);
  // Start-up: each attempt's start to its first step (its 1 s sleep), and what each first step
  // took beyond the ideal.
  const int64_t startup = (a0.at(0) - start0) + (a1.at(5) - start1) +
                          std::max<int64_t>(0, a0.at(1) - a0.at(0) - ideal) +
                          std::max<int64_t>(0, a1.at(6) - a1.at(5) - ideal);
  CHECK(bad["program_startup_ms"].get<int64_t>() == startup);
  auto text = env.run({"workload", "describe", "steps"});
  CHECK(text.out.find("goodput by steps: ") != std::string::npos);
  CHECK(text.out.find("1 disruption, ideal step ") != std::string::npos);
}

TEST_CASE("goodput by steps: MaxText's `completed step: N` lines are steps by default, another "
          "--step-pattern reads other lines, and a bad pattern is one line that stores nothing") {
  tpuctl::test::WorkloadEnv env(4, tpuctl::test::free_address_base("127.174.", 0, 250, 4));
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"})
              .exit_code == 0);
  env.create_workload("c", "maxtext",
                      "for i in 0 1 2 3 4 5; do echo \"completed step: $i, loss: 1.0\"; sleep 0.3; "
                      "done");
  env.create_workload("c", "mine",
                      "for i in 10 20 30; do echo \"it=$i\"; sleep 0.3; done",
                      {"--step-pattern", "^it=([0-9]+)$", "--num-slices", "1"});
  for (const char* name : {"maxtext", "mine"}) {
    CAPTURE(name);
    json done;
    tpuctl::test::wait_until(
        [&] {
          auto r = env.run({"workload", "describe", name, "--format", "json"});
          done = r.exit_code == 0 ? json::parse(r.out) : json();
          return done.is_object() && done["state"] == "SUCCEEDED";
        },
        std::chrono::seconds(120));
    REQUIRE(done["state"] == "SUCCEEDED");
    CHECK(done["goodput"]["kind"] == "steps");
    CHECK(done["goodput"]["steps"]["last_productive_step"] ==
          (std::string(name) == "maxtext" ? 5 : 30));
    CHECK(done["goodput"]["steps"]["disruptions"] == 0);
    CHECK(done["workers"][0]["progress"]["source"] == "pattern");
  }
  // No steps: goodput by phases, said so.
  env.create_workload("c", "plain", "sleep 1", {"--step-pattern", ""});
  json plain;
  tpuctl::test::wait_until(
      [&] {
        plain = env.run_json({"workload", "describe", "plain"});
        return plain["state"] == "SUCCEEDED";
      },
      std::chrono::seconds(60));
  CHECK(plain["goodput"]["kind"] == "phases");
  CHECK(plain["goodput"].contains("steps") == false);

  auto bad = env.run({"workload", "create", "--cluster", "c", "--workload", "bad", "--command",
                      "true", "--step-pattern", "step (\\d+"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.rfind("tpuctl: error: --step-pattern 'step (\\d+' does not compile", 0) == 0);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  auto nogroup = env.run({"workload", "create", "--cluster", "c", "--workload", "bad",
                          "--command", "true", "--step-pattern", "step \\d+"});
  CHECK(nogroup.exit_code == 2);
  CHECK(nogroup.err.find("has no group") != std::string::npos);
  CHECK(env.run({"workload", "describe", "bad"}).exit_code == 4);
}
