#include "cli/state_access.hpp"

#include "cli/qr_runtime.hpp"
#include "provision/reconcile.hpp"
#include "state/location.hpp"

namespace tpuctl::cli {

Expected<state::StateStore*> open_state(Context& ctx, Drivers drivers) {
  static std::unique_ptr<state::StateStore> s_store;
  static std::string s_url;
  if (!s_store || s_url != ctx.globals.state) {
    TPUCTL_TRY_ASSIGN(s_store, state::open_store(ctx.globals.state));
    s_url = ctx.globals.state;
    if (drivers == Drivers::spawn) {
      TPUCTL_TRY(reconcile_and_spawn(ctx, *s_store));
    } else {
      auto r = provision::reconcile_all(*s_store, state::system_clock());
      if (!r && !state::has_reason(r.error(), state::reason::k_schema_too_new)) {
        return r.error();
      }
    }
  }
  return s_store.get();
}

} // namespace tpuctl::cli
