// Opening the state store for a command (from --state / TPUCTL_STATE). Every command that reads
// or writes state goes through here, so this is where due transitions will be applied first.
#pragma once

#include <memory>

#include "cli/context.hpp"
#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

// Opens (once per process) and returns the store named by the global --state flag.
Expected<state::StateStore*> open_state(Context& ctx);

} // namespace tpuctl::cli
