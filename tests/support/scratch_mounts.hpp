// Mounts tests use to fault the storage under a state store: a small tmpfs (a disk that fills
// up) and a read-only bind mount (a read-only filesystem). Both need privileges a test host may
// not grant; each reports whether it worked, so a test can say what it could not run (a doctest
// MESSAGE) instead of skipping in silence. Unmounted (lazily, by path) when the object dies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace tpuctl::test {

class ScratchDisk {
public:
  // Mounts a tmpfs of `bytes` at `dir` (created when missing). Returns nullptr, with the reason
  // in `why`, when the host does not allow it.
  static std::unique_ptr<ScratchDisk> mount(const std::filesystem::path& dir, uint64_t bytes,
                                            std::string& why);
  ~ScratchDisk();
  ScratchDisk(const ScratchDisk&) = delete;
  ScratchDisk& operator=(const ScratchDisk&) = delete;

  const std::filesystem::path& path() const { return m_dir; }
  // Bytes an unprivileged write could still use.
  uint64_t available() const;
  // Writes a filler file until at most `leave` bytes stay available (0: the disk is full).
  void fill(uint64_t leave);
  // Removes the filler file.
  void unfill();

private:
  explicit ScratchDisk(std::filesystem::path dir) : m_dir(std::move(dir)) {}
  std::filesystem::path m_dir;
};

class ReadOnlyView {
public:
  // Bind-mounts `source` read-only at `target` (created when missing). nullptr with `why` when
  // the host does not allow it.
  static std::unique_ptr<ReadOnlyView> mount(const std::filesystem::path& source,
                                             const std::filesystem::path& target, std::string& why);
  ~ReadOnlyView();
  ReadOnlyView(const ReadOnlyView&) = delete;
  ReadOnlyView& operator=(const ReadOnlyView&) = delete;
  const std::filesystem::path& path() const { return m_target; }

private:
  explicit ReadOnlyView(std::filesystem::path target) : m_target(std::move(target)) {}
  std::filesystem::path m_target;
};

} // namespace tpuctl::test
