#include "cli/state_access.hpp"

#include "state/location.hpp"

namespace tpuctl::cli {

Expected<state::StateStore*> open_state(Context& ctx) {
  static std::unique_ptr<state::StateStore> s_store;
  static std::string s_url;
  if (!s_store || s_url != ctx.globals.state) {
    TPUCTL_TRY_ASSIGN(s_store, state::open_store(ctx.globals.state));
    s_url = ctx.globals.state;
  }
  return s_store.get();
}

} // namespace tpuctl::cli
