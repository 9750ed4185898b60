// tpuctl config through the real binary with a scratch HOME: set/get/unset/list, values checked
// like their flags, the file private, and the precedence flag > environment > config > default.
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/helpers.hpp"

using tpuctl::test::run_tpuctl;
using tpuctl::test::TempDir;

TEST_SUITE_BEGIN("integration");

namespace {

struct Home {
  TempDir dir;
  std::map<std::string, std::string> env;
  Home() {
    env["HOME"] = dir.path().string();
    env["XDG_CONFIG_HOME"] = (dir.path() / "config").string();
    env["XDG_STATE_HOME"] = (dir.path() / "state").string();
  }
  std::filesystem::path file() const { return dir.path() / "config" / "tpuctl" / "config.json"; }
  tpuctl::util::ProcessResult run(const std::vector<std::string>& args,
                                  std::map<std::string, std::string> extra = {}) const {
    auto e = env;
    e.insert(extra.begin(), extra.end());
    return run_tpuctl(args, e);
  }
};

} // namespace

TEST_CASE("config: set, get, list, unset; the file is 0600 in a 0700 directory") {
  Home h;
  REQUIRE(h.run({"config", "set", "ssh.batch_size", "16"}).exit_code == 0);
  REQUIRE(h.run({"config", "set", "state", "etcd://127.0.0.1:23999"}).exit_code == 0);
  auto got = h.run({"config", "get", "ssh.batch_size"});
  CHECK(got.exit_code == 0);
  CHECK(got.out == "16\n");
  auto list = h.run({"config", "list", "--format", "json"});
  REQUIRE(list.exit_code == 0);
  auto rows = nlohmann::json::parse(list.out);
  CHECK(rows.size() == 9);
  CHECK(rows[2]["key"] == "state");
  CHECK(rows[2]["value"] == "etcd://127.0.0.1:23999");
  struct stat st {};
  REQUIRE(::stat(h.file().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(h.file().parent_path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(h.run({"config", "unset", "state"}).exit_code == 0);
  auto gone = h.run({"config", "get", "state"});
  CHECK(gone.exit_code == 4);
  CHECK(gone.err.find("config state is not set") != std::string::npos);
}

TEST_CASE("config unset: several keys at once; an unknown one among them changes nothing") {
  Home h;
  REQUIRE(h.run({"config", "set", "format", "json"}).exit_code == 0);
  REQUIRE(h.run({"config", "set", "ssh.user", "deploy"}).exit_code == 0);
  REQUIRE(h.run({"config", "set", "pool", "team-a"}).exit_code == 0);
  const std::string before = tpuctl::test::read_file(h.file());
  auto bad = h.run({"config", "unset", "format", "no.such.key", "pool"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("no.such.key") != std::string::npos);
  CHECK(tpuctl::test::read_file(h.file()) == before);
  auto both = h.run({"config", "unset", "format", "ssh.user", "--format", "table"});
  REQUIRE_MESSAGE(both.exit_code == 0, both.err);
  CHECK(both.out == "unset format\nunset ssh.user\n");
  CHECK(h.run({"config", "get", "format"}).exit_code == 4);
  CHECK(h.run({"config", "get", "ssh.user"}).exit_code == 4);
  CHECK(h.run({"config", "get", "pool"}).out == "team-a\n");
}

TEST_CASE("config: --zone over the config's pool, as gcloud's --zone over compute/zone; --pool "
          "over --zone; a zone that names no pool, or that no command uses, gets a notice") {
  Home h;
  REQUIRE(h.run({"pool", "create", "a", "--generation", "v5e"}).exit_code == 0);
  REQUIRE(h.run({"pool", "create", "b", "--generation", "v5e"}).exit_code == 0);
  REQUIRE(h.run({"config", "set", "pool", "a"}).exit_code == 0);
  auto pool_of = [](const tpuctl::util::ProcessResult& r) {
    return nlohmann::json::parse(r.out)["name"].get<std::string>();
  };
  auto zone_b = h.run({"tpu-vm", "list", "--zone", "b", "--format", "json"});
  CHECK(zone_b.exit_code == 0);
  CHECK(zone_b.err.empty());
  auto described = h.run({"pool", "describe", "--zone", "b", "--format", "json"});
  REQUIRE_MESSAGE(described.exit_code == 0, described.err);
  CHECK(pool_of(described) == "b");
  auto unknown = h.run({"pool", "describe", "--zone", "us-central2-b", "--format", "json"});
  REQUIRE(unknown.exit_code == 0);
  CHECK(pool_of(unknown) == "a");
  CHECK(unknown.err == "tpuctl: notice: --zone 'us-central2-b' names no pool here (a zone is a "
                       "pool in tpuctl); using pool 'a' (the config's)\n");
  auto flag = h.run({"pool", "describe", "--pool", "a", "--zone", "b", "--format", "json"});
  REQUIRE(flag.exit_code == 0);
  CHECK(pool_of(flag) == "a");
  CHECK(flag.err.find("--zone 'b' ignored: --pool (or TPUCTL_POOL) selects pool 'a'") !=
        std::string::npos);
  auto unused = h.run({"version", "--zone", "b"});
  CHECK(unused.exit_code == 0);
  CHECK(unused.err.find("--zone 'b' ignored: this command uses no pool's zone") !=
        std::string::npos);
  CHECK(h.run({"version", "--zone", "b", "--quiet"}).err.empty());
}

TEST_CASE("config: bad keys and values are refused like their flags; the file is unchanged") {
  Home h;
  REQUIRE(h.run({"config", "set", "pool", "team-a"}).exit_code == 0);
  std::ifstream before_in(h.file());
  const std::string before((std::istreambuf_iterator<char>(before_in)), {});
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"ssh.batch_size", "0"},
                                                        {"ssh.strict_host_key_checking", "maybe"},
                                                        {"format", "xml"},
                                                        {"state", "ftp://x"},
                                                        {"pool", "Bad Pool"},
                                                        {"ssh.user", "root;id"},
                                                        {"python-env", "venv"},
                                                        {"colour", "red"}}) {
    CAPTURE(key);
    auto r = h.run({"config", "set", key, value});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(value == "red" ? "'colour'" : value) != std::string::npos);
  }
  std::ifstream after_in(h.file());
  CHECK(std::string((std::istreambuf_iterator<char>(after_in)), {}) == before);
  // A broken file is an error naming it, never silently ignored.
  std::ofstream(h.file()) << "{ not json";
  auto broken = h.run({"version"});
  CHECK(broken.exit_code == 2);
  CHECK(broken.err.find(h.file().string()) != std::string::npos);
}

TEST_CASE("config: a flag beats its environment variable, which beats the config file") {
  Home h;
  REQUIRE(h.run({"config", "set", "pool", "from-config"}).exit_code == 0);
  REQUIRE(h.run({"config", "set", "format", "json"}).exit_code == 0);
  // A store with another pool, so each command gets as far as looking its pool up.
  REQUIRE(h.run({"pool", "create", "other", "--generation", "v5p"}).exit_code == 0);
  auto cfg = h.run({"pool", "describe"});
  CHECK(cfg.err.find("'from-config'") != std::string::npos);
  auto env = h.run({"pool", "describe"}, {{"TPUCTL_POOL", "from-env"}});
  CHECK(env.err.find("'from-env'") != std::string::npos);
  auto flag = h.run({"pool", "describe", "--pool", "from-flag"}, {{"TPUCTL_POOL", "from-env"}});
  CHECK(flag.err.find("'from-flag'") != std::string::npos);
  CHECK(nlohmann::json::parse(h.run({"version"}).out).contains("version")); // json by config
  CHECK(h.run({"version", "--format", "table"}).out.rfind("tpuctl ", 0) == 0);
}

TEST_CASE("config: ssh.user and ssh.identity_file are the defaults of pool add-hosts") {
  Home h;
  REQUIRE(h.run({"config", "set", "ssh.user", "deploy"}).exit_code == 0);
  REQUIRE(h.run({"config", "set", "ssh.identity_file", "/keys/team_ed25519"}).exit_code == 0);
  REQUIRE(h.run({"pool", "create", "p", "--generation", "v5e"}).exit_code == 0);
  REQUIRE(h.run({"pool", "add-hosts", "node1"}).exit_code == 0);
  REQUIRE(h.run({"pool", "add-hosts", "node2", "--user", "ops"}).exit_code == 0);
  auto hosts = nlohmann::json::parse(h.run({"pool", "hosts", "--format", "json"}).out);
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[0]["user"] == "deploy");
  CHECK(hosts[1]["user"] == "ops");
  CHECK(hosts[0]["identity_file"] == "/keys/team_ed25519");
}

TEST_CASE("config: gcloud's compute/zone is the default pool; ssh.batch_size takes all") {
  Home h;
  auto set = h.run({"config", "set", "compute/zone", "us-central2-b"});
  REQUIRE_MESSAGE(set.exit_code == 0, set.err);
  CHECK(h.run({"config", "get", "pool"}).out == "us-central2-b\n");
  CHECK(h.run({"config", "get", "compute/zone"}).out == "us-central2-b\n");
  CHECK(h.run({"config", "set", "compute/zone", "bad zone"}).exit_code == 2);
  REQUIRE(h.run({"config", "set", "ssh.batch_size", "all"}).exit_code == 0);
  REQUIRE(h.run({"config", "unset", "compute/zone"}).exit_code == 0);
  CHECK(h.run({"config", "get", "pool"}).exit_code == 4);
  // xpk's: zone is the pool, project-id the project (gcloud's core/project too); its
  // telemetry key is accepted with a notice.
  REQUIRE(h.run({"config", "set", "zone", "z1"}).exit_code == 0);
  CHECK(h.run({"config", "get", "pool"}).out == "z1\n");
  auto project = h.run({"config", "set", "project-id", "my-project"});
  CHECK(project.exit_code == 0);
  CHECK(project.err.empty());
  CHECK(h.run({"config", "get", "project"}).out == "my-project\n");
  REQUIRE(h.run({"config", "set", "core/project", "ml"}).exit_code == 0);
  CHECK(h.run({"config", "get", "project-id"}).out == "ml\n");
  auto bad_project = h.run({"config", "set", "project", "My_Project"});
  CHECK(bad_project.exit_code == 2);
  CHECK(bad_project.err.find("'My_Project' is not a project id") != std::string::npos);
  CHECK(h.run({"config", "get", "project"}).out == "ml\n"); // unchanged
  auto telemetry = h.run({"config", "set", "send-telemetry", "true"});
  CHECK(telemetry.exit_code == 0);
  CHECK(telemetry.err.find("tpuctl: notice: config send-telemetry ignored") == 0);
}
