// What tpuctl does differently on a terminal: live progress on stderr (a status line rewritten in
// place), colour (never with NO_COLOR or TERM=dumb, never when not a terminal), and tables cut to
// the terminal's width. Off a terminal, progress is plain lines (a status at most every
// k_plain_interval), so CI logs stay readable; with --quiet or a machine format, nothing.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "cli/context.hpp"

namespace tpuctl::cli {

inline constexpr std::chrono::seconds k_plain_interval{10};

bool is_terminal(int fd);
// Colour on `fd`: a terminal, NO_COLOR unset (any value disables it), TERM not "dumb".
bool colour_enabled(int fd);
// Columns of the terminal on stdout (TIOCGWINSZ, else $COLUMNS); 0 when unknown or not a tty.
int terminal_columns();

enum class Colour { none, green, yellow, red, bold };
// `text` wrapped in the ANSI sequence of `colour` when `enabled`.
std::string paint(std::string_view text, Colour colour, bool enabled);
// The colour of a state word in tables: ACTIVE/SUCCEEDED/RUNNING/READY/free green, FAILED/LOST
// red, transient and waiting states yellow, everything else none.
Colour state_colour(std::string_view state);

// Progress on stderr for one long operation.
class Progress {
public:
  explicit Progress(const Context& ctx);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A line that stays ("tpuctl: pushed in 312 ms").
  void line(const std::string& text);
  // The current status ("push 3/8 127.0.0.5"): rewritten in place on a terminal; off one,
  // printed when `important` or at most every k_plain_interval.
  void status(const std::string& text, bool important = false);
  bool enabled() const { return m_enabled; }

private:
  void clear();
  std::ostream* m_err = nullptr;
  bool m_enabled = false;
  bool m_live = false;
  bool m_shown = false; // a status line is on screen (live mode)
  std::chrono::steady_clock::time_point m_last_plain{};
};

// A Progress shared by callbacks that outlive a scope (drive options, monitor options).
std::shared_ptr<Progress> make_progress(const Context& ctx);

} // namespace tpuctl::cli
