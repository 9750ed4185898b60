// The generation parameters. Sources (see /work/shared/reference/topology.md section a):
// Google Cloud's per-version TPU pages for cores per chip, TFLOPS, HBM, pod sizes and the 2D
// topology lists; xpk's system_characteristics for the cube budgets and naming; the
// scaling-book and the Cloud docs for ICI link bandwidth. One-way link bandwidth: v3 1e11 B/s,
// v4 4.5e10, v5e 5e10 and v6e 1e11 (the doc's 1600/3200 Gbps per chip over 4 links), v5p 1e11
// (1200 GB/s bidirectional per chip over 6 links). v2 (496 Gbit/s, Jouppi et al. 2020) and
// tpu7x (assumed equal to v5p) are approximate.
#include "topology/generation.hpp"

#include "util/strings.hpp"

namespace tpuctl::topology {

namespace {

std::vector<Generation> build_generations() {
  std::vector<Generation> g;

  Generation v2;
  v2.name = v2.type_prefix = "v2";
  v2.rank = 2;
  v2.pod_dims = {16, 16, 1};
  v2.topologies_2d = {{2, 2, 1}, {4, 4, 1}, {8, 8, 1}, {8, 16, 1}, {16, 16, 1}};
  v2.peak_bf16_tflops = 45;
  v2.hbm_gib = 16;
  v2.ici_link_gbytes_per_s = 62;
  g.push_back(v2);

  Generation v3 = v2;
  v3.name = v3.type_prefix = "v3";
  v3.pod_dims = {32, 32, 1};
  v3.topologies_2d = {{2, 2, 1},  {4, 4, 1},   {4, 8, 1},   {8, 8, 1},
                      {8, 16, 1}, {16, 16, 1}, {16, 32, 1}, {32, 32, 1}};
  v3.peak_bf16_tflops = 123;
  v3.hbm_gib = 32;
  v3.ici_link_gbytes_per_s = 100;
  g.push_back(v3);

  Generation v4;
  v4.name = v4.type_prefix = "v4";
  v4.rank = 3;
  v4.pod_dims = {16, 16, 16};
  v4.max_cubes = 64;
  v4.nondecreasing = false; // xpk accepts any order of the dimensions for v4
  v4.listed_cubes = {1, 2, 4, 8, 12, 16, 32, 64};
  v4.peak_bf16_tflops = 275;
  v4.hbm_gib = 32;
  v4.ici_link_gbytes_per_s = 45;
  g.push_back(v4);

  Generation v5e;
  v5e.name = "v5e";
  v5e.type_prefix = "v5litepod";
  v5e.type_number = TypeNumber::chips;
  v5e.cores_per_chip = 1;
  v5e.rank = 2;
  v5e.pod_dims = {16, 16, 1};
  v5e.max_single_host_chips = 8;
  v5e.topologies_2d = {{1, 1, 1}, {2, 2, 1}, {2, 4, 1},  {4, 4, 1},
                       {4, 8, 1}, {8, 8, 1}, {8, 16, 1}, {16, 16, 1}};
  v5e.peak_bf16_tflops = 197;
  v5e.hbm_gib = 16;
  v5e.ici_link_gbytes_per_s = 50;
  g.push_back(v5e);

  Generation v5p = v4;
  v5p.name = v5p.type_prefix = "v5p";
  v5p.pod_dims = {16, 20, 28};
  v5p.max_cubes = 96; // the largest single slice; the pod has 140 cubes
  v5p.nondecreasing = true;
  v5p.listed_cubes = {1, 2, 3, 4, 8, 16, 32, 64, 96};
  v5p.peak_bf16_tflops = 459;
  v5p.hbm_gib = 95;
  v5p.ici_link_gbytes_per_s = 100;
  g.push_back(v5p);

  Generation v6e = v5e;
  v6e.name = v6e.type_prefix = "v6e";
  v6e.peak_bf16_tflops = 918;
  v6e.hbm_gib = 32;
  v6e.ici_link_gbytes_per_s = 100;
  g.push_back(v6e);

  Generation tpu7x = v5p;
  tpu7x.name = tpu7x.type_prefix = "tpu7x";
  tpu7x.pod_dims = {16, 24, 24};
  tpu7x.max_cubes = 144;
  tpu7x.single_chip = true;
  tpu7x.listed_cubes = {1, 2, 4, 8, 16, 32, 64, 144};
  tpu7x.peak_bf16_tflops = 2307;
  tpu7x.hbm_gib = 192;
  tpu7x.ici_link_gbytes_per_s = 100;
  g.push_back(tpu7x);
  return g;
}

} // namespace

int Generation::chips_for_number(int number) const {
  int per_chip = type_number == TypeNumber::cores ? cores_per_chip : 1;
  if (number <= 0 || number % per_chip != 0) {
    return 0;
  }
  return number / per_chip;
}

std::string_view Generation::number_unit() const {
  return type_number == TypeNumber::cores ? "TensorCores" : "chips";
}

const std::vector<Generation>& generations() {
  static const std::vector<Generation> k_generations = build_generations();
  return k_generations;
}

std::string known_generations_text() {
  std::vector<std::string> names;
  for (const auto& g : generations()) {
    std::string n(g.name);
    if (g.type_prefix != g.name) {
      n += " (" + std::string(g.type_prefix) + ")";
    }
    names.push_back(n);
  }
  return util::join(names, ", ");
}

namespace {

// Names people use for a generation that tpuctl and gcloud spell otherwise: suggested, never
// accepted (a type name must stay the one gcloud takes).
struct GenerationAlias {
  std::string_view word;
  std::string_view prefix;
};
constexpr GenerationAlias k_aliases[] = {{"v7x", "tpu7x"},        {"v7", "tpu7x"},
                                         {"tpuv7x", "tpu7x"},     {"tpu7", "tpu7x"},
                                         {"ironwood", "tpu7x"},   {"v6", "v6e"},
                                         {"tpuv6e", "v6e"},       {"trillium", "v6e"},
                                         {"v5lite", "v5litepod"}, {"v5litepods", "v5litepod"},
                                         {"v5", "v5p"},           {"tpuv5p", "v5p"},
                                         {"tpuv4", "v4"},         {"tpuv3", "v3"},
                                         {"tpuv2", "v2"}};

} // namespace

std::string generation_suggestion(std::string_view name) {
  const std::string lower = util::to_lower(name);
  for (const auto& a : k_aliases) {
    if (a.word == lower) {
      return std::string(a.prefix);
    }
  }
  std::vector<std::string> candidates;
  for (const auto& g : generations()) {
    candidates.emplace_back(g.type_prefix);
    if (g.type_prefix != g.name) {
      candidates.emplace_back(g.name);
    }
  }
  auto near = util::nearest(lower, candidates, 1);
  return near.empty() ? "" : near.front();
}

Expected<const Generation*> find_generation(std::string_view name) {
  const std::string lower = util::to_lower(name); // gcloud lower-cases types: V5P is v5p
  for (const auto& g : generations()) {
    if (g.name == lower || g.type_prefix == lower) {
      return &g;
    }
  }
  std::string message =
      "unknown TPU generation '" + std::string(name) + "': use one of " + known_generations_text();
  if (auto near = generation_suggestion(name); !near.empty()) {
    message += "; did you mean '" + near + "'?";
  }
  return usage_error(message);
}

std::string format_dims(const Dims& dims, int rank) {
  std::string s = std::to_string(dims[0]) + "x" + std::to_string(dims[1]);
  if (rank == 3) {
    s += "x" + std::to_string(dims[2]);
  }
  return s;
}

std::string format_bounds(const Dims& dims) {
  return std::to_string(dims[0]) + "," + std::to_string(dims[1]) + "," + std::to_string(dims[2]);
}

} // namespace tpuctl::topology
