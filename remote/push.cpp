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

// `dest` as the shell word the scripts assign to d: a relative path that starts with '-' gets
// "./" in front, so no command in the scripts (rm, chmod, mv) can take it for an option.
std::string dest_word(const std::string& dest) {
  return util::shell_quote_path(util::starts_with(dest, "-") ? "./" + dest : dest);
}

} // namespace

namespace detail {

void push_on(SshSession& session, const std::string& remote_path, const PushPayload& payload,
             std::chrono::milliseconds timeout, HostResult& r, Clock::time_point t0,
             bool may_upload) {
  std::string out, err;
  ExecSink sink = [&](Stream stream, const char* data, size_t size) {
    if (r.first_byte_ms < 0) {
      r.first_byte_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    }
    (stream == Stream::out ? out : err).append(data, size);
  };
  auto fill = [&](const ExecResult& e) {
    r.outcome = e.outcome;
    r.exit_code = e.exit_code;
    r.signal_name = e.signal_name;
    r.signal_number = e.signal_number;
    r.error = e.error;
    r.out = out;
    r.err = err;
  };
  const PushOptions& push = payload.options;
  if (push.skip_if_same) {
    ExecRequest check;
    check.command = push_check_script(remote_path, payload.sha256, payload.mode, push.stamp);
    check.timeout = timeout;
    check.reap = false;
    ExecResult e = session.exec(check, sink);
    fill(e);
    if (e.outcome != Outcome::ok) {
      if (r.error.empty()) {
        r.error = "cannot check '" + remote_path + "': " + util::last_line(err);
      }
      return;
    }
    if (util::trim(out) == "same") {
      r.unchanged = true;
      return;
    }
    if (!may_upload) {
      return; // ok, not unchanged: a later step brings the file
    }
    out.clear();
    err.clear();
  }
  ExecRequest upload;
  upload.command = push_upload_script(remote_path, payload.sha256, payload.mode,
                                      util::random_hex_id(), push.make_parents, push.stamp);
  upload.stdin_data = InputBytes::of(payload.content);
  upload.timeout = timeout;
  upload.reap = false;
  ExecResult e = session.exec(upload, sink);
  fill(e);
  if (e.outcome == Outcome::exit_code) {
    r.error = e.exit_code == k_hash_mismatch_exit
                  ? "the copy of '" + remote_path + "' is corrupt: " + util::last_line(err)
                  : "cannot write '" + remote_path + "': " + util::last_line(err);
  }
}

namespace {

Status check_remote_paths(const std::vector<std::string>& remote_paths,
                          const std::vector<std::string>& host_names) {
  ErrorList problems;
  for (size_t i = 0; i < remote_paths.size(); ++i) {
    const std::string& path = remote_paths[i];
    if (path.empty() || path.back() == '/') {
      problems.add(ErrorKind::usage, "remote path '" + path + "' for host '" +
                                         (i < host_names.size() ? host_names[i] : std::string()) +
                                         "' must name a file, not a directory");
    }
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return {};
}

} // namespace

Expected<PushPayload> load_push_payload(const PushOptions& push,
                                        const std::vector<std::string>& remote_paths,
                                        const std::vector<std::string>& host_names) {
  if (push.content && !push.sha256.empty() && push.mode) {
    TPUCTL_TRY(check_remote_paths(remote_paths, host_names));
    PushPayload given;
    given.content = push.content;
    given.sha256 = push.sha256;
    given.mode = *push.mode;
    given.options = push;
    return given;
  }
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
  TPUCTL_TRY(check_remote_paths(remote_paths, host_names));
  std::ifstream in(push.local_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) {
    return make_error(ErrorKind::failure, "cannot read '" + push.local_path.string() + "'");
  }
  PushPayload payload;
  payload.content = std::make_shared<const std::string>(ss.str());
  payload.sha256 = util::sha256_hex(*payload.content);
  payload.mode = push.mode.value_or(st.st_mode & 07777u);
  payload.options = push;
  return payload;
}

} // namespace detail

namespace {

// The stamp of the file in $d, "<sha256> <mode> <size> <mtime> <ctime> <inode>", as the shell
// expands it: with the mode the file has (to write a stamp), or with `mode` (to compare one).
std::string stamp_line(const std::string& sha256) {
  return sha256 + " $(stat -c '%a %s %y %z %i' -- \"$d\" 2>/dev/null)";
}
std::string stamp_line(const std::string& sha256, const std::string& mode) {
  return sha256 + " " + mode + " $(stat -c '%s %y %z %i' -- \"$d\" 2>/dev/null)";
}

// Sets h to the sha256 of FILE: openssl's when the host has it (SHA-NI where the CPU has it:
// 5.4 MB in 7 ms here against sha256sum's 17), else coreutils' sha256sum.
std::string hash_into_h(const std::string& file) {
  return "h=$(openssl dgst -sha256 -r < " + file + " 2>/dev/null) || h=$(sha256sum < " + file + ")";
}

// The mode as stat's %a prints it: octal without leading zeros.
std::string stat_mode(unsigned mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", mode & 07777u);
  return buf;
}

} // namespace

namespace {

// The check of the copy at `dest`: `on_same` runs (it must end the script) when it is already
// there (its stamp still matches a fresh stat, or its sha256 does: then it is stamped), else the
// script goes on after the check.
std::string check_part(const std::string& dest, const std::string& sha256, unsigned mode,
                       bool stamp, const std::string& on_same) {
  std::string s = "d=" + dest_word(dest) + "\n";
  if (stamp) {
    // An unchanged file verified before: its stamp still matches a fresh stat (the mode
    // included, so a file whose mode must change is hashed and fixed below).
    s += "if [ -f \"$d\" ] && read -r v 2>/dev/null < \"$d\".sha256 && [ \"$v\" = \"" +
         stamp_line(sha256, stat_mode(mode)) + "\" ]; then\n  " + on_same + "\nfi\n";
  }
  s += "if [ -f \"$d\" ] && " + hash_into_h("\"$d\"") + " && [ \"${h%% *}\" = " + sha256 +
       " ] && chmod " + octal(mode) + " \"$d\"; then\n";
  if (stamp) {
    s += "  { umask 077; echo \"" + stamp_line(sha256) + "\" > \"$d\".sha256; } 2>/dev/null\n";
  }
  s += "  " + on_same + "\nfi\n";
  return s;
}

} // namespace

std::string push_check_script(const std::string& dest, const std::string& sha256, unsigned mode,
                              bool stamp) {
  return check_part(dest, sha256, mode, stamp, "echo same; exit 0") + "echo differ\n";
}

namespace {

// Checks the temporary file $t against `sha256`, sets the mode and renames it to $d (and stamps
// it): the end shared by an upload and a fetch.
std::string install_temp(const std::string& sha256, unsigned mode, bool stamp,
                         bool mode_set = false) {
  std::string s = "{ " + hash_into_h("\"$t\"") + "; } || exit 1\n";
  s += "h=${h%% *}\n";
  s += "if [ \"$h\" != " + sha256 + " ]; then\n";
  s += "  echo \"sha256 is $h, expected " + sha256 + "\" >&2; exit " +
       std::to_string(k_hash_mismatch_exit) + "\n";
  s += "fi\n";
  s += (mode_set ? std::string() : "chmod " + octal(mode) + " \"$t\" && ") +
       "mv -f -- \"$t\" \"$d\" || exit 1\n";
  if (stamp) {
    s += "echo \"" + stamp_line(sha256) + "\" 2>/dev/null > \"$d\".sha256 || true\n";
  }
  return s;
}

// `install` writes $t from a pipe with its mode in one process (two with cat and chmod); it
// opens its input by name, so only a pipe will do. Never `install -D`: it makes the parents
// 0755 whatever the umask (install clears it), and tpuctl's directories are 0700.
std::string install_from_pipe(unsigned mode) {
  return "install -m " + octal(mode) + " /dev/stdin \"$t\"";
}

// Makes $d's directory (0700 under the prologue's umask) when it is missing: a test, no
// process, when it is there.
const char* k_make_parents =
    "case $d in ?*/*) [ -d \"${d%/*}\" ] || mkdir -p -- \"${d%/*}\" || exit 1 ;; esac\n";

std::string temp_prologue(const std::string& dest, const std::string& temp_suffix,
                          bool make_parents) {
  std::string d = dest_word(dest);
  std::string s = "d=" + d + "\nt=\"$d\".tmp." + temp_suffix + "\n";
  s += "trap '[ ! -e \"$t\" ] || rm -f \"$t\"' EXIT\n"; // no rm once $t became $d
  s += "trap 'exit 143' HUP INT TERM\n";
  s += "umask 077\n";
  if (make_parents) { // ${d%/*}, not dirname: one process fewer
    s += k_make_parents;
  }
  return s;
}

} // namespace

std::string push_upload_script(const std::string& dest, const std::string& sha256, unsigned mode,
                               const std::string& temp_suffix, bool make_parents, bool stamp) {
  // sshd gives the command a pipe for stdin (OpenSSH on Linux); anything else is copied.
  return temp_prologue(dest, temp_suffix, make_parents) + "if [ -p /dev/stdin ]; then\n  " +
         install_from_pipe(mode) + " || exit 1\nelse\n" + "  cat > \"$t\" && chmod " + octal(mode) +
         " \"$t\" || exit 1\nfi\n" + install_temp(sha256, mode, stamp, true);
}

std::string push_fetch_script(const std::string& dest, const std::string& sha256, unsigned mode,
                              const std::string& host, int port, const std::string& temp_suffix,
                              bool stamp) {
  // bash's /dev/tcp: the host needs nothing but bash. The seed may not listen yet (it starts in
  // the same step): try for 10 s, waiting with `read -t` on an empty pipe (made once, on the
  // first retry) instead of running `sleep`, so retries start no process. A transfer cut short
  // fails the sha256 check.
  const std::string from = "/dev/tcp/" + util::shell_quote(host) + "/" + std::to_string(port);
  return temp_prologue(dest, temp_suffix, true) +
         "exec 9>&2\n"
         "i=0\n"
         "until exec 3<> " +
         from +
         "; do\n"
         "  i=$((i+1))\n"
         "  if [ $i -ge 100 ]; then echo \"cannot fetch from " +
         host + ":" + std::to_string(port) +
         "\" >&9; exit 1; fi\n"
         "  [ $i -gt 1 ] || exec 8<> <(:)\n" // the empty pipe, made on the first retry only
         "  read -t 0.1 -u 8 _\n"
         "done 2>/dev/null\n"
         // Not `cat | install`: through a pipe the bytes are copied once more (measured).
         "printf F >&3 && cat <&3 > \"$t\" || exit 1\n"
         "exec 3<&-\n" +
         install_temp(sha256, mode, stamp);
}

std::string with_bash(const std::string& script) {
  return "s=" + util::shell_quote(script) +
         "\nif [ -n \"${BASH_VERSION-}\" ]; then eval \"$s\"; else exec bash -c \"$s\"; fi\n";
}

std::string push_check_or_fetch_script(const std::string& dest, const std::string& sha256,
                                       unsigned mode, const std::string& host, int port,
                                       const std::string& temp_suffix) {
  if (host.empty()) {
    return check_part(dest, sha256, mode, true, "exit 0") + "exit " +
           std::to_string(k_missing_exit) + "\n";
  }
  return check_part(dest, sha256, mode, true, "exit 0") +
         push_fetch_script(dest, sha256, mode, host, port, temp_suffix, true) + "exit " +
         std::to_string(k_fetched_exit) + "\n";
}

Expected<std::vector<HostResult>> push_file(const std::vector<PushJob>& jobs,
                                            const PushOptions& push, const SshOptions& options,
                                            const FanoutCallbacks& callbacks,
                                            const CancelToken* cancel) {
  std::vector<std::string> paths, names;
  std::vector<const SshTarget*> targets;
  for (const auto& j : jobs) {
    paths.push_back(j.remote_path);
    names.push_back(j.target.display_name());
    targets.push_back(&j.target);
  }
  TPUCTL_TRY_ASSIGN(detail::PushPayload payload, detail::load_push_payload(push, paths, names));
  TPUCTL_TRY_ASSIGN(auto identities, detail::prepare_run(targets, options));
  detail::EventSink events(callbacks);
  return detail::run_pool(
      jobs.size(), options.batch_size, identities, cancel,
      [&](size_t i, detail::WorkerContext& ctx) {
        const PushJob& job = jobs[i];
        return detail::run_host(
            job.index, job.target, options, ctx, events,
            [&](detail::SshSession& session, HostResult& r, Clock::time_point t0) {
              detail::push_on(session, job.remote_path, payload, options.command_timeout, r, t0);
            });
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
