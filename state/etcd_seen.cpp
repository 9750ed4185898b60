#include "state/etcd_seen.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "util/private_files.hpp"

namespace tpuctl::state {

namespace {

nlohmann::json read_memory(const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    return nlohmann::json::object();
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  return doc.is_object() ? doc : nlohmann::json::object();
}

} // namespace

SeenCluster remembered_cluster(const std::string& file, const std::string& url) {
  nlohmann::json doc = read_memory(file);
  auto it = doc.find(url);
  SeenCluster seen;
  if (it == doc.end() || !it->is_object()) {
    return seen;
  }
  auto id = it->find("cluster_id");
  auto revision = it->find("revision");
  seen.cluster_id = id != it->end() && id->is_string() ? id->get<std::string>() : "";
  seen.revision =
      revision != it->end() && revision->is_number_integer() ? revision->get<int64_t>() : 0;
  return seen;
}

void remember_cluster(const std::string& file, const std::string& url, const SeenCluster& seen) {
  const SeenCluster before = remembered_cluster(file, url);
  if (seen.cluster_id.empty() ||
      (before.cluster_id == seen.cluster_id && before.revision == seen.revision)) {
    return;
  }
  nlohmann::json doc = read_memory(file);
  doc[url] = {{"cluster_id", seen.cluster_id}, {"revision", seen.revision}};
  auto dir = std::filesystem::path(file).parent_path().string();
  auto made = util::make_private_directories(dir);
  auto written = made ? util::replace_private_file(file, doc.dump(2) + "\n") : made;
  if (!written) {
    spdlog::debug("cannot remember etcd cluster {} for {}: {}", seen.cluster_id, url,
                  written.error().message);
  }
}

} // namespace tpuctl::state
