// pull_file: one exec channel per host. The remote side checks the path is a regular file, cats
// it, then prints its mode and sha256 on stderr; the local side writes the bytes into a
// temporary file as they arrive (Job::on_bytes, on the host's own worker thread), hashing them,
// and renames it into place only when the hashes match.
#include "remote/pull.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include "remote/fanout.hpp"
#include "util/sha256.hpp"
#include "util/shell_quote.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

constexpr int k_not_a_file_exit = 3;

// One host's local side: the temporary file and the running hash.
struct Receiver {
  std::filesystem::path temp;
  int fd = -1;
  util::Sha256 hash;
  std::string error; // the first local write failure
  std::string tail;  // stderr, for the mode and hash line

  ~Receiver() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  void take(Stream stream, const char* data, size_t size) {
    if (stream == Stream::err) {
      tail.append(data, size);
      if (tail.size() > 65536) {
        tail.erase(0, tail.size() - 65536);
      }
      return;
    }
    hash.update(data, size);
    while (size > 0 && error.empty()) {
      ssize_t n = ::write(fd, data, size);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        error = "cannot write " + temp.string() + ": " + std::strerror(errno);
        break;
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
  }
};

// Turns a finished host into its final result: rename on a verified copy, else remove.
void settle(HostResult& r, Receiver& rx, const PullJob& job) {
  if (rx.fd >= 0) {
    ::close(rx.fd);
    rx.fd = -1;
  }
  auto fail = [&](std::string why) {
    std::error_code ec;
    std::filesystem::remove(rx.temp, ec);
    r.outcome = r.succeeded() ? Outcome::error : r.outcome;
    r.error = std::move(why);
  };
  if (!rx.error.empty()) {
    return fail(rx.error);
  }
  if (r.outcome == Outcome::exit_code && r.exit_code == k_not_a_file_exit) {
    return fail("'" + job.remote_path + "' is not a regular file on " + r.host);
  }
  if (!r.succeeded()) {
    std::string why = r.error.empty() ? util::last_line(rx.tail) : r.error;
    return fail(why.empty() ? "the remote copy failed" : why);
  }
  auto words = util::split(util::last_line(rx.tail), ' ');
  std::string local = rx.hash.hex_digest();
  if (words.size() < 2 || words[1] != local) {
    return fail("sha256 of '" + job.remote_path + "' on " + r.host + " is " +
                (words.size() < 2 ? std::string("unknown") : words[1]) + " but " + local +
                " arrived (did it change while it was copied?)");
  }
  unsigned mode = 0644;
  if (words[0].size() <= 4 && words[0].find_first_not_of("01234567") == std::string::npos) {
    mode = static_cast<unsigned>(std::stoul(words[0], nullptr, 8)) & 0777u;
  }
  std::filesystem::permissions(rx.temp, static_cast<std::filesystem::perms>(mode));
  std::error_code ec;
  std::filesystem::rename(rx.temp, job.local_path, ec);
  if (ec) {
    return fail("cannot move the copy into " + job.local_path.string() + ": " + ec.message());
  }
}

} // namespace

std::string pull_script(const std::string& path) {
  const std::string p = util::shell_quote_path(util::starts_with(path, "-") ? "./" + path : path);
  return "f=" + p + "; [ -f \"$f\" ] || { echo \"not a regular file\" >&2; exit " +
         std::to_string(k_not_a_file_exit) + "; }; cat -- \"$f\" && " +
         "echo \"$(stat -c %a -- \"$f\") $(sha256sum -- \"$f\" | cut -d' ' -f1)\" >&2";
}

Expected<std::vector<HostResult>> pull_file(const std::vector<PullJob>& jobs,
                                            const SshOptions& options_in,
                                            const FanoutCallbacks& callbacks,
                                            const CancelToken* cancel) {
  SshOptions options = options_in;
  options.keep_output = false; // the bytes go to the files, not to memory
  std::vector<std::unique_ptr<Receiver>> receivers;
  std::vector<Job> fanout;
  for (const auto& pj : jobs) {
    auto rx = std::make_unique<Receiver>();
    rx->temp = pj.local_path;
    rx->temp += ".tpuctl-" + util::random_hex_id();
    rx->fd = ::open(rx->temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (rx->fd < 0) {
      rx->error = "cannot create " + rx->temp.string() + ": " + std::strerror(errno);
    }
    Receiver* raw = rx.get();
    Job j;
    j.target = pj.target;
    j.index = pj.index;
    j.command = pull_script(pj.remote_path);
    j.on_bytes = [raw](Stream s, const char* data, size_t size) { raw->take(s, data, size); };
    fanout.push_back(std::move(j));
    receivers.push_back(std::move(rx));
  }
  // Each host's result is settled (renamed or removed) as soon as it ends, before on_host_done
  // reports it; the engine calls on_host_done once per host, one host at a time.
  std::map<size_t, size_t> position; // job index -> position in `jobs`
  for (size_t i = 0; i < jobs.size(); ++i) {
    position[jobs[i].index] = i;
  }
  std::map<size_t, HostResult> settled;
  FanoutCallbacks cb;
  cb.on_line = callbacks.on_line;
  cb.on_lines_flush = callbacks.on_lines_flush;
  cb.on_host_done = [&](const HostResult& done) {
    HostResult r = done;
    size_t i = position.at(r.index);
    settle(r, *receivers[i], jobs[i]);
    settled[r.index] = r;
    if (callbacks.on_host_done) {
      callbacks.on_host_done(r);
    }
  };
  auto results = run_fanout(fanout, options, cb, cancel);
  if (!results) {
    for (auto& rx : receivers) {
      std::error_code ec;
      std::filesystem::remove(rx->temp, ec);
    }
    return results.error();
  }
  for (auto& r : *results) {
    if (auto it = settled.find(r.index); it != settled.end()) {
      r = it->second;
    } else {
      size_t i = position.at(r.index);
      settle(r, *receivers[i], jobs[i]);
    }
  }
  return results;
}

} // namespace tpuctl::remote
