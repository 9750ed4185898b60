#include "remote/passphrase.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <termios.h>
#include <unistd.h>

#include "util/process.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (!line.empty() && line.back() == '\r') {
    line.pop_back();
  }
  return line;
}

bool askpass_wanted() {
  const char* askpass = std::getenv("SSH_ASKPASS");
  if (askpass == nullptr || *askpass == '\0') {
    return false;
  }
  const char* require = std::getenv("SSH_ASKPASS_REQUIRE");
  const std::string req = require == nullptr ? "" : require;
  if (req == "never") {
    return false;
  }
  if (req == "force" || req == "prefer") {
    return true;
  }
  const bool display = std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY");
  return display && !::isatty(STDIN_FILENO);
}

Expected<std::string> from_askpass(const std::string& prompt) {
  const std::string program = std::getenv("SSH_ASKPASS");
  util::ProcessOptions po;
  po.timeout = std::chrono::minutes(5);
  auto ran = util::run_process({program, prompt}, po);
  if (!ran) {
    return Error(ErrorKind::auth, "SSH_ASKPASS '" + util::printable(program) +
                                      "' could not run: " + ran.error().message);
  }
  if (ran->exit_code != 0) {
    return Error(ErrorKind::auth, "SSH_ASKPASS '" + util::printable(program) + "' exited " +
                                      std::to_string(ran->exit_code) + " (no passphrase given)");
  }
  return first_line(ran->out);
}

// A prompt on the controlling terminal, echo off, when stdin is a terminal (an interactive run;
// a script's or CI job's stdin is not one). nullopt otherwise.
std::optional<std::string> from_terminal(const std::string& prompt) {
  if (!::isatty(STDIN_FILENO)) {
    return std::nullopt;
  }
  const int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return std::nullopt;
  }
  termios old{};
  const bool have_termios = ::tcgetattr(fd, &old) == 0;
  if (!have_termios) {
    ::close(fd);
    return std::nullopt;
  }
  termios quiet = old;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
  ::tcsetattr(fd, TCSAFLUSH, &quiet);
  (void)!::write(fd, prompt.data(), prompt.size());
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') {
    line.push_back(c);
  }
  ::tcsetattr(fd, TCSAFLUSH, &old);
  (void)!::write(fd, "\n", 1);
  ::close(fd);
  return first_line(line);
}

} // namespace

remote::PassphraseSource passphrase_source(const std::string& passphrase_file) {
  auto cache = std::make_shared<std::map<std::string, std::string>>();
  auto mu = std::make_shared<std::mutex>();
  return [passphrase_file, cache, mu](const std::string& path) -> Expected<std::string> {
    std::lock_guard lock(*mu);
    if (auto it = cache->find(path); it != cache->end()) {
      return it->second;
    }
    std::string passphrase;
    if (!passphrase_file.empty()) {
      std::ifstream in(passphrase_file);
      std::string line;
      if (!in || !std::getline(in, line)) {
        return Error(ErrorKind::auth, "--identity-passphrase-file '" +
                                          util::printable(passphrase_file) +
                                          "' cannot be read: " + std::strerror(errno));
      }
      passphrase = first_line(line);
    } else {
      const std::string prompt = "Enter passphrase for key '" + path + "': ";
      if (askpass_wanted()) {
        TPUCTL_TRY_ASSIGN(passphrase, from_askpass(prompt));
      } else if (auto typed = from_terminal(prompt)) {
        passphrase = *typed;
      } else {
        return Error(ErrorKind::auth, "no passphrase was given");
      }
    }
    (*cache)[path] = passphrase;
    return passphrase;
  };
}

} // namespace tpuctl::remote
