#include "remote/ssh_types.hpp"

#include <array>
#include <cstdint>
#include <sys/eventfd.h>
#include <unistd.h>
#include <utility>

namespace tpuctl::remote {

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
  case Outcome::ok:
    return "ok";
  case Outcome::exit_code:
    return "exit_code";
  case Outcome::signal:
    return "signal";
  case Outcome::timeout:
    return "timeout";
  case Outcome::interrupted:
    return "interrupted";
  case Outcome::refused:
    return "refused";
  case Outcome::unreachable:
    return "unreachable";
  case Outcome::auth:
    return "auth";
  case Outcome::host_key_unknown:
    return "host_key_unknown";
  case Outcome::host_key_changed:
    return "host_key_changed";
  case Outcome::error:
    return "error";
  }
  return "error";
}

bool is_transport_failure(Outcome outcome) {
  switch (outcome) {
  case Outcome::refused:
  case Outcome::unreachable:
  case Outcome::auth:
  case Outcome::host_key_unknown:
  case Outcome::host_key_changed:
  case Outcome::error:
    return true;
  default:
    return false;
  }
}

int signal_number(std::string_view name) {
  // RFC 4254 section 6.10 names, with their Linux numbers.
  static constexpr std::array<std::pair<std::string_view, int>, 15> k_signals = {{{"HUP", 1},
                                                                                  {"INT", 2},
                                                                                  {"QUIT", 3},
                                                                                  {"ILL", 4},
                                                                                  {"TRAP", 5},
                                                                                  {"ABRT", 6},
                                                                                  {"BUS", 7},
                                                                                  {"FPE", 8},
                                                                                  {"KILL", 9},
                                                                                  {"USR1", 10},
                                                                                  {"SEGV", 11},
                                                                                  {"USR2", 12},
                                                                                  {"PIPE", 13},
                                                                                  {"ALRM", 14},
                                                                                  {"TERM", 15}}};
  if (name.substr(0, 3) == "SIG") {
    name.remove_prefix(3);
  }
  for (const auto& [n, number] : k_signals) {
    if (n == name) {
      return number;
    }
  }
  return 0;
}

StreamInput::StreamInput() : m_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

StreamInput::~StreamInput() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
}

void StreamInput::write(std::string_view data) {
  {
    std::lock_guard lock(m_mutex);
    m_pending.append(data);
  }
  if (m_fd >= 0) {
    const uint64_t one = 1;
    (void)!::write(m_fd, &one, sizeof one);
  }
}

std::string StreamInput::take() {
  if (m_fd >= 0) {
    uint64_t count = 0;
    (void)!::read(m_fd, &count, sizeof count);
  }
  std::lock_guard lock(m_mutex);
  return std::exchange(m_pending, std::string());
}

} // namespace tpuctl::remote
