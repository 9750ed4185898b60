// Where things are in a JSON text: the line of every value, keyed by its JSON pointer
// ("/hosts/3/port"), so a bad entry of an inventory file can be reported by line and field.
// nlohmann::json keeps no positions; this is a small scanner over text that already parsed.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace tpuctl::util {

// Line numbers (1-based) of every value in `text`, by JSON pointer ("" is the root). Object
// keys are escaped as RFC 6901 says ('~' -> "~0", '/' -> "~1"). On malformed text, returns
// what it found before the error; values nested more than 256 levels deep are not recorded
// (line_of gives their closest recorded ancestor's line).
std::map<std::string, int> json_pointer_lines(std::string_view text);

// The line of `pointer`, or of its closest ancestor that has one (0 if none).
int line_of(const std::map<std::string, int>& lines, std::string pointer);

} // namespace tpuctl::util
