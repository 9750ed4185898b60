#include "state/backup.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "state/sqlite_store.hpp"
#include "util/strings.hpp"

namespace tpuctl::state {

namespace fs = std::filesystem;

namespace {

Error backup_failed(const std::string& file, const std::string& why) {
  return Error(ErrorKind::failure, "cannot write backup '" + file + "': " + why);
}

// Ends the consistent reads begun on `store` when it goes out of scope.
class ReadsHeld {
public:
  explicit ReadsHeld(StateStore& store) : m_store(store) {}
  ~ReadsHeld() {
    if (m_held) {
      m_store.end_reads();
    }
  }
  ReadsHeld(const ReadsHeld&) = delete;
  ReadsHeld& operator=(const ReadsHeld&) = delete;
  Expected<int64_t> begin() {
    TPUCTL_TRY_ASSIGN(int64_t revision, m_store.begin_reads());
    m_held = true;
    return revision;
  }

private:
  StateStore& m_store;
  bool m_held = false;
};

// Copies `source` into a new SQLite store at `tmp`, checks it and takes it out of WAL mode. The
// store is closed when this returns.
Expected<BackupReport> write_copy(StateStore& source, const std::string& tmp) {
  BackupReport report;
  SqliteOptions o;
  o.path = tmp;
  o.create = true;
  TPUCTL_TRY_ASSIGN(auto copy, SqliteStore::open(o));
  {
    ReadsHeld held(source);
    TPUCTL_TRY_ASSIGN(report.source_revision, held.begin());
    TPUCTL_TRY_ASSIGN(report.copied, migrate_store(source, *copy));
  }
  TPUCTL_TRY_ASSIGN(auto problems, copy->check_integrity());
  if (!problems.empty()) {
    return Error(ErrorKind::failure, "the copy failed its integrity check: " + problems.front());
  }
  // One self-contained file: reading it (restore) then leaves nothing beside it.
  TPUCTL_TRY(copy->leave_wal());
  return report;
}

void remove_with_sidecars(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    fs::remove(path + suffix, ec);
  }
}

// Empties `target`: every pool, with its hosts, claims, requests, events. One commit per pool.
Expected<size_t> remove_all_pools(StateStore& target) {
  TPUCTL_TRY_ASSIGN(auto pools, target.list(Kind::pool, ""));
  for (const auto& p : pools.records) {
    TPUCTL_TRY_ASSIGN(auto claims, target.claims(p.key.pool));
    std::map<std::string, std::vector<std::string>> by_owner;
    for (const auto& c : claims) {
      by_owner[c.owner].push_back(c.host);
    }
    std::vector<Op> ops;
    for (auto& [owner, hosts] : by_owner) {
      ops.push_back(ReleaseOp{p.key.pool, std::move(hosts), owner});
    }
    ops.push_back(RemoveOp{p.key, k_any_version});
    TPUCTL_TRY(target.commit(ops));
  }
  return pools.records.size();
}

} // namespace

Expected<BackupReport> backup_store(StateStore& source, const std::string& file, bool overwrite) {
  std::error_code ec;
  const std::string location = source.info().location;
  if (location == "sqlite:" + fs::weakly_canonical(file, ec).string()) {
    return usage_error("backup '" + file +
                       "' is the state store itself: write the backup to another file");
  }
  if (fs::exists(file, ec) && !overwrite) {
    return Error(ErrorKind::failure,
                 "backup '" + file + "' exists: choose another file, or replace it with --force",
                 std::string(reason::k_already_exists));
  }
  const std::string dir = fs::path(file).parent_path().string();
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    return backup_failed(file, "its directory '" + dir + "' does not exist");
  }
  const std::string tmp = file + ".tmp-" + std::to_string(::getpid());
  remove_with_sidecars(tmp);
  auto report = write_copy(source, tmp);
  if (!report) {
    remove_with_sidecars(tmp);
    if (has_reason(report.error(), reason::k_disk_full)) {
      return backup_failed(file, "the disk is full; nothing was written");
    }
    return report.error();
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    remove_with_sidecars(tmp);
    return backup_failed(file, std::strerror(err));
  }
  report->file = file;
  return report;
}

Expected<RestoreReport> restore_store(const std::string& file, StateStore& target, bool force) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return not_found_error("backup '" + file + "' does not exist");
  }
  SqliteOptions o;
  o.path = fs::absolute(file, ec).string();
  o.create = false;
  o.read_only = true;
  auto backup = SqliteStore::open(o);
  if (!backup) {
    // Why, without the advice for --state that does not apply to a backup file.
    std::string why = backup.error().message;
    if (auto advice = why.find("; choose another file with --state"); advice != std::string::npos) {
      why.erase(advice);
    }
    return Error(ErrorKind::failure, "'" + file + "' is not a readable tpuctl backup (" + why +
                                         "): name a file written by 'tpuctl state backup FILE'");
  }
  TPUCTL_TRY_ASSIGN(auto problems, (*backup)->check_integrity());
  if (!problems.empty()) {
    return Error(ErrorKind::failure, "backup '" + file + "' is damaged, so nothing was restored: " +
                                         util::join(problems, "; "));
  }
  RestoreReport report;
  auto restored = target.transact([&](StateStore& s) -> Expected<std::vector<Op>> {
    report = {};
    TPUCTL_TRY_ASSIGN(auto pools, s.list(Kind::pool, ""));
    if (!pools.records.empty() && !force) {
      std::vector<std::string> names;
      for (const auto& p : pools.records) {
        names.push_back("'" + p.key.pool + "'");
      }
      return Error(ErrorKind::failure,
                   "the state store " + s.info().location + " is not empty (it holds pools " +
                       util::join(names, ", ") +
                       "): restoring would replace them; add --force to do so (a backup of it "
                       "first: 'tpuctl state backup FILE')",
                   std::string(reason::k_already_exists));
    }
    TPUCTL_TRY_ASSIGN(report.replaced_pools, remove_all_pools(s));
    TPUCTL_TRY_ASSIGN(report.copied, migrate_store(**backup, s));
    return std::vector<Op>{};
  });
  if (!restored) {
    return restored.error();
  }
  // Each restored pool's log (the backup's) ends with the restore itself, in a commit of its own
  // (etcd restores in several commits, which a transaction's last ops would conflict with).
  TPUCTL_TRY_ASSIGN(auto now, target.list(Kind::pool, ""));
  std::vector<Op> ops;
  for (const auto& p : now.records) {
    Event e;
    e.pool = p.key.pool;
    e.subject_kind = Kind::pool;
    e.subject = p.key.pool;
    e.type = "STATE_RESTORED";
    e.detail = {{"backup", fs::absolute(file, ec).string()}};
    ops.push_back(EventOp{e});
  }
  if (!ops.empty()) {
    TPUCTL_TRY(target.commit(ops));
  }
  return report;
}

} // namespace tpuctl::state
