#include "agent/python_hook.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sitecustomize.hpp"
#include "util/private_files.hpp"

namespace tpuctl::agent {

std::string_view python_hook_text() {
  return k_sitecustomize_py;
}

Status install_python_hook(const std::string& dir) {
  const std::string path = dir + "/sitecustomize.py";
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      if (text.str() == k_sitecustomize_py) {
        return tpuctl::ok();
      }
    }
  }
  if (auto made = util::make_private_directories(dir); !made) {
    return make_error(ErrorKind::failure,
                      "cannot create the Python start-up directory: " + made.error().message);
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return make_error(ErrorKind::failure,
                      "cannot write '" + tmp + "': " + std::strerror(errno));
  }
  const bool written = util::write_all(fd, k_sitecustomize_py);
  ::fchmod(fd, 0600);
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return make_error(ErrorKind::failure, "cannot write '" + path + "': " + why);
  }
  return tpuctl::ok();
}

} // namespace tpuctl::agent
