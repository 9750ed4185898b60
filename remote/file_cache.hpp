// Files read once per process while they do not change: the ssh_config files and known_hosts
// files every session of a fan-out consults (2,304 sessions, one parse). A file is re-read when
// its size or modification time changes; a missing file is cached as missing too.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/stat.h>

#include "util/expected.hpp"

namespace tpuctl::remote {

// What the cache compares: a regular file's size and modification time, or "missing".
struct FileStamp {
  bool exists = false;
  int64_t size = -1;
  int64_t mtime_ns = -1;
  bool operator==(const FileStamp&) const = default;
};

inline FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    s.exists = true;
    s.size = st.st_size;
    s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  return s;
}

// One cache per kind of file: `get(path, parse)` gives the parse of the file's text (parse(text,
// exists) -> Expected<T>), parsed again only when the file changed. Errors: parse's (not cached).
template <class T> class FileCache {
public:
  template <class Parse>
  Expected<std::shared_ptr<const T>> get(const std::string& path, const Parse& parse) {
    const FileStamp now = stamp_of(path);
    std::lock_guard lock(m_mutex);
    if (auto it = m_cache.find(path); it != m_cache.end() && it->second.first == now) {
      return it->second.second;
    }
    std::string text;
    if (now.exists) {
      std::ifstream in(path);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    TPUCTL_TRY_ASSIGN(T parsed, parse(text, now.exists));
    auto shared = std::make_shared<const T>(std::move(parsed));
    m_cache[path] = {now, shared};
    return shared;
  }

private:
  std::mutex m_mutex;
  std::map<std::string, std::pair<FileStamp, std::shared_ptr<const T>>> m_cache;
};

} // namespace tpuctl::remote
