// The edge of tpuctl: builds the command line from the command table, parses it, runs the chosen
// command and turns its Error, if any, into one `tpuctl: error: ...` line per problem and an exit
// code (exit_codes.hpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tpuctl::cli {

// Runs tpuctl with `args` (args[0] is the program name) and returns the exit status. Results
// go to `out`, errors and progress to `err`. Used by main() and by in-process tests.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

} // namespace tpuctl::cli
