#include <doctest/doctest.h>

#include "remote/grouping.hpp"

using namespace tpuctl::remote;

namespace {

HostResult result(size_t index, std::string host, std::string out, std::string err = "") {
  HostResult r;
  r.index = index;
  r.host = std::move(host);
  r.outcome = Outcome::ok;
  r.exit_code = 0;
  r.out = std::move(out);
  r.err = std::move(err);
  return r;
}

} // namespace

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::fold_hosts folds the last number of names into ranges") {
  CHECK(fold_hosts({}) == "");
  CHECK(fold_hosts({"w3"}) == "w3");
  CHECK(fold_hosts({"w0", "w1", "w2", "w5", "w7", "w8"}) == "w[0-2,5,7-8]");
  CHECK(fold_hosts({"w2", "w0", "w1"}) == "w[0-2]");
  CHECK(fold_hosts({"w1", "db", "w0", "db"}) == "w[0-1],db");
  CHECK(fold_hosts({"127.0.0.2", "127.0.0.3", "127.0.0.4"}) == "127.0.0.[2-4]");
  CHECK(fold_hosts({"node01", "node02", "node10"}) == "node[01-02],node10");
  CHECK(fold_hosts({"rack1-host3", "rack1-host4"}) == "rack1-host[3-4]");
  CHECK(fold_hosts({"a9x", "a10x"}) == "a[9-10]x");
  CHECK(fold_hosts({"w9", "w10", "w11"}) == "w[9-11]");
}

TEST_CASE("remote::group_outputs gathers identical outputs in host order") {
  std::vector<HostResult> rs = {
      result(2, "w2", "same\n"), result(0, "w0", "same\n"),           result(1, "w1", "other\n"),
      result(3, "w3", ""),       result(4, "w4", "same\n", "warn\n"), result(5, "w5", "other\n"),
  };
  auto groups = group_outputs(rs, Stream::out);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].text == "same\n");
  CHECK(groups[0].indices == std::vector<size_t>{0, 2, 4});
  CHECK(groups[0].hosts == std::vector<std::string>{"w0", "w2", "w4"});
  CHECK(groups[1].text == "other\n");
  CHECK(groups[1].indices == std::vector<size_t>{1, 5});
  auto err_groups = group_outputs(rs, Stream::err);
  REQUIRE(err_groups.size() == 1);
  CHECK(err_groups[0].hosts == std::vector<std::string>{"w4"});
}

TEST_CASE("remote::short_reason and the outcome helpers") {
  HostResult r = result(0, "w0", "");
  CHECK(short_reason(r) == "ok");
  r.outcome = Outcome::exit_code;
  r.exit_code = 3;
  CHECK(short_reason(r) == "exit 3");
  r.outcome = Outcome::signal;
  r.signal_name = "KILL";
  CHECK(short_reason(r) == "signal KILL");
  r.outcome = Outcome::refused;
  CHECK(short_reason(r) == "connection refused");
  r.outcome = Outcome::host_key_changed;
  CHECK(short_reason(r) == "host key changed");
  CHECK(is_transport_failure(Outcome::refused));
  CHECK(is_transport_failure(Outcome::host_key_unknown));
  CHECK_FALSE(is_transport_failure(Outcome::timeout));
  CHECK_FALSE(is_transport_failure(Outcome::signal));
  CHECK(to_string(Outcome::host_key_unknown) == "host_key_unknown");
  CHECK(signal_number("KILL") == 9);
  CHECK(signal_number("SIGTERM") == 15);
  CHECK(signal_number("SEGV") == 11);
  CHECK(signal_number("NOPE") == 0);
}
