#include "cli/terminal.hpp"

#include <cstdlib>
#include <ostream>
#include <sys/ioctl.h>
#include <unistd.h>

namespace tpuctl::cli {

bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

bool colour_enabled(int fd) {
  const char* term = std::getenv("TERM");
  return is_terminal(fd) && std::getenv("NO_COLOR") == nullptr &&
         !(term && std::string_view(term) == "dumb");
}

int terminal_columns() {
  if (!is_terminal(STDOUT_FILENO)) {
    return 0;
  }
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  const char* columns = std::getenv("COLUMNS");
  return columns ? std::atoi(columns) : 0;
}

std::string paint(std::string_view text, Colour colour, bool enabled) {
  if (!enabled || colour == Colour::none) {
    return std::string(text);
  }
  const char* code = colour == Colour::green    ? "32"
                     : colour == Colour::yellow ? "33"
                     : colour == Colour::red    ? "31"
                                                : "1";
  return std::string("\033[") + code + "m" + std::string(text) + "\033[0m";
}

Colour state_colour(std::string_view s) {
  for (std::string_view good : {"ACTIVE", "SUCCEEDED", "RUNNING", "READY", "free", "ok"}) {
    if (s == good) {
      return Colour::green;
    }
  }
  for (std::string_view bad : {"FAILED", "LOST", "PREEMPTED", "unreachable", "refused"}) {
    if (s == bad) {
      return Colour::red;
    }
  }
  for (std::string_view busy : {"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "SUSPENDING",
                                "SUSPENDED", "DELETING", "PENDING", "CREATING", "drained"}) {
    if (s == busy) {
      return Colour::yellow;
    }
  }
  return Colour::none;
}

Progress::Progress(const Context& ctx)
    : m_err(ctx.err), m_enabled(!ctx.globals.quiet && !ctx.machine_format() && ctx.err),
      m_live(is_terminal(STDERR_FILENO)) {}

Progress::~Progress() {
  clear();
}

void Progress::clear() {
  if (m_shown) {
    *m_err << "\r\033[K";
    m_err->flush();
    m_shown = false;
  }
}

void Progress::line(const std::string& text) {
  if (!m_enabled) {
    return;
  }
  clear();
  *m_err << "tpuctl: " << text << "\n";
  m_err->flush();
}

void Progress::status(const std::string& text, bool important) {
  if (!m_enabled) {
    return;
  }
  if (m_live) {
    *m_err << "\r\033[K" << paint("tpuctl: " + text, Colour::bold, colour_enabled(STDERR_FILENO));
    m_err->flush();
    m_shown = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (important || now - m_last_plain >= k_plain_interval) {
    *m_err << "tpuctl: " << text << "\n";
    m_err->flush();
    m_last_plain = now;
  }
}

std::shared_ptr<Progress> make_progress(const Context& ctx) {
  return std::make_shared<Progress>(ctx);
}

} // namespace tpuctl::cli
