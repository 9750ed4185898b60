#include "cli/state_access.hpp"

#include <cstdlib>
#include <fstream>

#include "cli/runtime_options.hpp"
#include "provision/queue/reconcile.hpp"
#include "state/location.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

Expected<state::OpenOptions> open_options(const Context& ctx) {
  state::OpenOptions o;
  const GlobalOptions& g = ctx.globals;
  o.etcd.user = g.etcd_user;
  o.etcd.cacert = g.etcd_cacert;
  o.etcd.cert = g.etcd_cert;
  o.etcd.key = g.etcd_key;
  if (!g.etcd_password_file.empty()) {
    std::ifstream in(g.etcd_password_file);
    std::string line;
    if (!in || !std::getline(in, line) || line.empty()) {
      return usage_error("--etcd-password-file '" + g.etcd_password_file +
                         "' cannot be read or is empty: put the etcd password on its first line");
    }
    if (line.back() == '\r') {
      line.pop_back();
    }
    o.etcd.password = line;
  } else if (const char* p = std::getenv("TPUCTL_ETCD_PASSWORD"); p && *p) {
    o.etcd.password = p;
  }
  // For an etcd whose members run with a --max-txn-ops or --max-request-bytes other than the
  // defaults (128 and 1.5 MiB).
  if (const char* n = std::getenv("TPUCTL_ETCD_MAX_TXN_OPS"); n && *n) {
    TPUCTL_TRY_ASSIGN(int64_t ops, util::parse_int(n, "TPUCTL_ETCD_MAX_TXN_OPS", 40, 1 << 20));
    o.etcd.max_txn_ops = static_cast<size_t>(ops);
  }
  if (const char* n = std::getenv("TPUCTL_ETCD_MAX_REQUEST_BYTES"); n && *n) {
    TPUCTL_TRY_ASSIGN(int64_t bytes,
                      util::parse_int(n, "TPUCTL_ETCD_MAX_REQUEST_BYTES", 65536, 1LL << 31));
    o.etcd.max_request_bytes = static_cast<size_t>(bytes);
  }
  // How long a SQLite command waits for the write lock under heavy concurrency (default 10s).
  if (const char* t = std::getenv("TPUCTL_STATE_BUSY_TIMEOUT"); t && *t) {
    TPUCTL_TRY_ASSIGN(o.busy_timeout, util::parse_duration(t, "TPUCTL_STATE_BUSY_TIMEOUT"));
  }
  return o;
}

Expected<std::unique_ptr<state::StateStore>>
open_store_only(const Context& ctx, const std::string& url, Access access) {
  TPUCTL_TRY_ASSIGN(auto options, open_options(ctx));
  options.create =
      access == Access::create ? state::Creation::on_first_write : state::Creation::never;
  return state::open_store(url, options);
}

Expected<state::StateStore*> open_state(Context& ctx, Drivers drivers, Access access) {
  static std::unique_ptr<state::StateStore> s_store;
  static std::string s_url;
  if (!s_store || s_url != ctx.globals.state) {
    TPUCTL_TRY_ASSIGN(auto options, open_options(ctx));
    options.create =
        access == Access::create ? state::Creation::on_first_write : state::Creation::never;
    TPUCTL_TRY_ASSIGN(s_store, state::open_store(ctx.globals.state, options));
    s_url = ctx.globals.state;
    if (!s_store->info().writable) {
      return s_store.get(); // nothing can be applied; reads show the state as it is
    }
    // Due transitions first. What stops them is said on stderr and the command goes on: a
    // read still shows the state as it is, and a write meets the same store on its own.
    if (drivers == Drivers::spawn) {
      TPUCTL_TRY(provision::reconcile_and_spawn(launcher(ctx), *s_store));
    } else if (auto r = provision::reconcile_all(*s_store, state::system_clock()); !r) {
      return r.error();
    } else {
      provision::warn_unreconciled(r->errors);
    }
  }
  return s_store.get();
}

} // namespace tpuctl::cli
