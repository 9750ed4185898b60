#include "remote/input_bytes.hpp"

#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace tpuctl::remote {

std::shared_ptr<const InputBytes> InputBytes::of(std::string text) {
  return of(std::make_shared<const std::string>(std::move(text)));
}

std::shared_ptr<const InputBytes> InputBytes::of(std::shared_ptr<const std::string> text) {
  auto in = std::make_shared<InputBytes>();
  in->m_text = std::move(text);
  return in;
}

Expected<std::shared_ptr<const InputBytes>> InputBytes::spool(std::string_view prefix, int fd) {
  auto in = std::make_shared<InputBytes>();
  in->m_spool = std::make_unique<Spool>();
  in->m_spool->append(prefix);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      return Error(ErrorKind::failure,
                   std::string("--stdin: reading standard input failed: ") + std::strerror(errno));
    }
    if (r == 0) {
      break;
    }
    in->m_spool->append(std::string_view(buf.data(), static_cast<size_t>(r)));
    if (!in->m_spool->error().empty()) {
      return Error(ErrorKind::failure, "--stdin: " + in->m_spool->error());
    }
  }
  return std::shared_ptr<const InputBytes>(std::move(in));
}

uint64_t InputBytes::size() const {
  return m_spool ? m_spool->size() : (m_text ? m_text->size() : 0);
}

std::string_view InputBytes::read(uint64_t offset, size_t max, std::string& buffer,
                                  std::string* error) const {
  if (m_spool) {
    return m_spool->read_at(offset, max, buffer, error);
  }
  if (!m_text || offset >= m_text->size()) {
    return {};
  }
  return std::string_view(*m_text).substr(static_cast<size_t>(offset), max);
}

} // namespace tpuctl::remote
