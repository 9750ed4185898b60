// Projects: what a request's chips are charged to, as Google Cloud charges a TPU to a project.
// gcloud's `--project`, `gcloud config set project P` (or CLOUDSDK_CORE_PROJECT) and xpk's
// `--project` name it; a request that names none is charged to `default`, and a workload to its
// cluster's. A pool holds a chip quota per project (Google Cloud's TPU quotas are per project and
// per zone, and a zone is a pool here); a project with no quota set in a pool is unlimited there.
// The quotas live in the pool record (PoolInfo::quotas); what they mean for the queue (waits,
// borrowing, reclaim, fair share) is provision/queue/quota.hpp's.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "util/expected.hpp"

namespace tpuctl::provision {

inline constexpr const char* k_default_project = "default";

// Google Cloud's project ids, loosened to short names teams use ("ml"): lowercase letters, digits
// and '-', starting with a letter, not ending with '-', at most 63. Errors: usage naming `value`.
Status validate_project_id(const std::string& value);

// A pool's quotas: project -> chips (0: the project may only borrow idle chips, with spot).
using ProjectQuotas = std::map<std::string, int>;

// The project's quota in `quotas`, nullopt when it has none (unlimited).
std::optional<int> quota_of(const ProjectQuotas& quotas, const std::string& project);

} // namespace tpuctl::provision
