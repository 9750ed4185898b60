#include "tests/support/scratch_mounts.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <vector>

namespace tpuctl::test {

namespace fs = std::filesystem;

namespace {

const char* k_filler = ".filler";

} // namespace

std::unique_ptr<ScratchDisk> ScratchDisk::mount(const fs::path& dir, uint64_t bytes,
                                                std::string& why) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
  if (::mount("tpuctl-test", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    why = "cannot mount a tmpfs at " + dir.string() + ": " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<ScratchDisk>(new ScratchDisk(dir));
}

ScratchDisk::~ScratchDisk() {
  ::umount2(m_dir.c_str(), MNT_DETACH);
}

uint64_t ScratchDisk::available() const {
  struct statvfs v {};
  if (::statvfs(m_dir.c_str(), &v) != 0) {
    return 0;
  }
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

void ScratchDisk::fill(uint64_t leave) {
  int fd = ::open((m_dir / k_filler).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return;
  }
  std::vector<char> block(4096, 'x');
  while (available() > leave) {
    const uint64_t over = available() - leave;
    const size_t n = over < block.size() ? static_cast<size_t>(over) : block.size();
    if (::write(fd, block.data(), n) <= 0) {
      break; // ENOSPC: full
    }
  }
  ::close(fd);
}

void ScratchDisk::unfill() {
  std::error_code ec;
  fs::remove(m_dir / k_filler, ec);
}

std::unique_ptr<ReadOnlyView> ReadOnlyView::mount(const fs::path& source, const fs::path& target,
                                                  std::string& why) {
  std::error_code ec;
  fs::create_directories(target, ec);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    why = "cannot bind-mount " + source.string() + ": " + std::strerror(errno);
    return nullptr;
  }
  if (::mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    why =
        "cannot make the bind mount at " + target.string() + " read-only: " + std::strerror(errno);
    ::umount2(target.c_str(), MNT_DETACH);
    return nullptr;
  }
  return std::unique_ptr<ReadOnlyView>(new ReadOnlyView(target));
}

ReadOnlyView::~ReadOnlyView() {
  ::umount2(m_target.c_str(), MNT_DETACH);
}

} // namespace tpuctl::test
