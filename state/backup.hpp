// Backups of a state store: `tpuctl state backup FILE` and `tpuctl state restore FILE`.
//
// A backup is a tpuctl SQLite state database, whatever backend it was taken from, so it can be
// restored into any store, read as one (--state sqlite:FILE) and checked (`tpuctl --state
// sqlite:FILE state check`).
//
// Taking one: every read is made at one point (StateStore::begin_reads: one SQLite read
// transaction, or one etcd revision), so the backup is the store as it was then however busy it
// is; it is copied (state/migrate.hpp: records, claims, events; not heartbeats) into a 0600
// temporary file next to FILE, checked with SQLite's integrity_check, and renamed over FILE:
// FILE is either what it was or a whole backup.
//
// Restoring: the backup is opened read-only and checked first (a tpuctl store whose
// integrity_check passes), so a damaged or foreign file changes nothing. A target that holds
// anything is refused unless `force`; then its pools (and everything in them) are removed and
// the backup copied in, inside one transact(): on SQLite that is one write transaction (other
// processes see the old state or the restored one, never a mix); on etcd it is several commits,
// so stop other tpuctl processes first.
#pragma once

#include <string>

#include "state/migrate.hpp"
#include "state/store.hpp"

namespace tpuctl::state {

struct BackupReport {
  std::string file;
  int64_t source_revision = 0; // the revision the backup shows the source at
  MigrationReport copied;
};

// Writes a backup of `source` to `file`. An existing `file` is replaced only with `overwrite`.
// Errors: failure naming `file` (exists, cannot be written, the disk is full; nothing is left
// behind then), the source's read errors.
Expected<BackupReport> backup_store(StateStore& source, const std::string& file, bool overwrite);

struct RestoreReport {
  size_t replaced_pools = 0; // pools the target held before (force)
  MigrationReport copied;
};

// Restores the backup `file` into `target`. Errors: not_found when `file` does not exist;
// failure when it is not a readable tpuctl backup (naming what is wrong), when the target is not
// empty and not `force` (reason k_already_exists, naming its pools), and the target's errors
// (then, on SQLite, nothing changed).
Expected<RestoreReport> restore_store(const std::string& file, StateStore& target, bool force);

} // namespace tpuctl::state
