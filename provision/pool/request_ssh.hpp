// Whose SSH settings carry a request on.
//
// A queued resource and a workload record the SSH settings they were made with
// (remote/ssh_settings.hpp: --ssh-config, --strict-host-key-checking,
// --identity-passphrase-file, --connect-timeout). Whatever process later does their SSH work
// (a detached driver started by `--async` or by a delete that unblocked the queue, a workload's
// monitor, a repair) lays those over its own options when it is one of the owner's processes:
// the owner's own setup follows their request wherever it goes on. Anyone else's process (a
// teammate's command on a pool whose SSH work is anyone's, the elected controller) keeps its own
// settings: one person's relaxed host-key policy or private ssh_config never steers another's
// process, which connects with its own identity anyway. A recorded file that this process cannot
// read (the request was made on another machine) is left out, and the process's own stands.
//
// Precedence, most specific first: a host record's port, user and identity file; then the
// recorded (or given) ssh_config for the host (Port, User, IdentityFile, UserKnownHostsFile,
// ...); then ssh's defaults (port 22, the local user, ssh-agent and ~/.ssh/id_*).
#pragma once

#include <nlohmann/json.hpp>

#include "remote/ssh_settings.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

using Json = nlohmann::json;

// The record's form: {"strict_host_key_checking", "ssh_config", "identity_passphrase_file",
// "connect_timeout_ms"}, each only when set; null when nothing is.
Json to_json(const remote::SshSettings& settings);
// The record's form back; anything missing or of another type is left unset.
remote::SshSettings ssh_settings_from_json(const Json& doc);

// The options for the SSH work of what `owner` made with `recorded`, done by a process whose
// store actor is `actor` with options `own`: `own` with `recorded` laid over it when the actor is
// the owner (ownership.hpp same_owner), else `own`. Errors: usage (a recorded policy this version
// does not know).
Expected<remote::SshOptions> request_ssh(const remote::SshOptions& own,
                                         const remote::SshSettings& recorded,
                                         const std::string& owner, const std::string& actor);

} // namespace tpuctl::provision
