// The ssh options `ssh`, `queued-resources ssh` and `tpu-vm ssh` take (cli/ssh_args.hpp):
// --ssh-flag values split on whitespace as gcloud splits them, the words after `--` read as ssh
// reads them (options, then the command), getopt's bundling and attached arguments, and one
// line naming any other ssh option.
#include <doctest/doctest.h>

#include "cli/ssh_args.hpp"

using namespace tpuctl;
using namespace tpuctl::cli;
using Words = std::vector<std::string>;

TEST_SUITE_BEGIN("unit");

TEST_CASE("cli::parse_ssh_args reads -L, -R, -N and -4 as ssh does, and names any other option") {
  SUBCASE("the profiling guide's --ssh-flag: split on whitespace") {
    auto a = parse_ssh_args({"-4 -L 9001:localhost:9001"}, {});
    REQUIRE(a);
    CHECK(a->ipv4);
    CHECK_FALSE(a->no_command);
    REQUIRE(a->forwards.size() == 1);
    CHECK(a->forwards[0].kind == remote::ForwardKind::local);
    CHECK(a->forwards[0].port == 9001);
    CHECK(a->options == Words{"-4", "-L", "9001:localhost:9001"});
    CHECK(a->command.empty());
  }
  SUBCASE("after '--': options, then the command, which may hold dashes") {
    auto a = parse_ssh_args({}, {"-L6006:localhost:6006", "-R", "0:localhost:80", "ls", "-l"});
    REQUIRE(a);
    REQUIRE(a->forwards.size() == 2);
    CHECK(a->forwards[0].port == 6006);
    CHECK(a->forwards[1].kind == remote::ForwardKind::remote);
    CHECK(a->command == Words{"ls", "-l"});
    auto ended = parse_ssh_args({}, {"-N", "--", "-x"});
    REQUIRE(ended);
    CHECK(ended->no_command);
    CHECK(ended->command == Words{"-x"});
    auto plain = parse_ssh_args({}, {"echo", "hi"});
    REQUIRE(plain);
    CHECK_FALSE(plain->any());
    CHECK(plain->command == Words{"echo", "hi"});
  }
  SUBCASE("getopt's bundling; --ssh-flag's empty parts and '--' dropped as gcloud drops them") {
    auto a = parse_ssh_args({"", "  -- ", "-4NL", "1:h:2"}, {});
    REQUIRE(a);
    CHECK(a->ipv4);
    CHECK(a->no_command);
    REQUIRE(a->forwards.size() == 1);
    CHECK(a->forwards[0].host == "h");
    auto repeated = parse_ssh_args({"-L 1:h:2", "-L 3:h:4"}, {"-N"});
    REQUIRE(repeated);
    CHECK(repeated->forwards.size() == 2);
    CHECK(repeated->no_command);
  }
  SUBCASE("refused, one line naming the option and what to do instead") {
    const std::vector<std::pair<std::pair<Words, Words>, std::string>> bad = {
        {{{"-vvv"}, {}}, "ssh option '-v' is not supported"},
        {{{}, {"-o", "ForwardAgent=yes"}}, "ssh option '-o' is not supported"},
        {{{"-D 1080"}, {}}, "ssh option '-D' is not supported"},
        {{{"-4x"}, {}}, "ssh option '-x' is not supported"},
        {{{}, {"--foo"}}, "ssh option '--foo' is not supported"},
        {{{"-L"}, {}}, "ssh option -L needs a forward after it"},
        {{{}, {"-R"}}, "ssh option -R needs a forward after it"},
        {{{"-L abc"}, {}}, "-L 'abc' is not a forward"},
        {{{"host"}, {}}, "--ssh-flag: 'host' is not an ssh option"},
    };
    for (const auto& row : bad) {
      const std::string& says = row.second;
      CAPTURE(says);
      auto a = parse_ssh_args(row.first.first, row.first.second);
      REQUIRE_FALSE(a);
      CHECK(a.error().kind == ErrorKind::usage);
      CHECK(a.error().message.find(says) != std::string::npos);
      CHECK(a.error().message.find('\n') == std::string::npos);
    }
    auto unsupported = parse_ssh_args({"-v"}, {});
    REQUIRE_FALSE(unsupported);
    CHECK(unsupported.error().message.find("instead") != std::string::npos);
  }
}
