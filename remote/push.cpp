// push_file: one session per host, up to two channels on it. With skip_if_same, a first
// channel asks the remote `sha256sum` for the current file's hash; when it matches, only the mode
// is set. Otherwise the upload channel receives the file as its stdin (flow-controlled by the
// channel window: the engine writes only as much as the remote window allows, so a slow host
// never stalls the others), writes it to a temporary name next to the destination, verifies the
// hash, sets the mode and renames it into place.
#include "remote/push.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>

#include "remote/worker_pool.hpp"
#include "util/sha256.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int k_hash_mismatch_exit = 97;

std::string octal(unsigned mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777u);
  return buf;
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char k_alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 12; ++i) {
    out += k_alnum[rng() % 36];
  }
  return out;
}

// `dest` as the shell word the scripts assign to d: a relative path that starts with '-' gets
// "./" in front, so no command in the scripts (rm, chmod, mv) can take it for an option.
std::string dest_word(const std::string& dest) {
  return util::shell_quote_path(util::starts_with(dest, "-") ? "./" + dest : dest);
}

std::string last_line(const std::string& text) {
  std::string_view t = util::trim(text);
  size_t nl = t.rfind('\n');
  return std::string(nl == std::string_view::npos ? t : t.substr(nl + 1));
}

HostResult push_one(const PushJob& job, const PushOptions& push, const SshOptions& options,
                    const std::shared_ptr<const std::string>& content, const std::string& hash,
                    unsigned mode, detail::WorkerContext& ctx, detail::EventSink& events) {
  const auto t0 = Clock::now();
  HostResult r;
  r.index = job.index;
  r.host = job.target.display_name();
  auto finish = [&]() {
    r.duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    events.host_done(r);
    return r;
  };
  if (ctx.cancelled()) {
    r = detail::not_started(job.index, r.host);
    return finish();
  }
  SshOptions attempt;
  auto [connected, failure] = detail::connect_with_retries(ctx, options, job.target, attempt);
  if (failure) {
    r.outcome = failure->outcome;
    r.error = failure->message;
    return finish();
  }
  detail::SshSession& session = *connected;
  std::string out, err;
  detail::ExecSink sink = [&](Stream stream, const char* data, size_t size) {
    if (r.first_byte_ms < 0) {
      r.first_byte_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    }
    (stream == Stream::out ? out : err).append(data, size);
  };
  auto fill = [&](const detail::ExecResult& e) {
    r.outcome = e.outcome;
    r.exit_code = e.exit_code;
    r.signal_name = e.signal_name;
    r.signal_number = e.signal_number;
    r.error = e.error;
    r.out = out;
    r.err = err;
  };
  if (push.skip_if_same) {
    detail::ExecResult e = session.exec(
        {push_check_script(job.remote_path, hash, mode), nullptr, options.command_timeout}, sink);
    fill(e);
    if (e.outcome != Outcome::ok) {
      if (r.error.empty()) {
        r.error = "cannot check '" + job.remote_path + "': " + last_line(err);
      }
      return finish();
    }
    if (util::trim(out) == "same") {
      r.unchanged = true;
      return finish();
    }
    out.clear();
    err.clear();
  }
  detail::ExecResult e = session.exec(
      {push_upload_script(job.remote_path, hash, mode, random_suffix(), push.make_parents), content,
       options.command_timeout},
      sink);
  fill(e);
  if (e.outcome == Outcome::exit_code) {
    r.error = e.exit_code == k_hash_mismatch_exit
                  ? "the copy of '" + job.remote_path + "' is corrupt: " + last_line(err)
                  : "cannot write '" + job.remote_path + "': " + last_line(err);
  }
  return finish();
}

} // namespace

std::string push_check_script(const std::string& dest, const std::string& sha256, unsigned mode) {
  std::string d = dest_word(dest);
  return "d=" + d +
         "\n"
         "if [ -f \"$d\" ] && h=$(sha256sum < \"$d\") && [ \"${h%% *}\" = " +
         sha256 +
         " ]; then\n"
         "  chmod " +
         octal(mode) +
         " \"$d\" && echo same\n"
         "else\n"
         "  echo differ\n"
         "fi\n";
}

std::string push_upload_script(const std::string& dest, const std::string& sha256, unsigned mode,
                               const std::string& temp_suffix, bool make_parents) {
  std::string d = dest_word(dest);
  std::string s = "d=" + d + "\nt=\"$d\".tmp." + temp_suffix + "\n";
  s += "trap 'rm -f \"$t\"' EXIT\n";
  s += "trap 'exit 143' HUP INT TERM\n";
  s += "umask 077\n";
  if (make_parents) {
    s += "mkdir -p -- \"$(dirname -- \"$d\")\" || exit 1\n";
  }
  s += "cat > \"$t\" || exit 1\n";
  s += "h=$(sha256sum < \"$t\") || exit 1\n";
  s += "h=${h%% *}\n";
  s += "if [ \"$h\" != " + sha256 + " ]; then\n";
  s += "  echo \"sha256 is $h, expected " + sha256 + "\" >&2; exit " +
       std::to_string(k_hash_mismatch_exit) + "\n";
  s += "fi\n";
  s += "chmod " + octal(mode) + " \"$t\" && mv -f -- \"$t\" \"$d\"\n";
  return s;
}

Expected<std::vector<HostResult>> push_file(const std::vector<PushJob>& jobs,
                                            const PushOptions& push, const SshOptions& options,
                                            const FanoutCallbacks& callbacks,
                                            const CancelToken* cancel) {
  struct stat st {};
  if (::stat(push.local_path.c_str(), &st) != 0) {
    return make_error(ErrorKind::failure, "cannot push '" + push.local_path.string() +
                                              "': " + std::strerror(errno) +
                                              " (give a readable regular file)");
  }
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorKind::failure, "cannot push '" + push.local_path.string() +
                                              "': not a regular file (give a regular file)");
  }
  ErrorList problems;
  for (const auto& j : jobs) {
    if (j.remote_path.empty() || j.remote_path.back() == '/') {
      problems.add(ErrorKind::usage, "remote path '" + j.remote_path + "' for host '" +
                                         j.target.display_name() +
                                         "' must name a file, not a directory");
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  std::ifstream in(push.local_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) {
    return make_error(ErrorKind::failure, "cannot read '" + push.local_path.string() + "'");
  }
  auto content = std::make_shared<const std::string>(ss.str());
  const std::string hash = util::sha256_hex(*content);
  const unsigned mode = push.mode.value_or(st.st_mode & 07777u);

  std::vector<const SshTarget*> targets;
  for (const auto& j : jobs) {
    targets.push_back(&j.target);
  }
  TPUCTL_TRY_ASSIGN(auto identities, detail::prepare_run(targets, options));
  detail::EventSink events(callbacks);
  return detail::run_pool(jobs.size(), options.batch_size, identities, cancel,
                          [&](size_t i, detail::WorkerContext& ctx) {
                            return push_one(jobs[i], push, options, content, hash, mode, ctx,
                                            events);
                          });
}

std::vector<PushJob> make_push_jobs(const std::vector<SshTarget>& targets,
                                    const std::string& remote_path) {
  std::vector<PushJob> jobs;
  for (size_t i = 0; i < targets.size(); ++i) {
    jobs.push_back(PushJob{targets[i], remote_path, i});
  }
  return jobs;
}

} // namespace tpuctl::remote
