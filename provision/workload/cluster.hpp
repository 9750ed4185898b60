// Clusters: xpk's `cluster create` on a team's own pool. A cluster is a name for one queued
// resource of N slices (nodes) of one accelerator type, created through the queued-resource
// machinery (so it queues, is placed topology-aware and provisioned like any request), and the
// place workloads run. Stored as JSON under Key{cluster, pool, name}; the request has the same
// id as the cluster and carries the label tpuctl-cluster=<name>.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/queue/queued_resource.hpp"
#include "provision/slice/qr_ops.hpp"
#include "state/store.hpp"

namespace tpuctl::provision {

inline constexpr const char* k_cluster_label = "tpuctl-cluster";
// The most slices a cluster has (--num-slices).
inline constexpr int k_max_cluster_slices = 64;

struct Cluster {
  std::string name;
  std::string pool;
  std::string queued_resource; // its request's id (= name)
  std::string tpu_type;        // canonical accelerator type
  int num_slices = 1;
  Tier tier = Tier::standard;
  int64_t created_at_ms = 0;
  // Who created it (StateStore::actor(): the etcd user on an authenticating store, else
  // "USER@HOST"); "" when made before owners were recorded.
  std::string owner;
  // The project its chips are charged to (provision/pool/projects.hpp), and its workloads with
  // them: its queued resource carries the same.
  std::string project = "default";
  // The queue's view of its waiting workloads, written by each pass (workload_admit.hpp):
  // {NAME: {position, reason, head_since_ms}}. Kept here, in one record, so that a pass writes
  // one record however many workloads wait (an etcd transaction holds at most 128 writes).
  nlohmann::json queue = nlohmann::json::object();
  int64_t version = 0;
};

nlohmann::json to_json(const Cluster& cluster);
// Errors: failure naming the bad field (a corrupt record).
Expected<Cluster> cluster_from_json(const nlohmann::json& doc);

struct ClusterRequest {
  std::string name;
  std::string pool;
  std::string tpu_type;
  int num_slices = 1;
  Tier tier = Tier::standard;
  std::string project = "default";
  // Clusters requeue by default: they exist to run workloads, and a preempted cluster that waits
  // for someone to reset it is the babysitter loop users write around gcloud. Requeued, its
  // workloads resume by themselves once it is ACTIVE again.
  OnPreemption on_preemption = OnPreemption::requeue;
  remote::SshSettings ssh; // recorded in its queued resource (pool/request_ssh.hpp)
};

// Validates the request (name as a TPU name, a known type, 1..64 slices), then stores the
// cluster record and its queued resource in one transaction (the request then queues and is
// provisioned as usual). Errors: usage (bad input, every problem named), already_exists (a
// cluster or queued resource of that name), capacity (the pool can never hold it), not_found
// (no such pool). Nothing is stored on error.
Expected<std::pair<Cluster, QueuedResource>>
create_cluster(state::StateStore& store, const ClusterRequest& request, const state::Clock& clock);

// Every cluster of `pool`, by name.
Expected<std::vector<Cluster>> list_clusters(state::StateStore& store, const std::string& pool);
// The cluster. Errors: not_found naming it, the pool and the clusters that exist.
Expected<Cluster> load_cluster(state::StateStore& store, const std::string& pool,
                               const std::string& name);
// Its queued resource, nullopt when that is gone (deleted behind the cluster's back).
Expected<std::optional<QueuedResource>> cluster_queued_resource(state::StateStore& store,
                                                                const Cluster& cluster);

} // namespace tpuctl::provision
