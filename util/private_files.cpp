#include "util/private_files.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace tpuctl::util {

namespace fs = std::filesystem;

Status make_private_directories(const std::string& dir) {
  fs::path target = fs::path(dir).lexically_normal();
  fs::path built;
  for (const auto& part : target) {
    built /= part;
    if (built == built.root_path() || part == ".") {
      continue;
    }
    if (::mkdir(built.c_str(), 0700) == 0) {
      ::chmod(built.c_str(), 0700); // exact, whatever the umask
      continue;
    }
    if (errno != EEXIST) {
      return make_error(ErrorKind::failure, "cannot create directory '" + built.string() +
                                                "': " + std::strerror(errno));
    }
    struct stat st {};
    if (::stat(built.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return make_error(ErrorKind::failure, "cannot create directory '" + target.string() + "': '" +
                                                built.string() + "' is not a directory");
    }
  }
  return ok();
}

Status create_private_file(const std::string& file) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::fchmod(fd, 0600); // exact, whatever the umask
    ::close(fd);
    return ok();
  }
  if (errno == EEXIST) {
    return ok();
  }
  return make_error(ErrorKind::failure, "cannot create '" + file + "': " + std::strerror(errno));
}

Status replace_private_file(const std::string& file, const std::string& content) {
  const std::string tmp = file + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return make_error(ErrorKind::failure, "cannot write '" + file + "': " + std::strerror(errno));
  }
  ::fchmod(fd, 0600); // exact, whatever the umask
  if (!write_all(fd, content)) {
    int err = errno != 0 ? errno : ENOSPC;
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error(ErrorKind::failure, "cannot write '" + file + "': " + std::strerror(err));
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return make_error(ErrorKind::failure, "cannot write '" + file + "': " + std::strerror(err));
  }
  return ok();
}

bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

} // namespace tpuctl::util
