// tpuctl pool quota set|list|unset: a pool's chip quota per project (Google Cloud's per-project
// TPU quotas, a pool being a zone). What a quota does in the queue is provision/queue/quota.hpp's;
// this file parses and prints.
#include "cli/commands.hpp"
#include "cli/compat.hpp"
#include "cli/output.hpp"
#include "cli/state_access.hpp"
#include "provision/queue/quota.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

Json quota_json(const std::optional<int>& quota) {
  return quota ? Json(*quota) : Json(nullptr);
}

std::string quota_text(const Json& quota) {
  return quota.is_null() ? "unlimited" : std::to_string(quota.get<int>()) + " chips";
}

Json row_json(const std::string& pool, const provision::QuotaRow& r) {
  return Json{{"pool", pool},
              {"project", r.project},
              {"quota", quota_json(r.quota)},
              {"guaranteed_chips", r.guaranteed_chips},
              {"spot_chips", r.spot_chips},
              {"borrowed_chips", r.borrowed_chips},
              {"waiting_chips", r.waiting_chips},
              {"share", provision::share_text(r.share)}};
}

void add_set(CLI::App& group, Registry& registry) {
  struct Flags {
    std::string project;
    std::string chips;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = registry.add(
      group, "set", "set a project's chip quota in the pool", [f](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(const int64_t chips, util::parse_int(f->chips, "--chips"));
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto change,
                          provision::set_project_quota(*store, pool, f->project, chips));
        const Json previous = quota_json(change.previous);
        const Json out{
            {"pool", pool}, {"project", f->project}, {"quota", chips}, {"previous", previous}};
        TPUCTL_TRY(emit(ctx, out, [&](std::ostream& os, const Json&) {
          os << "pool " << pool << ": project " << f->project << " has a quota of "
             << quota_text(out["quota"]) << " (was " << quota_text(previous) << ")\n";
        }));
        return 0;
      });
  cmd->add_option("PROJECT", f->project, "the project (as --project names it)")->required();
  cmd->add_option("--chips", f->chips, "the most chips its reserved and standard requests hold")
      ->required()
      ->type_name("N");
  cmd->footer(
      "Its reserved, standard and flex-start requests wait (with the quota as their reason)\n"
      "once they would hold more; one that needs more than the whole quota is refused\n"
      "(exit 3). Spot and best-effort requests may borrow idle chips beyond it and are\n"
      "preempted first. 0: the project may only borrow. Only the pool's admins (pool\n"
      "set-admins) and its owner may set quotas; each change is an event (QUOTA_SET).");
}

void add_quota_list(CLI::App& group, Registry& registry) {
  CLI::App* cmd =
      registry.add(group, "list", "every project's quota, what it holds and its fair share",
                   [](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
                     TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
                     TPUCTL_TRY_ASSIGN(auto rows, provision::quota_rows(*store, pool));
                     Json out = Json::array();
                     for (const auto& r : rows) {
                       Json j = row_json(pool, r);
                       j["quota_text"] = quota_text(j["quota"]);
                       out.push_back(std::move(j));
                     }
                     Json example = row_json("", provision::QuotaRow{});
                     example["quota_text"] = "";
                     TPUCTL_TRY(emit_list(ctx, out,
                                          {{"PROJECT", "project"},
                                           {"QUOTA", "quota_text"},
                                           {"GUARANTEED", "guaranteed_chips"},
                                           {"SPOT", "spot_chips"},
                                           {"BORROWED", "borrowed_chips"},
                                           {"WAITING", "waiting_chips"},
                                           {"SHARE", "share"}},
                                          example));
                     return 0;
                   });
  cmd->footer(
      "A project appears once it has a quota or a request in the pool; one without a quota\n"
      "is unlimited. Chips held by requests from PROVISIONING until their hosts are free:\n"
      "GUARANTEED by reserved, standard and flex-start ones, SPOT by spot and best-effort\n"
      "ones, BORROWED the part of those beyond the quota (preempted first). SHARE is what\n"
      "it holds over its quota (over the pool's chips when it has none): within a tier the\n"
      "queue serves the lowest share first. json rows: pool, project, quota (null:\n"
      "unlimited), quota_text, guaranteed_chips, spot_chips, borrowed_chips, waiting_chips,\n"
      "share.");
}

void add_unset(CLI::App& group, Registry& registry) {
  auto project = std::make_shared<std::string>();
  CLI::App* cmd = registry.add(
      group, "unset", "remove a project's quota: it is unlimited in the pool again",
      [project](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(auto* store, open_state(ctx));
        TPUCTL_TRY_ASSIGN(auto pool, resolve_pool(ctx, *store));
        TPUCTL_TRY_ASSIGN(auto change, provision::unset_project_quota(*store, pool, *project));
        const Json previous = quota_json(change.previous);
        const Json out{
            {"pool", pool}, {"project", *project}, {"quota", nullptr}, {"previous", previous}};
        TPUCTL_TRY(emit(ctx, out, [&](std::ostream& os, const Json&) {
          os << "pool " << pool << ": project " << *project << " is unlimited (was "
             << quota_text(previous) << ")\n";
        }));
        return 0;
      });
  cmd->add_option("PROJECT", *project, "the project")->required();
}

} // namespace

void setup_pool_quota(CLI::App& pool_group, Registry& registry) {
  CLI::App* group = pool_group.add_subcommand(
      "quota", "chip quotas per project: set, list, unset (Google Cloud's TPU quotas)");
  add_set(*group, registry);
  add_quota_list(*group, registry);
  add_unset(*group, registry);
}

} // namespace tpuctl::cli
