#include "provision/controller/launcher.hpp"

#include <fcntl.h>
#include <filesystem>
#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "util/private_files.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

Launcher Launcher::with_default_ssh() const {
  Launcher plain = *this;
  plain.strict = Launcher{}.strict;
  plain.ssh_config.clear();
  plain.passphrase_file.clear();
  return plain;
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : p.string();
}

namespace {

// The log directory, private (0700) even when an older tpuctl made it; empty when it cannot be
// made, and the child then logs nowhere.
std::string private_log_dir(const std::string& dir) {
  if (dir.empty() || !util::make_private_directories(dir)) {
    return "";
  }
  std::error_code ec;
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  return dir;
}

} // namespace

void spawn_detached(const Launcher& launcher, const std::string& pool,
                    const std::vector<std::string>& command, const std::string& log_name) {
  const std::string log_dir = private_log_dir(launcher.log_dir);
  std::vector<std::string> args{launcher.binary.empty() ? self_exe() : launcher.binary};
  args.insert(args.end(), launcher.store_args.begin(), launcher.store_args.end());
  args.insert(args.end(), {"--pool", pool, "--quiet", "--verbosity", "info"});
  if (!log_dir.empty()) {
    args.insert(args.end(), {"--log-file", log_dir + "/" + log_name});
  }
  args.insert(args.end(), command.begin(), command.end());
  args.insert(args.end(), {"--strict-host-key-checking", launcher.strict});
  if (!launcher.ssh_config.empty()) {
    args.insert(args.end(), {"--ssh-config", launcher.ssh_config});
  }
  if (!launcher.passphrase_file.empty()) {
    args.insert(args.end(), {"--identity-passphrase-file", launcher.passphrase_file});
  }
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  pid_t child = fork();
  if (child < 0) {
    spdlog::warn("could not start '{}' for pool '{}': fork failed", util::join(command, " "), pool);
    return;
  }
  if (child == 0) {
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) {
      _exit(0);
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    // Its stderr (the one `tpuctl: error:` line a failing command ends with) goes to its log.
    if (!log_dir.empty()) {
      const std::string log = log_dir + "/" + log_name;
      int err = open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      if (err >= 0) {
        dup2(err, 2);
      }
    }
    for (int fd = 3; fd < 1024; ++fd) {
      close(fd);
    }
    if (launcher.as_controller) {
      setenv(k_leader_env, launcher.leader_id.c_str(), 1);
    } else {
      unsetenv(k_leader_env); // a command's child is never the controller's
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  spdlog::info("started '{}' for pool '{}'", util::join(command, " "), pool);
}

void spawn_driver(const Launcher& launcher, const std::string& pool) {
  spawn_detached(launcher, pool, {"controller", "drive"}, "driver.log");
}

} // namespace tpuctl::provision
