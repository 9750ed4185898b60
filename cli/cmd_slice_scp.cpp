// tpuctl scp, and gcloud's `queued-resources scp` and `tpu-vm scp`: files to or from the workers
// of a queued resource or node. Arguments are scp's: SRC... DEST, where exactly one side is
// remote, written [USER@]TARGET:PATH (`TARGET:` alone is the remote home). To the workers, each
// file is streamed to every selected worker, checked by sha256 there and renamed into place
// (cli/copy_files -> remote/push); from them, each worker's file is streamed back, checked and
// kept under DEST/<worker>/ when several workers send one (remote/pull), so names never collide.
#include <optional>

#include "cli/commands.hpp"
#include "cli/copy_files.hpp"
#include "cli/slice_flags.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct Remote {
  std::string target; // [USER@]TARGET
  std::string path;
};

// "qr-1:~/a" -> remote; "./a:b", "/x:y", "a" -> local (as scp tells them apart: a ':' before
// any '/').
std::optional<Remote> as_remote(const std::string& word) {
  const auto colon = word.find(':');
  if (colon == std::string::npos || colon == 0 || word.find('/') < colon) {
    return std::nullopt;
  }
  return Remote{word.substr(0, colon), word.substr(colon + 1)};
}

Expected<int> run_scp(Context& ctx, const SliceFlags& f) {
  const std::string example = f.shape == SliceShape::tpu_vm ? "my-node" : "qr-1";
  if (f.paths.size() < 2) {
    return usage_error("give SRC... DEST with one side remote: e.g. 'data.bin " + example +
                       ":~/data/' to the workers, or '" + example +
                       ":~/out.json ./results/' from them");
  }
  std::vector<std::string> sources(f.paths.begin(), f.paths.end() - 1);
  const std::string& dest = f.paths.back();
  const auto dest_remote = as_remote(dest);
  std::vector<std::string> remote_paths;
  std::string remote_target;
  for (const auto& s : sources) {
    auto r = as_remote(s);
    if (dest_remote && r) {
      return usage_error("'" + util::printable(s) + "' and '" + util::printable(dest) +
                         "' are both remote: one side of a copy must be local");
    }
    if (!dest_remote && !r) {
      return usage_error("neither '" + util::printable(s) + "' nor '" + util::printable(dest) +
                         "' is remote: write the worker side as TARGET:PATH (e.g. " + example +
                         ":~/data/)");
    }
    if (r) {
      if (!remote_target.empty() && r->target != remote_target) {
        return usage_error("the sources name two targets ('" + util::printable(remote_target) +
                           "' and '" + util::printable(r->target) +
                           "'): copy from one queued resource or node at a time");
      }
      remote_target = r->target;
      remote_paths.push_back(r->path.empty() ? "~/" : r->path);
    }
  }
  SliceFlags flags = f;
  flags.target = dest_remote ? dest_remote->target : remote_target;
  TPUCTL_TRY_ASSIGN(auto target, split_user_target(flags.target));
  TPUCTL_TRY_ASSIGN(auto options, ssh_options(f.ssh));
  TPUCTL_TRY_ASSIGN(auto mode, parse_fanout_output(f.ssh.output));
  if (mode == FanoutOutput::grouped) {
    return usage_error("--output grouped is for ssh; scp reports with prefixed (default) or jsonl");
  }
  TPUCTL_TRY_ASSIGN(auto plans, plan_slice_workers(ctx, flags, target, false));
  if (dest_remote) {
    std::vector<remote::SshTarget> targets;
    for (const auto& p : plans) {
      targets.push_back(labelled_target(p));
    }
    return copy_files(ctx, targets, sources, dest_remote->path.empty() ? "~/" : dest_remote->path,
                      f.recurse, options, CopyReport{mode, job_identities(plans)});
  }
  if (f.recurse) {
    return usage_error("--recurse copies directories to the workers only; from them, name "
                       "each file (or 'tar' it first with tpuctl ssh)");
  }
  std::vector<FetchSource> from;
  for (const auto& p : plans) {
    from.push_back({labelled_target(p), worker_file_name(plans, p), job_identity(p)});
  }
  return fetch_files(ctx, from, remote_paths, dest, options, mode);
}

} // namespace

void setup_slice_scp(CLI::App& cmd, Registry& registry, SliceShape shape) {
  auto f = std::make_shared<SliceFlags>();
  f->shape = shape;
  registry.bind(cmd, [f](Context& ctx) { return run_scp(ctx, *f); });
  const std::string what = shape == SliceShape::tpu_vm            ? "NODE"
                           : shape == SliceShape::queued_resource ? "QR"
                                                                  : "TARGET";
  cmd.add_option("PATHS", f->paths,
                 "SRC... DEST; the worker side is [USER@]" + what + ":PATH (" + what +
                     ": alone is the remote home)")
      ->required();
  add_selection_flags(cmd, *f);
  cmd.add_flag("--recurse", f->recurse, "copy directories with their whole tree (to the workers)");
  add_ssh_flags(cmd, f->ssh, false);
  cmd.add_option("--output", f->ssh.output,
                 "prefixed (default: failures as [NODE/WORKER@HOST], then a summary) or jsonl "
                 "(one object per worker and file)")
      ->type_name("MODE")
      ->group("SSH");
  const std::string name = shape == SliceShape::queued_resource ? "tpuctl queued-resources scp"
                           : shape == SliceShape::tpu_vm        ? "tpuctl tpu-vm scp"
                                                                : "tpuctl scp";
  const std::string t = shape == SliceShape::tpu_vm ? "my-node" : "qr-1";
  cmd.footer("To the workers, each file is streamed to every selected worker, checked by sha256\n"
             "there, then renamed into place with its mode. From them, each worker's file is\n"
             "checked the same way; with several workers it lands in DEST/<worker>/ (or\n"
             "DEST/<node>-<worker>/ across nodes), so no copy overwrites another. Examples:\n  " +
             name + " ./model " + t + ":~/ --worker=all --recurse\n  " + name + " " + t +
             ":~/metrics.json ./results/ --worker=all");
}

void setup_scp(CLI::App& group, Registry& registry) {
  setup_slice_scp(group, registry, SliceShape::tpuctl);
}

} // namespace tpuctl::cli
