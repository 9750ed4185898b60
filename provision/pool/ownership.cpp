#include "provision/pool/ownership.hpp"

namespace tpuctl::provision {

namespace {

// "alice@ci-3" -> "alice"; an etcd user name (no '@') stays whole.
std::string person(const std::string& identity) {
  return identity.substr(0, identity.find('@'));
}

} // namespace

bool same_owner(const std::string& owner, const std::string& actor) {
  if (owner == actor) {
    return true;
  }
  // Both unauthenticated identities: the same user on two machines is one person.
  const bool both_local =
      owner.find('@') != std::string::npos && actor.find('@') != std::string::npos;
  return both_local && person(owner) == person(actor);
}

Status check_owner_intent(const state::StateStore& store, const OwnedObject& object,
                          const std::string& action, bool override_owner,
                          std::vector<state::Event>& overrides) {
  if (object.owner.empty() || same_owner(object.owner, store.actor())) {
    return ok();
  }
  if (!override_owner) {
    return usage_error(object.what + " belongs to " + object.owner + ", not to you (" +
                       store.actor() + "): to " + action +
                       " it anyway, add --override-owner (recorded with both names)");
  }
  state::Event e;
  e.pool = object.pool;
  e.subject_kind = object.kind;
  e.subject = object.id;
  e.type = "OWNER_OVERRIDDEN";
  e.initiator = state::Initiator::user;
  e.detail = {{"owner", object.owner}, {"action", action}};
  overrides.push_back(std::move(e));
  return ok();
}

Status record_overrides(state::StateStore& store, const std::vector<state::Event>& events) {
  if (events.empty()) {
    return ok();
  }
  std::vector<state::Op> ops;
  for (const auto& e : events) {
    ops.push_back(state::EventOp{e});
  }
  auto committed = store.commit(ops);
  return committed ? ok() : Status(committed.error());
}

} // namespace tpuctl::provision
