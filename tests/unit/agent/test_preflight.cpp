#include <doctest/doctest.h>

#include "agent/preflight.hpp"
#include "kernels/gemm.hpp"

using namespace tpuctl::agent;

TEST_SUITE_BEGIN("agent");

TEST_CASE("agent::parse_preflight_hello reads its own hello and rejects anything else") {
  CHECK(parse_preflight_hello("tpuctl-preflight 0") == 0);
  CHECK(parse_preflight_hello("tpuctl-preflight 63") == 63);
  std::string hello = preflight_hello(7);
  CHECK(hello.back() == '\n');
  CHECK(parse_preflight_hello(hello.substr(0, hello.size() - 1)) == 7);
  CHECK(parse_preflight_hello("SSH-2.0-OpenSSH_9.2") == -1);
  CHECK(parse_preflight_hello("tpuctl-preflight ") == -1);
  CHECK(parse_preflight_hello("tpuctl-preflight -1") == -1);
  CHECK(parse_preflight_hello("tpuctl-preflight 1x") == -1);
  CHECK(parse_preflight_hello("tpuctl-preflight 99999999999999999999") == -1);
}

TEST_CASE("agent::validate_preflight_options reports every bad value") {
  PreflightOptions o;
  o.hostnames = {"10.0.0.1", "10.0.0.2"};
  o.worker = 1;
  CHECK(validate_preflight_options(o));

  o.worker = 2;
  o.port = 0;
  o.timeout = std::chrono::milliseconds(0);
  auto bad = validate_preflight_options(o);
  REQUIRE(!bad);
  CHECK(bad.error().kind == tpuctl::ErrorKind::usage);
  auto messages = bad.error().all_messages();
  REQUIRE(messages.size() == 3);
  CHECK(messages[0].find("--worker: '2'") != std::string::npos);
  CHECK(messages[0].find("use 0 to 1") != std::string::npos);
  CHECK(messages[1].find("--port: '0'") != std::string::npos);
  CHECK(messages[2].find("--timeout") != std::string::npos);

  PreflightOptions empty;
  empty.hostnames = {"a", ""};
  auto e = validate_preflight_options(empty);
  REQUIRE(!e);
  CHECK(e.error().message.find("entry 1 is empty") != std::string::npos);
  CHECK(!run_preflight(empty));
}

TEST_CASE("agent::run_kernel_check passes on this host and catches one wrong element") {
  auto good = run_kernel_check();
  CHECK(good.ran);
  CHECK(good.ok);
  CHECK(good.mismatches == 0);
  CHECK(good.m == 64);
  CHECK(good.isa == tpuctl::kernels::to_string(
                        *tpuctl::kernels::selected_isa(tpuctl::kernels::GemmDtype::int8)));
  auto bad = run_kernel_check(true);
  CHECK(!bad.ok);
  CHECK(bad.mismatches == 1);
}

TEST_CASE("agent::PreflightResult::ok needs the listener, every peer and a passing kernel") {
  PreflightResult r;
  CHECK(r.ok());
  r.kernel.ran = true;
  CHECK(!r.ok());
  r.kernel.ok = true;
  CHECK(r.ok());
  r.unreachable.push_back(PeerProblem{1, "10.0.0.2:8476", "connection refused"});
  CHECK(!r.ok());
  r.unreachable.clear();
  r.bind_error = "address in use";
  CHECK(!r.ok());
}

TEST_SUITE_END();
