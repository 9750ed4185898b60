// Who may change what in a shared pool. Every pool, queued resource, cluster and workload records
// its owner (the StateStore's actor when it was made: an etcd user on an authenticating store,
// else "USER@HOST"). Deleting, resetting or stopping what another owner made is a mistake far
// more often than an intent, so it needs an explicit flag (`--override-owner`, never `--force`,
// which means "also what is running"), and when it is given the change is recorded with both
// names (an OWNER_OVERRIDDEN event: its actor is the caller, its detail the owner).
//
// One person is one owner across machines: on a store without authentication the owner is the
// operating-system user, and the host after '@' only says where it ran ("alice@laptop" and
// "alice@ci-3" are the same owner); an authenticated etcd user is compared whole.
#pragma once

#include <string>
#include <vector>

#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

// Whether `actor` (a StateStore::actor()) is the person `owner` names.
bool same_owner(const std::string& owner, const std::string& actor);

struct OwnedObject {
  state::Kind kind = state::Kind::queued_resource;
  std::string pool;
  std::string id;
  std::string owner; // "" for an object made before owners were recorded: anyone's
  std::string what;  // for people: "queued resource 'a1'"
};

// Before `action` ("delete", "reset", "stop") of `object` by the store's actor: nothing when the
// object is the caller's (or has no owner); another owner's without `override_owner` is a usage
// error naming the owner, the caller and the flag (nothing changes); with it, the
// OWNER_OVERRIDDEN event to record once the action is done is added to `overrides`
// (record_overrides). Errors: usage.
Status check_owner_intent(const state::StateStore& store, const OwnedObject& object,
                          const std::string& action, bool override_owner,
                          std::vector<state::Event>& overrides);

// Records the events check_owner_intent returned (none: nothing). Errors: the store's.
Status record_overrides(state::StateStore& store, const std::vector<state::Event>& events);

} // namespace tpuctl::provision
