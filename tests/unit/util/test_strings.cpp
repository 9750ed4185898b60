#include <doctest/doctest.h>

#include "util/strings.hpp"

using namespace tpuctl;
using namespace tpuctl::util;

TEST_SUITE_BEGIN("util");

TEST_CASE("util::split and join round-trip, keeping empty fields") {
  CHECK(split("a,,b", ',') == std::vector<std::string>{"a", "", "b"});
  CHECK(split("", ',') == std::vector<std::string>{""});
  CHECK(join({"a", "b", "c"}, ", ") == "a, b, c");
}

TEST_CASE("util::printable and escape_controls show control characters as \\xNN") {
  CHECK(printable("a\nb\x1b[2J") == "a\\x0ab\\x1b[2J");
  CHECK(printable("\xc3\xa4") == "\\xc3\\xa4");
  CHECK(printable(std::string(100, 'x')) == std::string(80, 'x') + "...");
  CHECK(escape_controls("a\nb\x7f \xc3\xa4") == "a\\x0ab\\x7f \xc3\xa4");
  CHECK(escape_controls(std::string(100, 'x')) == std::string(100, 'x'));
}

TEST_CASE("util::parse_int") {
  SUBCASE("accepts whole numbers in range") {
    CHECK(*parse_int("42", "--n", 0, 100) == 42);
  }
  SUBCASE("rejects trailing junk and names the flag and value") {
    auto r = parse_int("4x", "--port", 1, 65535);
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK(r.error().message == "--port: '4x' is not a whole number");
  }
  SUBCASE("rejects out of range with the allowed range") {
    auto r = parse_int("0", "--hosts", 1, 256);
    REQUIRE(!r);
    CHECK(r.error().message == "--hosts: 0 is out of range (must be [1, 256])");
  }
  SUBCASE("rejects the empty string") {
    CHECK(!parse_int("", "--n"));
  }
}

TEST_CASE("util::parse_int_list") {
  CHECK(*parse_int_list("4,64", "--shape", 1, 1 << 20) == std::vector<int64_t>{4, 64});
  CHECK(!parse_int_list("4,,64", "--shape", 1, 100));
  CHECK(!parse_int_list("4,0", "--shape", 1, 100));
}

TEST_CASE("util::parse_duration") {
  using namespace std::chrono;
  CHECK(*parse_duration("90s", "--timeout") == seconds(90));
  CHECK(*parse_duration("15m", "--timeout") == minutes(15));
  CHECK(*parse_duration("1h30m", "--timeout") == minutes(90));
  CHECK(*parse_duration("2d", "--timeout") == hours(48));
  CHECK(*parse_duration("250ms", "--timeout") == milliseconds(250));
  CHECK(*parse_duration("7", "--timeout") == seconds(7));
  for (const char* bad : {"", "s", "5x", "1h 2m", "-3s", "5s5"}) {
    CAPTURE(bad);
    auto r = parse_duration(bad, "--timeout");
    CHECK(!r);
  }
  CHECK(parse_duration("5x", "--timeout").error().message.find("'5x'") != std::string::npos);
}

TEST_CASE("util::parse_duration rejects what it cannot represent (fuzz/regressions/duration)") {
  using namespace std::chrono;
  SUBCASE("a number too large for int64 milliseconds is an error, not undefined behaviour") {
    auto r = parse_duration("86888888088888086", "--timeout"); // 8.7e19 ms
    REQUIRE(!r);
    CHECK(r.error().message == "--timeout: '86888888088888086' is too long (at most 876000h, "
                               "36500d)");
    CHECK(!parse_duration("99999999999999999999999d", "--timeout"));
    CHECK(!parse_duration("36500d1ms", "--timeout"));
    CHECK(*parse_duration("36500d", "--timeout") == k_max_duration);
    // Many parts that each fit but add up past the limit.
    std::string many;
    for (int i = 0; i < 40; ++i) {
      many += "1000d";
    }
    CHECK(!parse_duration(many, "--timeout"));
  }
  SUBCASE("a number is one run of digits with at most one dot") {
    CHECK(*parse_duration("1.5s", "--timeout") == milliseconds(1500));
    CHECK(*parse_duration(".5s", "--timeout") == milliseconds(500));
    for (const char* bad : {"1.2.3s", ".", "..5s", "1..5m", "1.5.h"}) {
      CAPTURE(bad);
      CHECK(!parse_duration(bad, "--timeout"));
    }
  }
}

TEST_CASE("util::nearest suggests close names and prefixes, best first") {
  std::vector<std::string> cmds{"topology", "kernel", "queued-resources", "qr", "version"};
  CHECK(nearest("topolgy", cmds).front() == "topology");
  CHECK(nearest("qu", cmds).front() == "queued-resources");
  CHECK(nearest("zzzzzzzzz", cmds).empty());
  CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_SUITE_END();

TEST_CASE("util::counted reads right for one, for none and for many") {
  CHECK(util::counted(1, "host") == "1 host");
  CHECK(util::counted(0, "host") == "0 hosts");
  CHECK(util::counted(256, "worker") == "256 workers");
  CHECK(util::counted(2, "queued resource") == "2 queued resources");
  CHECK(util::counted(3, "child", "children") == "3 children");
  CHECK(util::counted(1, "child", "children") == "1 child");
}
