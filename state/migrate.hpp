// Copying one state store into another (`tpuctl state migrate`), e.g. a machine's SQLite file
// into the etcd a team shares. Works between any two backends, through the StateStore interface.
//
// Copied: every pool, host, queued resource, cluster and workload record (documents as they
// are), every live claim (owner and claim time kept; a provisional claim keeps the time it has
// left), and every event in order (time, states, initiator and detail kept). Not copied:
// heartbeats (agents send new ones within seconds). Versions are the target's revisions, not the
// source's: records copied in one commit share its revision, and events written in one source
// commit stay together in one target commit.
//
// The target must be empty (no pool and no event), so a migration never merges two pools' worth
// of claims. Writes are batched to stay inside etcd's transaction limits (host records and claims
// by bytes only: etcd keeps them in pages), and every owner's claims are one commit; a migration
// that fails half-way leaves a partial target, which the next attempt refuses as not empty:
// remove it (a fresh etcd prefix, or delete the file) and run again. Stop other tpuctl processes on the
// source first: changes made to it during the copy may be missed.
#pragma once

#include <cstddef>
#include <string>

#include "state/store.hpp"

namespace tpuctl::state {

struct MigrationReport {
  size_t pools = 0;
  size_t hosts = 0;
  size_t queued_resources = 0;
  size_t clusters = 0;
  size_t workloads = 0;
  size_t claims = 0;
  size_t events = 0;
  int64_t target_revision = 0; // the target's revision after the copy
};

struct MigrateOptions {
  size_t max_ops_per_commit = 60;           // one-key records: well under etcd's 128
  size_t max_bytes_per_commit = 512 * 1024; // well under etcd's 1.5 MiB request limit
  Clock clock = system_clock();             // for the time provisional claims have left
};

// Copies everything in `from` into `to`. Errors: failure (reason k_already_exists) when the
// target is not empty, naming what it holds; any read or commit error of either store.
Expected<MigrationReport> migrate_store(StateStore& from, StateStore& to,
                                        const MigrateOptions& options = {});

} // namespace tpuctl::state
