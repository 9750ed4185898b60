// Secrets: environment variables whose values a command, a workload or a slice's startup script
// needs (a token, a password) and that nobody else may read. `--env-secret NAME` takes NAME's
// value from the caller's environment (never from the command line, where `ps` shows it).
//
// Where a value goes, and where it never does:
//  * to a worker: on the SSH channel's stdin, never in the command. The command starts with
//    `IFS= read -r NAME; ...; export NAME ...; ` (shell builtins: no process is started, so no
//    command line carries the value), then runs what it runs with the values in its environment
//    (/proc/PID/environ, which only the worker's own user and root can read). The values come
//    first on stdin, one per line; anything else the command reads (--stdin, a startup script
//    for `bash -s`) follows them. A start through a monitor's stream carries them in the JSON
//    control line on that stream's stdin, and the agent hands them to the shell's stdin.
//  * into the state store, for workloads and queued resources only: a monitor or a driver that
//    restarts a workload, repairs or provisions a slice later needs them again. They are kept in
//    the record (SQLite: the 0600 file; etcd: readable by the users whose role reads the prefix;
//    `state backup` copies them, 0600): SECURITY.md says so. `tpuctl ssh` keeps nothing.
//  * never into an output (describe, list, json show the names: `secrets: ["TOKEN"]`), an event,
//    a log line, an error text, or a command line on any host.
// A value may hold any byte but NUL and newline (a line on stdin each).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace tpuctl::provision {

using Secrets = std::map<std::string, std::string>; // name -> value

// The values of `names` from this process's environment. Errors: usage, every problem named
// (never a value): an invalid name, one tpuctl sets on the workers (PATH, TPU_*, TPUCTL_*,
// MEGASCALE_*), one given twice, one not set in the environment, a value with a NUL or a newline.
Expected<Secrets> secrets_from_environment(const std::vector<std::string>& names);

// Checks that no secret is also a plain variable (`--env NAME=...`). Errors: usage naming it.
Status check_secrets_apart(const Secrets& secrets,
                           const std::vector<std::pair<std::string, std::string>>& env);

// `IFS= read -r A; IFS= read -r B; export A B; ` to put in front of a command a POSIX shell
// runs; "" when there are none.
std::string secret_read_prefix(const Secrets& secrets);
// The values, one line each in name order: what the command's stdin starts with.
std::string secret_input(const Secrets& secrets);
// The names, for outputs: ["A", "B"].
nlohmann::json secret_names(const Secrets& secrets);

// The record field: {name: value}. Only the store sees it; outputs use secret_names.
nlohmann::json to_json(const Secrets& secrets);
Secrets secrets_from_json(const nlohmann::json& doc); // anything else: none

} // namespace tpuctl::provision
