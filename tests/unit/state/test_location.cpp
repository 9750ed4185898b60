// Choosing the state store: --state URL forms, the default path, network filesystems.
#include <fstream>
#include <sys/stat.h>

#include <doctest/doctest.h>

#include "state/location.hpp"
#include "tests/support/helpers.hpp"

using namespace tpuctl;
using namespace tpuctl::state;

namespace {

PathEnvironment env() {
  PathEnvironment e;
  e.home = "/home/ada";
  e.cwd = "/work/project";
  return e;
}

std::string path_of(std::string_view url, const PathEnvironment& e = env()) {
  auto loc = parse_state_url(url, e);
  REQUIRE_MESSAGE(loc, (loc ? "" : loc.error().message));
  CHECK(loc->backend == Backend::sqlite);
  return loc->path;
}

Error error_of(std::string_view url) {
  auto loc = parse_state_url(url, env());
  REQUIRE(!loc);
  return loc.error();
}

} // namespace

TEST_SUITE_BEGIN("state");

TEST_CASE("state::parse_state_url accepts every sqlite form and makes paths absolute") {
  CHECK(path_of("sqlite:/var/lib/tpuctl/state.db") == "/var/lib/tpuctl/state.db");
  CHECK(path_of("sqlite:///var/lib/tpuctl/state.db") == "/var/lib/tpuctl/state.db");
  CHECK(path_of("sqlite:state.db") == "/work/project/state.db");
  CHECK(path_of("sqlite:../other/./s.db") == "/work/other/s.db");
  CHECK(path_of("SQLite:/x.db") == "/x.db");
  CHECK(path_of("/abs/state.db") == "/abs/state.db");
  CHECK(path_of("./state.db") == "/work/project/state.db");
  CHECK(path_of("state.db") == "/work/project/state.db");
  CHECK(path_of("dir/with:colon.db") == "/work/project/dir/with:colon.db");
  CHECK(path_of("~/tpuctl.db") == "/home/ada/tpuctl.db");
  CHECK(path_of("sqlite:~/tpuctl.db") == "/home/ada/tpuctl.db");
  auto loc = parse_state_url("sqlite:state.db", env());
  REQUIRE(loc);
  CHECK(loc->url() == "sqlite:/work/project/state.db");
  CHECK(!loc->is_default);
}

TEST_CASE("state::parse_state_url with no URL uses XDG_STATE_HOME, else ~/.local/state") {
  PathEnvironment e = env();
  SUBCASE("XDG_STATE_HOME set") {
    e.xdg_state_home = "/xdg/state";
    auto loc = parse_state_url("", e);
    REQUIRE(loc);
    CHECK(loc->path == "/xdg/state/tpuctl/state.db");
    CHECK(loc->is_default);
  }
  SUBCASE("XDG_STATE_HOME unset") {
    CHECK(path_of("", e) == "/home/ada/.local/state/tpuctl/state.db");
  }
  SUBCASE("a relative XDG_STATE_HOME is ignored, as the XDG spec says") {
    e.xdg_state_home = "relative/state";
    CHECK(path_of("", e) == "/home/ada/.local/state/tpuctl/state.db");
  }
  SUBCASE("neither: a clear error saying how to choose a path") {
    e.home.clear();
    auto loc = parse_state_url("", e);
    REQUIRE(!loc);
    CHECK(loc.error().message.find("--state sqlite:PATH") != std::string::npos);
  }
}

TEST_CASE("state::PathEnvironment::from_process reads XDG_STATE_HOME and HOME") {
  tpuctl::test::TempDir tmp;
  std::string saved_xdg = std::getenv("XDG_STATE_HOME") ? std::getenv("XDG_STATE_HOME") : "";
  bool had_xdg = std::getenv("XDG_STATE_HOME") != nullptr;
  ::setenv("XDG_STATE_HOME", tmp.path().c_str(), 1);
  auto e = PathEnvironment::from_process();
  CHECK(path_of("", e) == (tmp.path() / "tpuctl" / "state.db").string());
  CHECK(!e.home.empty());
  CHECK(!e.cwd.empty());
  if (had_xdg) {
    ::setenv("XDG_STATE_HOME", saved_xdg.c_str(), 1);
  } else {
    ::unsetenv("XDG_STATE_HOME");
  }
}

TEST_CASE("state::parse_state_url parses etcd endpoints") {
  auto loc = parse_state_url("etcd://10.0.0.1:2379,10.0.0.2:22379", env());
  REQUIRE(loc);
  CHECK(loc->backend == Backend::etcd);
  CHECK(loc->endpoints ==
        std::vector<std::string>{"http://10.0.0.1:2379", "http://10.0.0.2:22379"});
  CHECK(loc->prefix == "/tpuctl/v1/");
  CHECK(loc->url() == "etcd://10.0.0.1:2379,10.0.0.2:22379/tpuctl/v1/");

  auto tls = parse_state_url("etcd+https://[::1]:2379,etcd.local/team-a", env());
  REQUIRE(tls);
  CHECK(tls->endpoints ==
        std::vector<std::string>{"https://[::1]:2379", "https://etcd.local:2379"});
  CHECK(tls->prefix == "/team-a/");
  CHECK(tls->url() == "etcd+https://[::1]:2379,etcd.local:2379/team-a/");
}

TEST_CASE("state::parse_state_url rejects malformed URLs as usage errors naming the URL") {
  struct Bad {
    const char* url;
    const char* why;
  };
  const Bad cases[] = {
      {"sqlite:", "has no path"},
      {"sqlite://db-host/state.db", "names a host"},
      {"sqlite:/tmp/dir/", "names a directory"},
      {"foo:bar", "unknown scheme 'foo'"},
      {"file:/x.db", "unknown scheme 'file'"},
      {"etcd:h:2379", "must be written etcd://HOST:PORT"},
      {"etcd://", "names no etcd endpoint"},
      {"etcd://h:99999", "invalid port '99999'"},
      {"etcd://h:abc", "invalid port 'abc'"},
      {"etcd://:2379", "empty etcd host"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.url);
    Error e = error_of(c.url);
    CHECK(e.kind == ErrorKind::usage);
    CHECK(e.message.rfind(std::string("state store url '") + c.url + "' ", 0) == 0);
    CHECK(e.message.find(c.why) != std::string::npos);
    CHECK(e.message.find("use sqlite:PATH, a file path, or etcd://HOST:PORT") != std::string::npos);
  }
}

TEST_CASE("state::parse_state_url accepts only locations whose url() reads back the same "
          "(fuzz/regressions/state_url)") {
  SUBCASE("an etcd host with a stray bracket is refused") {
    // "[:a9" was taken as a host: url() wrote "[:a9:2379", which read back as host "[:a9:2379".
    for (const char* url : {"etcd+https://[:a9/b//", "etcd://[::1:2379", "etcd://a]b:2379",
                            "etcd://h:o:st:2379", "etcd://[]x]:1", "etcd://no_such host"}) {
      CAPTURE(url);
      Error e = error_of(url);
      CHECK(e.kind == ErrorKind::usage);
      CHECK(e.message.find("invalid etcd host") != std::string::npos);
    }
    auto ok = parse_state_url("etcd://[fe80::1]:2379,node-1.local,10.0.0.1:1", env());
    REQUIRE(ok);
    CHECK(ok->endpoints == std::vector<std::string>{"http://[fe80::1]:2379",
                                                    "http://node-1.local:2379",
                                                    "http://10.0.0.1:1"});
  }
  SUBCASE("a path that normalizes to a directory is refused like one ending in '/'") {
    // "sqlite:/tmp/x/.." was accepted as the database file "/tmp/"; its url() was refused.
    for (const char* url : {"sqlite:/tmp/x/..", "/tmp/.", "sqlite:..", "sqlite:///a/b/c/../.."}) {
      CAPTURE(url);
      Error e = error_of(url);
      CHECK(e.kind == ErrorKind::usage);
      CHECK(e.message.find("names a directory") != std::string::npos);
    }
    auto ok = parse_state_url("sqlite:/tmp/x/../state.db", env());
    REQUIRE(ok);
    CHECK(ok->path == "/tmp/state.db");
  }
  SUBCASE("what is accepted round-trips through url()") {
    for (const char* url : {"etcd+https://[::1]:2379/a/b", "etcd://h", "sqlite:./a/../s.db",
                            "~/s.db", "sqlite:///abs/x.db"}) {
      CAPTURE(url);
      auto loc = parse_state_url(url, env());
      REQUIRE(loc);
      auto again = parse_state_url(loc->url(), env());
      REQUIRE(again);
      CHECK(again->url() == loc->url());
      CHECK(again->path == loc->path);
      CHECK(again->endpoints == loc->endpoints);
    }
  }
}

TEST_CASE("state::network_filesystem_name knows network filesystems and only those") {
  CHECK(network_filesystem_name(0x6969) == "nfs");
  CHECK(network_filesystem_name(0xFF534D42) == "cifs");
  CHECK(network_filesystem_name(static_cast<int32_t>(0xFF534D42)) == "cifs"); // signed f_type
  CHECK(network_filesystem_name(0xFE534D42) == "smb2");
  CHECK(network_filesystem_name(0x517B) == "smb");
  CHECK(network_filesystem_name(0x65735546) == "fuse");
  CHECK(!network_filesystem_name(0xEF53));     // ext2/3/4
  CHECK(!network_filesystem_name(0x58465342)); // xfs
  CHECK(!network_filesystem_name(0x01021994)); // tmpfs
  CHECK(!network_filesystem_name(0x9123683E)); // btrfs
  CHECK(!network_filesystem_name(0x794C7630)); // overlayfs (containers)
}

TEST_CASE("state::check_local_filesystem accepts a local directory, existing or not") {
  tpuctl::test::TempDir tmp;
  CHECK(check_local_filesystem(tmp.path().string()));
  CHECK(check_local_filesystem((tmp.path() / "not" / "yet").string()));
}

TEST_CASE("state::make_private_directories creates every missing level 0700") {
  tpuctl::test::TempDir tmp;
  auto deep = tmp.path() / "a" / "b" / "c";
  REQUIRE(make_private_directories(deep.string()));
  for (auto p : {tmp.path() / "a", tmp.path() / "a" / "b", deep}) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
  }
  CHECK(make_private_directories(deep.string())); // exists: fine
  std::ofstream(tmp.path() / "file").flush();
  auto bad = make_private_directories((tmp.path() / "file" / "x").string());
  REQUIRE(!bad);
  CHECK(bad.error().message.find("is not a directory") != std::string::npos);
}
