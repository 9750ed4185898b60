// Torus geometry against brute force on small grids (an adjacency built independently from the
// definition, BFS over all pairs, every axis-aligned cut) and against the table of
// topology.md section e.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <queue>
#include <set>

#include <doctest/doctest.h>

#include "topology/torus.hpp"

using namespace tpuctl;
using namespace tpuctl::topology;

namespace {

Coord coord(const Dims& d, int i) {
  return {i % d[0], (i / d[0]) % d[1], i / (d[0] * d[1])};
}

// Chips a and b share an ICI link: they differ on exactly one axis, by 1, or by k-1 across a
// wrap link of a ring longer than 2.
bool linked(const Dims& d, const Wrap& w, int a, int b) {
  Coord ca = coord(d, a), cb = coord(d, b);
  int differing = 0;
  bool adjacent = false;
  for (size_t i = 0; i < 3; ++i) {
    int diff = std::abs(ca[i] - cb[i]);
    if (diff == 0) {
      continue;
    }
    ++differing;
    adjacent = diff == 1 || (w[i] && d[i] > 2 && diff == d[i] - 1);
  }
  return differing == 1 && adjacent;
}

struct BruteForce {
  int diameter = 0;
  double mean = 0;
  int64_t bisection = 0;
};

BruteForce brute_force(const Dims& d, const Wrap& w) {
  int n = d[0] * d[1] * d[2];
  BruteForce out;
  int64_t total = 0;
  for (int s = 0; s < n; ++s) {
    std::vector<int> dist(static_cast<size_t>(n), -1);
    std::queue<int> q;
    dist[static_cast<size_t>(s)] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int v = 0; v < n; ++v) {
        if (dist[static_cast<size_t>(v)] < 0 && linked(d, w, u, v)) {
          dist[static_cast<size_t>(v)] = dist[static_cast<size_t>(u)] + 1;
          q.push(v);
        }
      }
    }
    for (int v = 0; v < n; ++v) {
      out.diameter = std::max(out.diameter, dist[static_cast<size_t>(v)]);
      total += dist[static_cast<size_t>(v)];
    }
  }
  out.mean = static_cast<double>(total) / (static_cast<double>(n) * n);
  // Every axis-aligned cut: the most balanced ones, and among those the fewest links.
  int64_t best_imbalance = -1;
  for (size_t axis = 0; axis < 3; ++axis) {
    for (int p = 1; p < d[axis]; ++p) {
      int64_t side = 0, links = 0;
      for (int a = 0; a < n; ++a) {
        bool left = coord(d, a)[axis] < p;
        side += left ? 1 : 0;
        for (int b = a + 1; b < n; ++b) {
          if (left != (coord(d, b)[axis] < p) && linked(d, w, a, b)) {
            ++links;
          }
        }
      }
      int64_t imbalance = std::abs(2 * side - n);
      if (best_imbalance < 0 || imbalance < best_imbalance ||
          (imbalance == best_imbalance && links < out.bisection)) {
        best_imbalance = imbalance;
        out.bisection = links;
      }
    }
  }
  return out;
}

AcceleratorType slice(const char* type) {
  auto t = parse_accelerator_type(type);
  REQUIRE(t.has_value());
  return *t;
}

} // namespace

TEST_SUITE_BEGIN("topology");

TEST_CASE("topology::Torus formulas agree with brute force on small tori and meshes") {
  const std::vector<Dims> shapes = {{2, 2, 1}, {2, 2, 4}, {4, 4, 4}, {3, 5, 2}, {4, 8, 2},
                                    {4, 4, 1}, {3, 1, 1}, {5, 6, 1}, {1, 1, 1}, {2, 3, 1}};
  const std::vector<Wrap> wraps = {
      {false, false, false}, {true, true, true}, {false, true, false}, {true, false, true}};
  for (const auto& d : shapes) {
    for (const auto& w : wraps) {
      CAPTURE(d[0]);
      CAPTURE(d[1]);
      CAPTURE(d[2]);
      CAPTURE(w[0]);
      CAPTURE(w[1]);
      CAPTURE(w[2]);
      Torus t{d, w};
      BruteForce b = brute_force(d, w);
      CHECK(t.diameter() == b.diameter);
      CHECK(t.mean_hops() == doctest::Approx(b.mean).epsilon(1e-12));
      CHECK(t.bisection_links() == b.bisection);
    }
  }
}

TEST_CASE("topology::Torus neighbours are the linked chips, once each") {
  for (const auto& d :
       {Dims{2, 2, 4}, Dims{4, 4, 4}, Dims{3, 5, 2}, Dims{4, 4, 1}, Dims{1, 1, 1}}) {
    for (const auto& w : {Wrap{false, false, false}, Wrap{true, true, true}}) {
      Torus t{d, w};
      for (int i = 0; i < t.chips(); ++i) {
        std::vector<int> expected;
        for (int j = 0; j < t.chips(); ++j) {
          if (linked(d, w, i, j)) {
            expected.push_back(j);
          }
        }
        CHECK(t.neighbours(i) == expected);
        CHECK(t.coord_of(i) == coord(d, i));
        CHECK(t.index_of(t.coord_of(i)) == i);
      }
    }
  }
  // A 4x4x4 torus chip has 6 neighbours; a wrapped size-2 axis adds one, a size-1 axis none.
  CHECK(Torus{{4, 4, 4}, {true, true, true}}.neighbours(0).size() == 6);
  CHECK(Torus{{2, 2, 1}, {true, true, true}}.neighbours(0) == std::vector<int>{1, 2});
}

TEST_CASE("topology::Torus reproduces the hop and bisection table of topology.md") {
  struct Row {
    Dims dims;
    bool wrap;
    int diameter;
    double mean;
    int64_t bisection;
  };
  const Row rows[] = {
      {{4, 4, 1}, false, 6, 2.50, 4},       {{16, 16, 1}, true, 16, 8.00, 32},
      {{2, 2, 4}, false, 5, 2.25, 4},       {{4, 4, 4}, true, 6, 3.00, 32},
      {{4, 4, 4}, false, 9, 3.75, 16},      {{8, 8, 8}, true, 12, 6.00, 128},
      {{8, 16, 16}, true, 20, 10.00, 256},  {{16, 16, 16}, true, 24, 12.00, 512},
      {{16, 16, 24}, true, 28, 14.00, 512}, {{16, 20, 28}, true, 32, 16.00, 640},
      {{32, 32, 1}, true, 32, 16.00, 64},
  };
  for (const auto& r : rows) {
    CAPTURE(format_dims(r.dims, 3));
    // 2D pods wrap on x and y only.
    Wrap w{r.wrap, r.wrap, r.wrap && r.dims[2] > 1};
    Torus t{r.dims, w};
    CHECK(t.diameter() == r.diameter);
    CHECK(t.mean_hops() == doctest::Approx(r.mean).epsilon(0.005));
    CHECK(t.bisection_links() == r.bisection);
  }
}

TEST_CASE("topology::bisection_gbytes_per_s matches Google's published pod figures") {
  // Published bisection bandwidth per pod: v3 6.4 TB/s, v5e 1.6 TB/s, v6e 3.2 TB/s, v4 24 TB/s.
  CHECK(bisection_gbytes_per_s(slice("v3-2048")) == doctest::Approx(6400));
  CHECK(bisection_gbytes_per_s(slice("v5litepod-256")) == doctest::Approx(1600));
  CHECK(bisection_gbytes_per_s(slice("v6e-256")) == doctest::Approx(3200));
  CHECK(bisection_gbytes_per_s(slice("v4-8192")) == doctest::Approx(24000).epsilon(0.05));
  CHECK(bisection_gbytes_per_s(slice("v5p-8")) > 0);
}

TEST_CASE("topology::torus_of uses the slice's wraparound") {
  CHECK(torus_of(slice("v5p-128")).diameter() == 6); // 4x4x4 torus
  CHECK(torus_of(slice("v5p-64")).diameter() == 7);  // 2x4x4 mesh: 1 + 3 + 3
  CHECK(torus_of(slice("v5litepod-16")).bisection_links() == 4);
  CHECK(torus_of(slice("v6e-128")).bisection_links() == 16); // 8x16, only y wraps
}

TEST_CASE("topology::worker_coords and worker_chips follow the x-fastest host grid") {
  SUBCASE("v5p-128: 2x2x4 hosts of 2x2x1 chips") {
    auto t = slice("v5p-128");
    auto w5 = worker_coords(t, 5);
    REQUIRE(w5.has_value());
    CHECK(*w5 == Coord{1, 0, 1});
    auto chips = worker_chips(t, 5);
    REQUIRE(chips.has_value());
    // x in 2..3, y in 0..1, z = 1 on a 4x4x4 grid: x + 4y + 16z.
    CHECK(*chips == std::vector<int>{18, 19, 22, 23});
    CHECK(*worker_coords(t, 15) == Coord{1, 1, 3});
  }
  SUBCASE("v4-32: hosts stack along z") {
    auto t = slice("v4-32");
    CHECK(t.host_bounds == Dims{1, 1, 4});
    CHECK(*worker_coords(t, 3) == Coord{0, 0, 3});
    CHECK(*worker_chips(t, 3) == std::vector<int>{12, 13, 14, 15});
  }
  SUBCASE("a single-host v6e-8 holds all 8 chips") {
    auto t = slice("v6e-8");
    CHECK(t.chips_per_host_bounds == Dims{2, 4, 1});
    CHECK(worker_chips(t, 0)->size() == 8);
  }
  SUBCASE("every chip belongs to exactly one worker, and worker_of_chip agrees") {
    for (const char* type : {"v5p-128", "v5litepod-64", "v4-64", "v3-64", "tpu7x-2", "v6e-8"}) {
      CAPTURE(type);
      auto t = slice(type);
      std::vector<int> owner(static_cast<size_t>(t.chips), -1);
      for (int w = 0; w < t.hosts; ++w) {
        auto chips = worker_chips(t, w);
        REQUIRE(chips.has_value());
        CHECK(static_cast<int>(chips->size()) == t.chips_per_host);
        for (int c : *chips) {
          CHECK(owner[static_cast<size_t>(c)] == -1);
          owner[static_cast<size_t>(c)] = w;
          CHECK(*worker_of_chip(t, c) == w);
        }
      }
      CHECK(std::count(owner.begin(), owner.end(), -1) == 0);
    }
  }
  SUBCASE("workers and chips outside the slice are usage errors naming them") {
    auto t = slice("v5p-32");
    auto w = worker_coords(t, 4);
    REQUIRE_FALSE(w.has_value());
    CHECK(w.error().kind == ErrorKind::usage);
    CHECK(w.error().message.find("worker 4") != std::string::npos);
    CHECK(w.error().message.find("0 to 3") != std::string::npos);
    CHECK_FALSE(worker_chips(t, -1).has_value());
    CHECK_FALSE(worker_of_chip(t, 16).has_value());
  }
}

TEST_SUITE_END();
