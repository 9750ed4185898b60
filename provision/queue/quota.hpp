// Project quotas in the queue: Google Cloud's per-project TPU quotas, with Kueue's borrowing,
// reclaim and fair sharing, on one pool (a pool is a zone; its quotas are PoolInfo::quotas).
//
// What counts. A request holds its chips (accelerator chips times slices) from PROVISIONING
// until its hosts are released (holds_hosts): that is its project's use. A project with no quota
// in the pool is unlimited there.
//
// Guaranteed tiers (reserved, standard, flex-start) stay within quota: one is placed only while
// its project's guaranteed use plus its chips is at most the quota. Otherwise it waits with a
// reason that names the quota and the requests using it (Slurm's AssocGrpGRES, Kueue's
// QuotaReserved not yet), and one that needs more than the whole quota is refused at create
// (exit 3, as for a pool too small). A request held by its quota never blocks other projects'.
//
// Spot and best-effort may borrow: placed whenever idle hosts fit them, beyond the quota. A
// project's slices fill its quota guaranteed first, then by arrival; a spot slice beyond that
// point is borrowing. Borrowing slices are preempted first: a guaranteed request that needs
// room takes borrowing slices before others of lower tiers, and a spot request that is within
// its own project's quota may reclaim the room other projects borrow (Kueue's
// reclaimWithinCohort), which no spot request may do to a slice within its quota.
//
// Fair share. Within one tier the queue serves the project with the lowest share first, then
// arrival within a project: share = the chips the project holds / its quota (/ the pool's chips
// when it has none; a zero quota counts any use as infinite). The share is recomputed after each
// placement in a pass, so two projects waiting in one tier alternate instead of the earlier one
// taking every free host (Kueue's fair sharing, DRS). A waiting request's pending reason shows
// the shares of the projects waiting in its tier.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"

namespace tpuctl::provision {

// The chips each project holds in one pool, kept up to date through a scheduling pass.
class QuotaBook {
public:
  QuotaBook(ProjectQuotas quotas, int pool_chips);

  // Counts `qr` (its chips) as held by its project.
  void hold(const QueuedResource& qr);

  int guaranteed(const std::string& project) const; // chips held by guaranteed tiers
  int held(const std::string& project) const;       // all chips held
  // The project's guaranteed slices holding chips: (id, chips), in the order held.
  std::vector<std::pair<std::string, int>> holders(const std::string& project) const;
  // held / quota (or / the pool's chips); a zero quota with any use: a very large share.
  double share(const std::string& project) const;
  // Why a guaranteed request cannot be placed under its project's quota now, nothing when it
  // may (a spot or best-effort request always may: it borrows).
  std::optional<std::string> over_quota(const QueuedResource& qr, int chips) const;
  // True when the project has a quota and holding `chips` more keeps it within it.
  bool within_quota(const std::string& project, int chips) const;
  const ProjectQuotas& quotas() const { return m_quotas; }

private:
  ProjectQuotas m_quotas;
  int m_pool_chips;
  std::map<std::string, int> m_guaranteed;
  std::map<std::string, int> m_held;
  std::map<std::string, std::vector<std::pair<std::string, int>>> m_holders; // project -> id, chips
};

// A book of what `qrs` (the requests of `pool`) hold now, under the pool's quotas.
QuotaBook quota_book(const std::vector<QueuedResource>& qrs, const PoolInfo& pool);

// The ids of the slices that are borrowing: spot or best-effort slices beyond their project's
// quota, its slices counted guaranteed first, then by arrival.
std::set<std::string> borrowing(const std::vector<QueuedResource>& qrs,
                                const ProjectQuotas& quotas);

// "0.50", "inf": a share as the pending reason and `pool quota list` show it.
std::string share_text(double share);

// Create: a guaranteed request that needs more chips than its project's whole quota can never
// be placed. Errors: capacity (reason never_fits) saying so and how to go on.
Status check_quota_can_fit(const PoolInfo& pool, const QueuedResource& asked);

// One project's line in `pool quota list`.
struct QuotaRow {
  std::string project;
  std::optional<int> quota; // nullopt: unlimited
  int guaranteed_chips = 0; // held by reserved, standard and flex-start slices
  int spot_chips = 0;       // held by spot and best-effort slices
  int borrowed_chips = 0;   // of those, beyond the quota
  int waiting_chips = 0;    // asked by requests waiting for resources
  double share = 0;
};
// Every project with a quota in `pool` or a request there, by name.
Expected<std::vector<QuotaRow>> quota_rows(state::StateStore& store, const std::string& pool);

// A quota change: the quota before it (nullopt: unlimited), read in its transaction.
struct QuotaChange {
  std::optional<int> previous;
};
// Sets `project`'s quota in `pool` to `chips`, by a pool admin, recorded as QUOTA_SET with the
// previous value. Errors: usage (an invalid project id, negative chips, a quota below the chips
// the project's guaranteed slices hold: naming them), auth, not_found, the store's.
Expected<QuotaChange> set_project_quota(state::StateStore& store, const std::string& pool,
                                        const std::string& project, int64_t chips);
// Removes `project`'s quota (unlimited again), recorded as QUOTA_UNSET. Errors: not_found when
// it has none (naming those that do), auth, the store's.
Expected<QuotaChange> unset_project_quota(state::StateStore& store, const std::string& pool,
                                          const std::string& project);

} // namespace tpuctl::provision
