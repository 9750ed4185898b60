#include <sstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli/fanout_output.hpp"
#include "remote/line_splitter.hpp"
#include "util/strings.hpp"

using namespace tpuctl;
using remote::HostResult;
using remote::Outcome;

namespace {

HostResult make(size_t index, std::string host, Outcome outcome, std::string out = "",
                std::string err = "") {
  HostResult r;
  r.index = index;
  r.host = std::move(host);
  r.outcome = outcome;
  r.exit_code = outcome == Outcome::ok ? 0 : -1;
  r.out = std::move(out);
  r.err = std::move(err);
  r.duration_ms = 10 + static_cast<int64_t>(index);
  return r;
}

HostResult exited(size_t index, std::string host, int code) {
  HostResult r = make(index, std::move(host), code == 0 ? Outcome::ok : Outcome::exit_code);
  r.exit_code = code;
  return r;
}

HostResult failed(size_t index, std::string host, Outcome outcome, std::string error) {
  HostResult r = make(index, std::move(host), outcome);
  r.error = std::move(error);
  return r;
}

HostResult signalled(size_t index, std::string host, std::string name, int number) {
  HostResult r = make(index, std::move(host), Outcome::signal);
  r.signal_name = std::move(name);
  r.signal_number = number;
  return r;
}

} // namespace

TEST_SUITE_BEGIN("cli");

TEST_CASE("cli::parse_fanout_output accepts the three modes and names a bad one") {
  CHECK(cli::parse_fanout_output("prefixed").value() == cli::FanoutOutput::prefixed);
  CHECK(cli::parse_fanout_output("grouped").value() == cli::FanoutOutput::grouped);
  CHECK(cli::parse_fanout_output("jsonl").value() == cli::FanoutOutput::jsonl);
  auto bad = cli::parse_fanout_output("json");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  CHECK(bad.error().message ==
        "--output: 'json' is not an output mode (use prefixed, grouped or jsonl)");
}

TEST_CASE("cli::FanoutPrinter prefixed: interleaved hosts, a 200 KB line, no final newline") {
  std::ostringstream out, err;
  cli::FanoutPrinter printer(cli::FanoutOutput::prefixed, out, err);
  auto cb = printer.callbacks();
  REQUIRE(cb.on_line);
  const std::string big(200000, 'x');
  const std::string a_text = "a1\n" + big + "\na3 no newline";
  const std::string b_text = "b1\nb2\n";
  remote::LineSplitter sa, sb;
  auto emit_for = [&](size_t index, const std::string& host, remote::Stream stream) {
    return [&cb, index, host, stream](std::string_view text, bool complete) {
      cb.on_line(remote::HostLine{index, host, stream, text, complete});
    };
  };
  remote::LineSplitter::Emit ea = emit_for(0, "w0", remote::Stream::out);
  remote::LineSplitter::Emit eb = emit_for(1, "w1", remote::Stream::out);
  // Packets of 7 bytes from each host, alternating, as a network would deliver them.
  for (size_t off = 0; off < std::max(a_text.size(), b_text.size()); off += 7) {
    if (off < a_text.size()) {
      sa.feed(std::string_view(a_text).substr(off, 7), ea);
    }
    if (off < b_text.size()) {
      sb.feed(std::string_view(b_text).substr(off, 7), eb);
    }
  }
  sa.finish(ea);
  sb.finish(eb);
  cb.on_line(remote::HostLine{1, "w1", remote::Stream::err, "warning: x", true});
  std::vector<std::string> lines = util::split(out.str(), '\n');
  CHECK(lines.back().empty()); // the output ends with a newline
  lines.pop_back();
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{"[w0] a1", "[w0] a3 no newline", "[w0] " + big, "[w1] b1",
                                          "[w1] b2"});
  CHECK(err.str() == "[w1] warning: x\n");
  printer.finish({make(0, "w0", Outcome::ok), make(1, "w1", Outcome::ok)});
  CHECK(err.str() == "[w1] warning: x\n"); // no summary when all succeeded
}

TEST_CASE("cli::grouped_text shows identical outputs once with the folded host list") {
  std::vector<HostResult> rs = {
      make(0, "w0", Outcome::ok, "ok\n"),
      make(1, "w1", Outcome::ok, "ok\n"),
      make(2, "w2", Outcome::ok, "different\nlines"),
      make(3, "w3", Outcome::ok, "ok\n", "careful\n"),
      make(4, "w4", Outcome::ok, ""),
  };
  CHECK(cli::grouped_text(rs, remote::Stream::out) == "---------------\n"
                                                      "w[0-1,3] (3)\n"
                                                      "---------------\n"
                                                      "ok\n"
                                                      "---------------\n"
                                                      "w2 (1)\n"
                                                      "---------------\n"
                                                      "different\n"
                                                      "lines\n");
  CHECK(cli::grouped_text(rs, remote::Stream::err) == "---------------\n"
                                                      "w3 (1) stderr\n"
                                                      "---------------\n"
                                                      "careful\n");
  std::ostringstream out, err;
  cli::FanoutPrinter printer(cli::FanoutOutput::grouped, out, err);
  CHECK_FALSE(printer.callbacks().on_line); // nothing is printed live
  printer.finish(rs);
  CHECK(out.str() == cli::grouped_text(rs, remote::Stream::out));
  CHECK(err.str() == cli::grouped_text(rs, remote::Stream::err));
}

TEST_CASE("cli::jsonl_record has exactly the documented fields") {
  HostResult ok_host = exited(3, "w3", 0);
  ok_host.out = "hello\n";
  ok_host.err = "bad utf8 \xff\xfe end";
  auto j = nlohmann::ordered_json::parse(cli::jsonl_record(ok_host));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    keys.push_back(it.key());
  }
  CHECK(keys == std::vector<std::string>{"node", "slice", "worker", "host", "index", "outcome",
                                         "exit_code", "signal", "error", "duration_ms", "stdout",
                                         "stderr"});
  CHECK(j["node"].is_null()); // a pool's host: no slice
  CHECK(j["slice"].is_null());
  CHECK(j["worker"].is_null());
  CHECK(j["host"] == "w3");
  CHECK(j["outcome"] == "ok");
  CHECK(j["index"] == 3);
  CHECK(j["exit_code"] == 0);
  CHECK(j["signal"].is_null());
  CHECK(j["error"].is_null());
  CHECK(j["duration_ms"] == 13);
  CHECK(j["stdout"] == "hello\n");
  CHECK(j["stderr"] == "bad utf8 \xEF\xBF\xBD\xEF\xBF\xBD end"); // U+FFFD twice

  auto k = nlohmann::json::parse(cli::jsonl_record(signalled(1, "w1", "KILL", 9)));
  CHECK(k["exit_code"].is_null());
  CHECK(k["signal"] == "KILL");
  CHECK(k["outcome"] == "signal");
  auto t = nlohmann::json::parse(
      cli::jsonl_record(failed(2, "w2", Outcome::timeout, "timed out after 2s")));
  CHECK(t["exit_code"].is_null());
  CHECK(t["error"] == nlohmann::json{{"code", "timeout"}, {"message", "timed out after 2s"}});
  CHECK(t["outcome"] == "timeout");
  CHECK(cli::jsonl_record(exited(0, "w0", 3)).find('\n') == std::string::npos);

  std::ostringstream out, err;
  cli::FanoutPrinter printer(cli::FanoutOutput::jsonl, out, err);
  auto cb = printer.callbacks();
  REQUIRE(cb.on_host_done);
  cb.on_host_done(exited(1, "w1", 0));
  cb.on_host_done(exited(0, "w0", 2));
  CHECK(out.str() == cli::jsonl_record(exited(1, "w1", 0)) + "\n" +
                         cli::jsonl_record(exited(0, "w0", 2)) + "\n");
}

TEST_CASE("cli::jsonl_record names a slice's worker by node, slice, worker and host") {
  // The fan-out shows the worker label; jsonl separates its parts, and `index` stays the job's
  // position (here not the worker id).
  HostResult r = exited(5, "ms-1/2@node07", 0);
  const cli::JobIdentity id{"ms-1", 1, 2, "node07"};
  const nlohmann::ordered_json extra{{"source", "a.bin"}, {"destination", "~/a.bin"}};
  auto j = nlohmann::json::parse(cli::jsonl_record(r, &id, &extra));
  CHECK(j["node"] == "ms-1");
  CHECK(j["slice"] == 1);
  CHECK(j["worker"] == 2);
  CHECK(j["host"] == "node07");
  CHECK(j["index"] == 5);
  CHECK(j["source"] == "a.bin");
  CHECK(j["destination"] == "~/a.bin");

  std::ostringstream out, err;
  cli::FanoutPrinter printer(cli::FanoutOutput::jsonl, out, err,
                             {cli::JobIdentity{"ms-0", 0, 0, "node01"}});
  printer.callbacks().on_host_done(exited(0, "ms-0/0@node01", 3));
  printer.finish({exited(0, "ms-0/0@node01", 3)});
  CHECK(nlohmann::json::parse(out.str())["worker"] == 0);
  CHECK(err.str() == "tpuctl: 1 of 1 workers failed: ms-0/0@node01 (exit 3)\n");
}

TEST_CASE("cli::failure_report names every failed host and why, in one summary line") {
  std::vector<HostResult> rs = {
      exited(0, "w0", 0),
      failed(1, "w1", Outcome::refused, "connection refused ([127.0.0.3]:2222)"),
      exited(2, "w2", 3),
      signalled(3, "w3", "KILL", 9),
      exited(4, "w4", 3),
      failed(5, "w5", Outcome::timeout, "timed out after 2s; the remote command was killed"),
  };
  CHECK(cli::failure_report(rs) ==
        "tpuctl: w1: connection refused ([127.0.0.3]:2222)\n"
        "tpuctl: w5: timed out after 2s; the remote command was killed\n"
        "tpuctl: 5 of 6 hosts failed: w1 (connection refused), w[2,4] (exit 3), "
        "w3 (signal KILL), w5 (timed out)\n");
  CHECK(cli::failure_report({exited(0, "w0", 0)}).empty());

  std::vector<HostResult> many;
  for (size_t i = 0; i < 25; ++i) {
    many.push_back(failed(i, "w" + std::to_string(i), Outcome::unreachable, "no route"));
  }
  std::string report = cli::failure_report(many);
  CHECK(report.find("tpuctl: w19: no route\n") != std::string::npos);
  CHECK(report.find("tpuctl: w20:") == std::string::npos);
  CHECK(report.find("tpuctl: ... and 5 more (--output=jsonl shows every host)\n") !=
        std::string::npos);
  CHECK(util::starts_with(report.substr(report.rfind("tpuctl: 25")),
                          "tpuctl: 25 of 25 hosts failed: w[0-24] (unreachable)\n"));
}

TEST_CASE("cli::broadcast_exit_status is the first failed host's status in job order") {
  CHECK(cli::host_exit_status(exited(0, "a", 0)) == 0);
  CHECK(cli::host_exit_status(exited(0, "a", 3)) == 3);
  CHECK(cli::host_exit_status(signalled(0, "a", "KILL", 9)) == 137);
  CHECK(cli::host_exit_status(signalled(0, "a", "TERM", 15)) == 143);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::timeout, "")) == 124);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::interrupted, "")) == 130);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::refused, "")) == 255);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::unreachable, "")) == 255);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::error, "")) == 255);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::auth, "")) == 5);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::host_key_unknown, "")) == 5);
  CHECK(cli::host_exit_status(failed(0, "a", Outcome::host_key_changed, "")) == 5);

  CHECK(cli::broadcast_exit_status({}) == 0);
  CHECK(cli::broadcast_exit_status({exited(0, "a", 0), exited(1, "b", 0)}) == 0);
  // Job order is the index, not the position in the vector.
  std::vector<HostResult> rs = {failed(2, "c", Outcome::auth, "denied"), exited(0, "a", 0),
                                signalled(1, "b", "KILL", 9)};
  CHECK(cli::broadcast_exit_status(rs) == 137);
}
