#include "remote/spool.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

namespace tpuctl::remote {

namespace {

constexpr size_t k_piece = 1 << 20;

// An unlinked file in `dir`: O_TMPFILE where the file system has it, else mkstemp + unlink.
int unlinked_file(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    return fd;
  }
  std::string path = dir + "/tpuctl-spool-XXXXXX";
  fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd >= 0) {
    ::unlink(path.c_str());
  }
  return fd;
}

} // namespace

Spool::~Spool() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
}

bool Spool::spill() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  m_fd = unlinked_file(dir);
  if (m_fd < 0 && dir != "/tmp") {
    m_fd = unlinked_file("/tmp");
  }
  if (m_fd < 0) {
    m_error = "no temporary file could be made in " + dir + " for the output past " +
              std::to_string(m_limit) + " bytes: " + std::strerror(errno);
    return false;
  }
  return true;
}

void Spool::append(std::string_view data) {
  if (data.empty() || m_dropped) {
    return;
  }
  m_hash.update(data);
  m_size += data.size();
  m_last = data.back();
  if (m_fd < 0 && m_head.size() < m_limit) {
    const size_t take = std::min(data.size(), m_limit - m_head.size());
    m_head.append(data.data(), take);
    data.remove_prefix(take);
  }
  if (data.empty() || !m_error.empty() || (m_fd < 0 && !spill())) {
    return;
  }
  while (!data.empty()) {
    ssize_t w = ::pwrite(m_fd, data.data(), data.size(), static_cast<off_t>(m_file_size));
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      m_error = std::string("the temporary file holding the output could not be written (") +
                std::strerror(w < 0 ? errno : ENOSPC) + "): the output past byte " +
                std::to_string(m_head.size() + m_file_size) + " is lost";
      return;
    }
    m_file_size += static_cast<uint64_t>(w);
    data.remove_prefix(static_cast<size_t>(w));
  }
}

const std::string& Spool::digest() {
  if (m_digest.empty()) {
    m_digest = m_hash.hex_digest();
  }
  return m_digest;
}

void Spool::drop_content() {
  digest();
  std::string().swap(m_head);
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
  m_file_size = 0;
  m_dropped = true;
}

Status Spool::for_each(const std::function<void(std::string_view)>& piece) const {
  if (m_dropped) {
    return Error(ErrorKind::failure, "the output was already printed and freed");
  }
  for (size_t off = 0; off < m_head.size(); off += k_piece) {
    piece(std::string_view(m_head).substr(off, k_piece));
  }
  if (m_fd < 0 || m_file_size == 0) {
    return ok();
  }
  std::vector<char> buf(k_piece);
  uint64_t off = 0;
  while (off < m_file_size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(k_piece, m_file_size - off));
    ssize_t r = ::pread(m_fd, buf.data(), want, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return Error(ErrorKind::failure,
                   std::string("the temporary file holding the output could not be read: ") +
                       std::strerror(r < 0 ? errno : EIO));
    }
    piece(std::string_view(buf.data(), static_cast<size_t>(r)));
    off += static_cast<uint64_t>(r);
  }
  return ok();
}

std::string_view Spool::read_at(uint64_t offset, size_t max, std::string& buffer,
                                std::string* error) const {
  if (offset < m_head.size()) {
    return std::string_view(m_head).substr(static_cast<size_t>(offset), max);
  }
  const uint64_t at = offset - m_head.size();
  if (m_fd < 0 || at >= m_file_size) {
    return {};
  }
  buffer.resize(static_cast<size_t>(std::min<uint64_t>(max, m_file_size - at)));
  for (;;) {
    ssize_t r = ::pread(m_fd, buffer.data(), buffer.size(), static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      if (error != nullptr) {
        *error = std::string("the temporary file holding the input could not be read: ") +
                 std::strerror(r < 0 ? errno : EIO);
      }
      return {};
    }
    return std::string_view(buffer.data(), static_cast<size_t>(r));
  }
}

Expected<std::string> Spool::text() const {
  std::string all;
  TPUCTL_TRY(for_each([&](std::string_view p) { all.append(p); }));
  return all;
}

} // namespace tpuctl::remote
