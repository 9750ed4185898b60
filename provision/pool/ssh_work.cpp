#include "provision/pool/ssh_work.hpp"

#include "provision/pool/ownership.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

std::string_view to_string(SshWork w) {
  switch (w) {
  case SshWork::owner:
    return "owner";
  case SshWork::controller:
    return "controller";
  case SshWork::anyone:
    break;
  }
  return "anyone";
}

Expected<SshWork> parse_ssh_work(const std::string& text) {
  for (SshWork w : {SshWork::anyone, SshWork::owner, SshWork::controller}) {
    if (text == to_string(w)) {
      return w;
    }
  }
  return Error(ErrorKind::usage, "who does the SSH work: '" + util::printable(text) +
                                     "' is not one of owner, controller, anyone");
}

SshWork default_ssh_work(const state::StateStore& store) {
  return store.info().backend == "etcd" ? SshWork::owner : SshWork::anyone;
}

std::optional<std::string> ssh_work_refusal(const std::string& pool, SshWork policy,
                                            const std::string& owner, const SshWorker& worker) {
  switch (policy) {
  case SshWork::anyone:
    return std::nullopt;
  case SshWork::owner:
    if (owner.empty() || same_owner(owner, worker.actor)) {
      return std::nullopt;
    }
    return "waiting for its owner " + owner + " (pool '" + pool +
           "': only an owner's own tpuctl does the SSH work of what they made)";
  case SshWork::controller:
    if (worker.as_controller) {
      return std::nullopt;
    }
    return "waiting for the pool's controller (pool '" + pool +
           "': only `tpuctl controller run` does the SSH work)";
  }
  return std::nullopt;
}

} // namespace tpuctl::provision
