// An interactive session on one host: what `gcloud compute tpus tpu-vm ssh NODE --worker N` does
// without --command. A PTY of the local terminal's size and $TERM, the local terminal in raw
// mode for the session (restored after, also on error), keystrokes forwarded as typed, window
// size changes forwarded, and the remote exit status returned.
#pragma once

#include <string>

#include "remote/forwarding.hpp"
#include "remote/ssh_types.hpp"
#include "util/expected.hpp"

namespace tpuctl::remote {

// Connects to `target` (host-key policy, keys and agent as for a fan-out) and runs `command` in
// a PTY (a login shell when empty), relaying this process's stdin to it and its output to
// stdout until it ends, carrying `forwards` (ssh -L/-R) meanwhile, or until `cancel`. Returns its
// exit status (255 when it died by a signal or the connection dropped). Errors: the
// connection's failure (refused, unreachable, auth, host key), with the outcome in
// Error::reason (to_string(Outcome)); a -R the server refuses.
Expected<int> run_interactive(const SshTarget& target, const SshOptions& options,
                              const std::string& command, ForwardSet* forwards = nullptr,
                              const CancelToken* cancel = nullptr);

} // namespace tpuctl::remote
