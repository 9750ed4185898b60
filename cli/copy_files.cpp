#include "cli/copy_files.hpp"

#include <algorithm>
#include <filesystem>

#include "cli/fanout_output.hpp"
#include "cli/output.hpp"
#include "cli/ssh_flags.hpp"
#include "cli/terminal.hpp"
#include "remote/pull.hpp"
#include "remote/push.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace fs = std::filesystem;

namespace {

struct FileCopy {
  fs::path local;
  std::string remote;
};

// Every regular file to send, with its remote path. Reports every bad source.
Expected<std::vector<FileCopy>> plan_copies(const std::vector<std::string>& sources,
                                            const std::string& dest, bool recurse) {
  ErrorList problems;
  bool any_dir = false;
  for (const auto& src : sources) {
    std::error_code ec;
    auto st = fs::status(src, ec);
    if (ec || !fs::exists(st)) {
      problems.add(ErrorKind::usage, "source '" + util::printable(src) + "' does not exist");
    } else if (fs::is_directory(st)) {
      any_dir = true;
      if (!recurse) {
        problems.add(ErrorKind::usage, "source '" + util::printable(src) +
                                           "' is a directory: add --recurse to copy its tree");
      }
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  const bool into_dir = sources.size() > 1 || any_dir || dest.back() == '/';
  const std::string base = dest.back() == '/' ? dest : dest + "/";
  std::vector<FileCopy> copies;
  for (const auto& src : sources) {
    fs::path p(src);
    std::string name = p.lexically_normal().filename().string();
    if (name.empty()) {
      name = p.lexically_normal().parent_path().filename().string();
    }
    if (!fs::is_directory(p)) {
      copies.push_back({p, into_dir ? base + name : dest});
      continue;
    }
    std::vector<FileCopy> tree;
    for (const auto& entry : fs::recursive_directory_iterator(p)) {
      if (entry.is_regular_file()) {
        tree.push_back(
            {entry.path(), base + name + "/" + fs::relative(entry.path(), p).generic_string()});
      }
    }
    std::sort(tree.begin(), tree.end(),
              [](const FileCopy& a, const FileCopy& b) { return a.remote < b.remote; });
    copies.insert(copies.end(), tree.begin(), tree.end());
  }
  return copies;
}

} // namespace

Expected<int> copy_files(Context& ctx, const std::vector<remote::SshTarget>& targets,
                         const std::vector<std::string>& sources, const std::string& dest,
                         bool recurse, const remote::SshOptions& options,
                         const CopyReport& report) {
  if (sources.empty() || dest.empty()) {
    return usage_error("give at least one SRC and a DEST (e.g. a.txt ~/data/)");
  }
  TPUCTL_TRY_ASSIGN(auto copies, plan_copies(sources, dest, recurse));
  remote::CancelToken token;
  InterruptGuard guard(token);
  int status = 0;
  Json summary = Json::array();
  Progress progress(ctx);
  for (const auto& c : copies) {
    remote::PushOptions push;
    push.local_path = c.local;
    FanoutPrinter printer(report.mode, ctx.stdout_stream(), ctx.stderr_stream(), report.identities);
    printer.set_extra(Json{{"source", c.local.string()}, {"destination", c.remote}});
    remote::FanoutCallbacks callbacks = printer.callbacks();
    size_t done = 0;
    auto printed = callbacks.on_host_done;
    const std::string name = c.local.filename().string();
    callbacks.on_host_done = [&, printed](const remote::HostResult& r) {
      if (printed) {
        printed(r);
      }
      ++done;
      progress.status("copy " + name + " " + std::to_string(done) + "/" +
                          std::to_string(targets.size()) + " " + r.host,
                      done == targets.size());
    };
    TPUCTL_TRY_ASSIGN(auto results, remote::push_file(remote::make_push_jobs(targets, c.remote),
                                                      push, options, callbacks, &token));
    printer.finish(results);
    int s = guard.interrupted() ? guard.exit_status() : broadcast_exit_status(results);
    status = status ? status : s;
    auto ok = std::count_if(results.begin(), results.end(),
                            [](const auto& r) { return r.outcome == remote::Outcome::ok; });
    summary.push_back(Json{{"source", c.local.string()},
                           {"destination", c.remote},
                           {"hosts", results.size()},
                           {"copied_count", ok}});
    if (guard.interrupted()) {
      break;
    }
  }
  if (report.mode != FanoutOutput::jsonl) {
    TPUCTL_TRY(emit_list(ctx, summary,
                         {{"SOURCE", "source"},
                          {"DESTINATION", "destination"},
                          {"HOSTS", "hosts"},
                          {"COPIED_COUNT", "copied_count"}}));
  }
  return status;
}

Expected<int> fetch_files(Context& ctx, const std::vector<FetchSource>& sources,
                          const std::vector<std::string>& paths, const std::string& dest,
                          const remote::SshOptions& options, FanoutOutput mode) {
  if (sources.empty() || paths.empty() || dest.empty()) {
    return usage_error("give TARGET:PATH... and a local DEST (e.g. qr-1:~/out.json ./results/)");
  }
  std::error_code ec;
  const bool dest_is_dir = fs::is_directory(dest, ec) || dest.back() == '/';
  if (sources.size() > 1 || paths.size() > 1) {
    if (fs::exists(dest, ec) && !fs::is_directory(dest, ec)) {
      return usage_error("'" + util::printable(dest) + "' is a file, but copies from " +
                         std::to_string(sources.size()) +
                         " workers need a directory: name a "
                         "directory (each worker's files go to DIR/<worker>/)");
    }
  } else if (!dest_is_dir &&
             !fs::is_directory(fs::path(dest).parent_path().empty() ? fs::path(".")
                                                                    : fs::path(dest).parent_path(),
                               ec)) {
    return usage_error("the directory of '" + util::printable(dest) + "' does not exist");
  }
  const bool per_worker = sources.size() > 1;
  remote::CancelToken token;
  InterruptGuard guard(token);
  int status = 0;
  Json summary = Json::array();
  for (const auto& path : paths) {
    std::string name = fs::path(path).filename().string();
    if (name.empty() || name == "~") {
      return usage_error("'" + util::printable(path) + "' names no file to copy");
    }
    std::vector<remote::PullJob> jobs;
    for (size_t i = 0; i < sources.size(); ++i) {
      fs::path local;
      if (per_worker) {
        fs::path dir = fs::path(dest) / sources[i].label;
        fs::create_directories(dir, ec);
        if (ec) {
          return Error(ErrorKind::failure, "cannot create '" + dir.string() + "': " + ec.message());
        }
        local = dir / name;
      } else if (dest_is_dir || paths.size() > 1) {
        fs::create_directories(dest, ec);
        local = fs::path(dest) / name;
      } else {
        local = dest;
      }
      jobs.push_back({sources[i].target, path, local, i});
    }
    std::vector<JobIdentity> identities;
    for (const auto& src : sources) {
      identities.push_back(src.identity);
    }
    FanoutPrinter printer(mode, ctx.stdout_stream(), ctx.stderr_stream(), identities);
    printer.set_extra(Json{{"source", path}, {"destination", dest}});
    remote::FanoutCallbacks callbacks = printer.callbacks();
    callbacks.on_line = nullptr; // the lines are the file's bytes and its checksum
    TPUCTL_TRY_ASSIGN(auto results, remote::pull_file(jobs, options, callbacks, &token));
    printer.finish(results);
    int s = guard.interrupted() ? guard.exit_status() : broadcast_exit_status(results);
    status = status ? status : s;
    for (const auto& r : results) {
      Json row = identity_json(&sources[r.index].identity, r.host);
      row["source"] = path;
      row["destination"] = jobs[r.index].local_path.string();
      row["copied"] = r.succeeded();
      summary.push_back(std::move(row));
    }
    if (guard.interrupted()) {
      break;
    }
  }
  if (mode != FanoutOutput::jsonl) {
    TPUCTL_TRY(emit_list(ctx, summary,
                         {{"NODE", "node"},
                          {"WORKER", "worker"},
                          {"HOST", "host"},
                          {"SOURCE", "source"},
                          {"DESTINATION", "destination"},
                          {"COPIED", "copied"}}));
  }
  return status;
}

} // namespace tpuctl::cli
