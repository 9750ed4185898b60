#include "provision/workload/cluster.hpp"

#include <stdexcept>

#include "provision/pool/projects.hpp"
#include "topology/accelerator_type.hpp"
#include "util/strings.hpp"

namespace tpuctl::provision {

using Json = nlohmann::json;

namespace {

std::string known_clusters(const std::vector<Cluster>& all) {
  if (all.empty()) {
    return "there are no clusters: create one with 'tpuctl cluster create'";
  }
  std::vector<std::string> names;
  for (const auto& c : all) {
    names.push_back(c.name);
  }
  return "clusters: " + util::join(names, ", ");
}

} // namespace

Json to_json(const Cluster& c) {
  return Json{{"name", c.name},
              {"pool", c.pool},
              {"queued_resource", c.queued_resource},
              {"tpu_type", c.tpu_type},
              {"num_slices", c.num_slices},
              {"tier", std::string(to_string(c.tier))},
              {"created_at_ms", c.created_at_ms},
              {"owner", c.owner},
              {"project", c.project},
              {"queue", c.queue}};
}

Expected<Cluster> cluster_from_json(const Json& doc) {
  try {
    Cluster c;
    c.name = doc.at("name").get<std::string>();
    c.pool = doc.at("pool").get<std::string>();
    c.queued_resource = doc.at("queued_resource").get<std::string>();
    c.tpu_type = doc.at("tpu_type").get<std::string>();
    c.num_slices = doc.at("num_slices").get<int>();
    auto tier = parse_tier(doc.at("tier").get<std::string>());
    if (!tier) {
      throw std::runtime_error("unknown tier '" + doc.at("tier").get<std::string>() + "'");
    }
    c.tier = *tier;
    c.created_at_ms = doc.value("created_at_ms", int64_t{0});
    c.owner = doc.value("owner", "");
    c.project = doc.value("project", std::string(k_default_project));
    c.queue = doc.value("queue", Json::object());
    if (!c.queue.is_object()) {
      c.queue = Json::object();
    }
    return c;
  } catch (const std::exception& e) {
    return make_error(ErrorKind::failure, std::string("cluster record is malformed: ") + e.what());
  }
}

Expected<std::pair<Cluster, QueuedResource>>
create_cluster(state::StateStore& store, const ClusterRequest& request, const state::Clock& clock) {
  ErrorList problems;
  if (auto valid = validate_tpu_name(request.name, "cluster name"); !valid) {
    problems.add(valid.error());
  }
  if (request.num_slices < 1 || request.num_slices > k_max_cluster_slices) {
    problems.add(ErrorKind::usage, "--num-slices " + std::to_string(request.num_slices) +
                                       " is out of range: give 1 to " +
                                       std::to_string(k_max_cluster_slices));
  }
  auto type = topology::parse_accelerator_type(request.tpu_type);
  if (!type) {
    problems.add(type.error());
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  TPUCTL_TRY_ASSIGN(auto existing, store.find(state::record_key(state::Kind::cluster, request.pool,
                                                                request.name)));
  if (existing) {
    return Error(ErrorKind::failure,
                 "cluster '" + request.name + "' already exists in pool '" + request.pool +
                     "' (see 'tpuctl cluster describe " + request.name +
                     "'; delete it first or pick another name)",
                 std::string(state::reason::k_already_exists));
  }
  Cluster cluster;
  cluster.name = request.name;
  cluster.pool = request.pool;
  cluster.queued_resource = request.name;
  cluster.tpu_type = type->name;
  cluster.num_slices = request.num_slices;
  cluster.tier = request.tier;
  cluster.created_at_ms = state::to_unix_ms(clock());
  cluster.owner = store.actor();
  cluster.project = request.project;

  CreateRequest qr;
  qr.id = request.name;
  qr.pool = request.pool;
  qr.accelerator_type = type->name;
  qr.node_count = request.num_slices;
  qr.tier = request.tier;
  qr.project = request.project;
  qr.on_preemption = request.on_preemption;
  qr.ssh = request.ssh;
  qr.labels[k_cluster_label] = request.name;
  qr.also_commit.push_back(state::CreateOp{
      state::record_key(state::Kind::cluster, request.pool, request.name), to_json(cluster)});
  state::Event made; // the cluster's own line in the audit trail, beside its request's
  made.pool = request.pool;
  made.subject_kind = state::Kind::cluster;
  made.subject = request.name;
  made.type = "CREATED";
  made.detail = {{"tpu_type", type->name},
                 {"num_slices", request.num_slices},
                 {"owner", cluster.owner},
                 {"project", cluster.project}};
  qr.also_commit.push_back(state::EventOp{made});
  auto created = create_queued_resource(store, qr, clock, false);
  if (!created) {
    Error e = created.error();
    if (state::has_reason(e, state::reason::k_already_exists)) {
      e.message = "cannot create cluster '" + request.name + "': " + e.message;
    }
    return e;
  }
  return std::make_pair(cluster, created->qr);
}

Expected<std::vector<Cluster>> list_clusters(state::StateStore& store, const std::string& pool) {
  TPUCTL_TRY_ASSIGN(state::Listing listing, store.list(state::Kind::cluster, pool));
  std::vector<Cluster> out;
  for (const auto& r : listing.records) {
    auto c = cluster_from_json(r.doc);
    if (!c) {
      Error e = c.error();
      e.message = state::describe(r.key) + ": " + e.message;
      return e;
    }
    c->version = r.version;
    out.push_back(std::move(*c));
  }
  return out;
}

Expected<Cluster> load_cluster(state::StateStore& store, const std::string& pool,
                               const std::string& name) {
  TPUCTL_TRY_ASSIGN(auto found, store.find(state::record_key(state::Kind::cluster, pool, name)));
  if (found) {
    TPUCTL_TRY_ASSIGN(Cluster c, cluster_from_json(found->doc));
    c.version = found->version;
    return c;
  }
  TPUCTL_TRY_ASSIGN(auto all, list_clusters(store, pool));
  return Error(ErrorKind::not_found,
               "cluster '" + util::printable(name) + "' not found in pool '" + pool + "' (" +
                   known_clusters(all) + ")",
               std::string(state::reason::k_not_found));
}

Expected<std::optional<QueuedResource>> cluster_queued_resource(state::StateStore& store,
                                                                const Cluster& cluster) {
  TPUCTL_TRY_ASSIGN(auto found,
                    store.find(state::queued_resource_key(cluster.pool, cluster.queued_resource)));
  if (!found) {
    return std::optional<QueuedResource>();
  }
  TPUCTL_TRY_ASSIGN(auto qr, qr_from_record(*found));
  return std::optional<QueuedResource>(std::move(qr));
}

} // namespace tpuctl::provision
