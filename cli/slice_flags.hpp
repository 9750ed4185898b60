// What `tpuctl ssh|scp|env` and their gcloud shapes (`queued-resources ssh|scp QR`, `tpu-vm
// ssh|scp NODE`) share: the flags that pick workers, `[USER@]TARGET`, and the plan of the workers
// picked, each with its SSH target and worker environment (provision/slice_workers).
//
// The three shapes are one implementation; they differ only where gcloud does:
//   tpuctl           TARGET is a queued resource (all its nodes) or a node; --node defaults to
//                    all; words after `--` are the command, each quoted for you;
//   queued_resource  TARGET is a queued resource; --node defaults to 0 (gcloud's);
//   tpu_vm           TARGET is a node; there is no --node.
// In every shape, words after `--` start with what ssh would take as options there: -L, -R, -N
// and -4 (port forwarding, as --ssh-flag gives them; cli/ssh_args.hpp), any other refused (tpuctl
// runs no ssh binary); the rest is the command, in the gcloud shapes joined with spaces as ssh
// joins them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "cli/registry.hpp"
#include "cli/ssh_flags.hpp"
#include "provision/slice/slice_workers.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

enum class SliceShape { tpuctl, queued_resource, tpu_vm };

struct SliceFlags {
  SliceShape shape = SliceShape::tpuctl;
  std::string target; // [USER@]TARGET as given
  std::string worker = "0";
  std::string node = "all";
  std::vector<std::string> env;
  std::vector<std::string> env_secrets; // ssh: --env-secret NAME (provision/slice/secrets.hpp)
  std::string env_profile = "none";
  std::string python_env; // --python-env (python_env_setting gives the default)
  std::string command;
  std::vector<std::string> argv;      // ssh: the words after "--"
  std::vector<std::string> ssh_flags; // ssh: --ssh-flag values (cli/ssh_args.hpp)
  std::vector<std::string> paths;     // scp: SRC... DEST
  std::string output_directory;       // ssh: each worker's output into DIR/<worker>.log
  bool dry_run = false;
  bool recurse = false;
  SshFlags ssh;
};

// "alice@qr-1" -> {"alice", "qr-1"}; "qr-1" -> {"", "qr-1"}. Errors: usage for more than one
// '@', or an empty user or target.
struct UserTarget {
  std::string user;
  std::string target;
};
Expected<UserTarget> split_user_target(const std::string& text);

// --worker (and --node, except in the tpu_vm shape) with the shape's defaults and help.
void add_selection_flags(CLI::App& cmd, SliceFlags& f);

// The workers `f` selects on `target` (a queued resource or a node; `user` replaces each
// worker's SSH user when not empty), node by node in worker order, each with its environment.
// `launching`: the caller is about to start commands there (ssh, not scp or env), so the request
// is told first (provision::note_launch: deleting it will then stop what they leave running).
// Errors: the store's, not_found (no such target or node), failure (not ACTIVE), usage (bad
// selection or environment).
Expected<std::vector<provision::WorkerPlan>>
plan_slice_workers(Context& ctx, const SliceFlags& f, const UserTarget& target, bool launching);

// A worker's file or directory name (--output-directory, scp from the workers): "<worker>" when
// every plan is on one node, else "<node>-<worker>". Never fails.
std::string worker_file_name(const std::vector<provision::WorkerPlan>& plans,
                             const provision::WorkerPlan& plan);

// Each plan's identity in a fan-out (by plan index), and its SSH target named by
// provision::worker_label(), so prefixes, grouped headers and failure summaries name the
// node, worker and host alike on every slice. Never fail.
std::vector<JobIdentity> job_identities(const std::vector<provision::WorkerPlan>& plans);
JobIdentity job_identity(const provision::WorkerPlan& plan);
// identity_json() of a plan: {node, slice, worker, host}, to which a row adds its own fields.
nlohmann::ordered_json plan_json(const provision::WorkerPlan& plan);
remote::SshTarget labelled_target(const provision::WorkerPlan& plan);

// Declares `cmd` as the ssh (cmd_slice.cpp) or scp (cmd_slice_scp.cpp) of `shape` and binds it.
void setup_slice_ssh(CLI::App& cmd, Registry& registry, SliceShape shape);
void setup_slice_scp(CLI::App& cmd, Registry& registry, SliceShape shape);

} // namespace tpuctl::cli
