#include "provision/queue/quota.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "provision/queue/usage.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

namespace {

constexpr double k_infinite_share = std::numeric_limits<double>::infinity();

std::string holders_text(const std::vector<std::pair<std::string, int>>& holders) {
  std::vector<std::string> parts;
  for (const auto& [id, chips] : holders) {
    if (parts.size() == 5) {
      parts.push_back("and " + std::to_string(holders.size() - 5) + " more");
      break;
    }
    parts.push_back("'" + id + "' " + std::to_string(chips));
  }
  return util::join(parts, ", ");
}

} // namespace

QuotaBook::QuotaBook(ProjectQuotas quotas, int pool_chips)
    : m_quotas(std::move(quotas)), m_pool_chips(std::max(pool_chips, 1)) {}

void QuotaBook::hold(const QueuedResource& qr) {
  const int chips = request_chips(qr);
  m_held[qr.project] += chips;
  if (!preemptible(qr.tier)) {
    m_guaranteed[qr.project] += chips;
    m_holders[qr.project].emplace_back(qr.id, chips);
  }
}

int QuotaBook::guaranteed(const std::string& project) const {
  auto it = m_guaranteed.find(project);
  return it == m_guaranteed.end() ? 0 : it->second;
}

int QuotaBook::held(const std::string& project) const {
  auto it = m_held.find(project);
  return it == m_held.end() ? 0 : it->second;
}

double QuotaBook::share(const std::string& project) const {
  const int used = held(project);
  auto quota = quota_of(m_quotas, project);
  if (!quota) {
    return static_cast<double>(used) / m_pool_chips;
  }
  if (*quota == 0) {
    return used > 0 ? k_infinite_share : 0.0;
  }
  return static_cast<double>(used) / *quota;
}

std::optional<std::string> QuotaBook::over_quota(const QueuedResource& qr, int chips) const {
  auto quota = quota_of(m_quotas, qr.project);
  if (preemptible(qr.tier) || !quota || guaranteed(qr.project) + chips <= *quota) {
    return std::nullopt;
  }
  const int used = guaranteed(qr.project);
  std::string why = "over quota: project '" + qr.project + "' has a quota of " +
                    util::counted(*quota, "chip") + " in pool '" + qr.pool + "'";
  if (chips > *quota) {
    return why + ", and this request needs " + std::to_string(chips) +
           ": it waits until a pool admin raises the quota (tpuctl pool quota set " + qr.project +
           " --chips " + std::to_string(chips) + ")";
  }
  return why + ", of which " + std::to_string(used) + " are in use (" +
         holders_text(holders(qr.project)) + "); this request needs " + std::to_string(chips) +
         " (spot requests may borrow idle chips beyond the quota)";
}

std::vector<std::pair<std::string, int>> QuotaBook::holders(const std::string& project) const {
  auto it = m_holders.find(project);
  return it == m_holders.end() ? std::vector<std::pair<std::string, int>>{} : it->second;
}

bool QuotaBook::within_quota(const std::string& project, int chips) const {
  auto quota = quota_of(m_quotas, project);
  return quota && held(project) + chips <= *quota;
}

QuotaBook quota_book(const std::vector<QueuedResource>& qrs, const PoolInfo& pool) {
  QuotaBook book(pool.quotas, pool.layout.capacity() * pool.layout.chips_per_host);
  for (const auto& qr : qrs) {
    if (holds_hosts(qr.state)) {
      book.hold(qr);
    }
  }
  return book;
}

std::set<std::string> borrowing(const std::vector<QueuedResource>& qrs,
                                const ProjectQuotas& quotas) {
  std::map<std::string, std::vector<const QueuedResource*>> by_project;
  for (const auto& qr : qrs) {
    if (holds_hosts(qr.state) && quotas.count(qr.project)) {
      by_project[qr.project].push_back(&qr);
    }
  }
  std::set<std::string> out;
  for (auto& [project, held] : by_project) {
    std::stable_sort(held.begin(), held.end(),
                     [](const QueuedResource* a, const QueuedResource* b) {
                       if (preemptible(a->tier) != preemptible(b->tier)) {
                         return !preemptible(a->tier);
                       }
                       return a->create_revision < b->create_revision;
                     });
    int used = 0;
    const int quota = quotas.at(project);
    for (const QueuedResource* qr : held) {
      used += request_chips(*qr);
      if (used > quota && preemptible(qr->tier)) {
        out.insert(qr->id);
      }
    }
  }
  return out;
}

std::string share_text(double share) {
  if (std::isinf(share)) {
    return "inf";
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", share);
  return buf;
}

Status check_quota_can_fit(const PoolInfo& pool, const QueuedResource& asked) {
  auto quota = quota_of(pool.quotas, asked.project);
  const int chips = request_chips(asked);
  if (!quota || preemptible(asked.tier) || chips <= *quota) {
    return ok();
  }
  return Error(ErrorKind::capacity,
               "queued resource '" + asked.id + "' needs " + util::counted(chips, "chip") +
                   ", more than project '" + asked.project + "''s whole quota of " +
                   std::to_string(*quota) + " in pool '" + pool.name +
                   "': ask a pool admin to raise it (tpuctl pool quota set " + asked.project +
                   " --chips " + std::to_string(chips) + " --pool " + pool.name +
                   "), or create it with --spot to borrow idle chips",
               "never_fits");
}

Expected<std::vector<QuotaRow>> quota_rows(state::StateStore& store, const std::string& pool) {
  TPUCTL_TRY_ASSIGN(PoolView view, load_pool(store, pool));
  TPUCTL_TRY_ASSIGN(auto qrs, list_queued_resources(store, pool));
  const QuotaBook book = quota_book(qrs, view.info);
  const auto borrowers = borrowing(qrs, view.info.quotas);
  std::map<std::string, QuotaRow> rows;
  for (const auto& [project, chips] : view.info.quotas) {
    rows[project].quota = chips;
  }
  for (const auto& qr : qrs) {
    QuotaRow& row = rows[qr.project];
    const int chips = request_chips(qr);
    if (holds_hosts(qr.state)) {
      (preemptible(qr.tier) ? row.spot_chips : row.guaranteed_chips) += chips;
      row.borrowed_chips += borrowers.count(qr.id) ? chips : 0;
    } else if (qr.state == QrState::waiting_for_resources || qr.state == QrState::accepted) {
      row.waiting_chips += chips;
    }
  }
  std::vector<QuotaRow> out;
  for (auto& [project, row] : rows) {
    row.project = project;
    row.share = book.share(project);
    out.push_back(row);
  }
  return out;
}

Expected<QuotaChange> set_project_quota(state::StateStore& store, const std::string& pool,
                                        const std::string& project, int64_t chips) {
  TPUCTL_TRY(validate_project_id(project));
  if (chips < 0) {
    return Error(ErrorKind::usage, "quota " + std::to_string(chips) + " for project '" + project +
                                       "' is negative: give 0 (it may only borrow, with spot) "
                                       "or more chips");
  }
  if (chips > 1000000) {
    return Error(ErrorKind::usage, "quota " + std::to_string(chips) + " for project '" + project +
                                       "' is more than 1000000 chips: leave it unset "
                                       "(tpuctl pool quota unset " +
                                       project + ") for no limit");
  }
  QuotaChange change;
  auto changed = change_pool(
      store, pool, "set the quotas of",
      [&](state::StateStore& s, PoolInfo& p, Json& detail) -> Status {
        TPUCTL_TRY_ASSIGN(auto qrs, list_queued_resources(s, pool));
        const QuotaBook book = quota_book(qrs, p);
        const int used = book.guaranteed(project);
        if (used > chips) {
          return Error(ErrorKind::usage,
                       "a quota of " + std::to_string(chips) + " for project '" + project +
                           "' is below the " + std::to_string(used) +
                           " chips its reserved and standard slices hold in pool '" + pool + "' (" +
                           holders_text(book.holders(project)) +
                           "): delete some first, or set --chips " + std::to_string(used) +
                           " or more");
        }
        change.previous = quota_of(p.quotas, project);
        detail["previous"] = change.previous ? Json(*change.previous) : Json(nullptr);
        p.quotas[project] = static_cast<int>(chips);
        return ok();
      },
      "QUOTA_SET", Json{{"project", project}, {"chips", chips}});
  if (!changed) {
    return changed.error();
  }
  return change;
}

Expected<QuotaChange> unset_project_quota(state::StateStore& store, const std::string& pool,
                                          const std::string& project) {
  TPUCTL_TRY(validate_project_id(project));
  QuotaChange change;
  auto changed = change_pool(
      store, pool, "set the quotas of",
      [&](state::StateStore&, PoolInfo& p, Json& detail) -> Status {
        if (!p.quotas.count(project)) {
          std::vector<std::string> names;
          for (const auto& [name, chips] : p.quotas) {
            names.push_back(name);
          }
          return Error(ErrorKind::not_found,
                       "project '" + project + "' has no quota in pool '" + pool + "' (" +
                           (names.empty() ? std::string("no project has one")
                                          : "projects with one: " + util::join(names, ", ")) +
                           ")");
        }
        change.previous = p.quotas.at(project);
        detail["previous"] = *change.previous;
        p.quotas.erase(project);
        return ok();
      },
      "QUOTA_UNSET", Json{{"project", project}});
  if (!changed) {
    return changed.error();
  }
  return change;
}

} // namespace tpuctl::provision
