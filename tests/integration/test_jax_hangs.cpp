// Hangs of a real JAX job, through the binary: one worker sleeps before a collective, every
// process alive, no step made. tpuctl notices the missing steps, gathers every worker's Python
// stacks (faulthandler, through the streams it holds), names the worker whose stack differs,
// records the hang and restarts the job under its restart policy. Real sshd on the address block
// 127.175.x (owned by this file), real JAX from the project's Python environment.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"
#include "tests/support/jax_env.hpp"
#include "tests/support/machine.hpp"

using nlohmann::json;
using tpuctl::test::JaxEnv;
using tpuctl::test::jax_program;

TEST_SUITE_BEGIN("integration");

TEST_CASE("jax hangs: a worker that sleeps before a collective is named from the stacks, the "
          "hang recorded and the job restarted; without restarts left it fails saying so") {
  JaxEnv env(4, tpuctl::test::free_address_base("127.175.", 0, 250, 4));
  REQUIRE(env.run({"cluster", "create", "--cluster", "c", "--tpu-type", "v5litepod-16"})
              .exit_code == 0);
  // Worker 2 sleeps for an hour before step 12's all-reduce, in the first attempt only.
  const std::string job = "python3 " + jax_program("collective_steps.py") +
                          " --steps 30 --step-seconds 0.2 --hang-worker 2 --hang-step 12 "
                          "--hang-attempt 0";
  env.create_workload("c", "hang", job,
                      {"--hang-timeout", "10s", "--max-restarts", "1",
                       "--termination-grace-period-seconds", "3"});
  auto done = env.wait_for(
      "hang", [](const json& w) { return w["state"] == "SUCCEEDED" || w["state"] == "FAILED"; },
      std::chrono::seconds(300));
  INFO(env.monitor_log("hang"));
  INFO(done.dump());
  REQUIRE(done["state"] == "SUCCEEDED"); // the second attempt did not hang
  CHECK(done["restarts"] == 1);
  const json hang = done["hang"];
  REQUIRE(hang.is_object());
  CHECK(hang["attempt"] == 0);
  const std::string host = done["workers"][2]["host"].get<std::string>();
  CHECK(hang["worker"] ==
        "worker " + done["workers"][2]["node"].get<std::string>() + "/2@" + host);
  CHECK(hang["where"].get<std::string>().rfind("collective_steps.py:", 0) == 0);
  CHECK(hang["why"].get<std::string>().find("after step 12") != std::string::npos);
  // Every worker's stacks are in its log (the first attempt's part), the sleeper's in time.sleep's
  // line of the program.
  const std::string node = done["workers"][0]["node"].get<std::string>();
  for (int worker = 0; worker < 4; ++worker) {
    const std::string log = env.log_of("hang", node, worker);
    CHECK(log.find("(most recent call first)") != std::string::npos);
    CHECK(log.find("collective_steps.py\", line") != std::string::npos);
  }
  // The restart's event names the hang.
  auto events = env.run({"events", "--format", "json"});
  CHECK(events.out.find("hung: no step for") != std::string::npos);

  // No restart left: FAILED, the message naming the hang and the worker.
  env.create_workload("c", "stuck",
                      "python3 " + jax_program("collective_steps.py") +
                          " --steps 30 --step-seconds 0.2 --hang-worker 1 --hang-step 5",
                      {"--hang-timeout", "8s", "--termination-grace-period-seconds", "3"});
  auto failed = env.wait_for(
      "stuck", [](const json& w) { return w["state"] == "FAILED"; }, std::chrono::seconds(240));
  INFO(env.monitor_log("stuck"));
  REQUIRE(failed["state"] == "FAILED");
  const std::string message = failed["message"].get<std::string>();
  CHECK(message.rfind("hung: no step for ", 0) == 0);
  CHECK(message.find("worker " + failed["workers"][1]["node"].get<std::string>() + "/1@") !=
        std::string::npos);
  CHECK(message.find("'s stack differs: it is at collective_steps.py:") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}
