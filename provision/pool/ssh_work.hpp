// Who does the SSH work of a shared pool's requests and workloads: provisioning a slice (which
// runs its startup script on every worker), repairing it, launching, watching and stopping a
// workload. Whoever does it does it with their own SSH keys, so on a pool a team shares the
// question is whose keys may run whose scripts. A pool answers with one of three:
//
//   anyone      any tpuctl process carries any request on: the command that finds work due (a
//               `qr list` included) does it, or starts a detached driver for it. tpuctl's
//               behaviour before pools were shared, and what a SQLite store keeps: its file is
//               0600, so one user reaches it anyway.
//   owner       only the owner's own processes (their commands, and the drivers and monitors
//               those start) do the SSH work of what the owner made; anyone else's command
//               leaves it waiting, with a reason that names the owner. The default of a pool
//               made on an etcd store: it needs no daemon and never runs one person's script
//               with another's keys.
//   controller  only `tpuctl controller run` (with its own SSH identity), elected leader among
//               the controllers of the store through an etcd lease (StateStore::campaign), and
//               the monitors it starts; everybody else's commands record and wait. For a pool
//               whose hosts trust one service key, not each engineer's.
//
// A request made before owners were recorded has no owner: any process may carry it, as before.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "state/store.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

enum class SshWork { anyone, owner, controller };

std::string_view to_string(SshWork w);
// "anyone", "owner" or "controller". Errors: usage naming the value and the choices.
Expected<SshWork> parse_ssh_work(const std::string& text);

// What a pool made on `store` gets: owner on etcd (a store people share), anyone on SQLite.
SshWork default_ssh_work(const state::StateStore& store);

// The leadership role `tpuctl controller run` campaigns for (StateStore::campaign).
inline constexpr const char* k_controller_role = "controller";

// Who the calling process is, for the SSH work.
struct SshWorker {
  std::string actor;          // StateStore::actor()
  bool as_controller = false; // the elected controller, or a monitor it started
};

// Nothing when `worker` may do the SSH work of what `owner` made in pool `pool` (policy
// `policy`); otherwise why not, as the waiting object's reason: "waiting for its owner alice
// (pool 'p': only an owner's own tpuctl does the SSH work of what they made)".
std::optional<std::string> ssh_work_refusal(const std::string& pool, SshWork policy,
                                            const std::string& owner, const SshWorker& worker);

} // namespace tpuctl::provision
