// Logical device meshes: properties every layout must have, the examples of JAX's
// create_device_mesh docstring, the splitting fallback, the v5e rings and hybrid stacking.
#include <algorithm>
#include <cstdlib>

#include <doctest/doctest.h>

#include "topology/mesh.hpp"

using namespace tpuctl;
using namespace tpuctl::topology;

namespace {

AcceleratorType slice(const char* type) {
  auto t = parse_accelerator_type(type);
  REQUIRE(t.has_value());
  return *t;
}

DeviceMesh mesh_of(const char* type, std::vector<int> shape, int slices = 1) {
  MeshRequest r;
  r.shape = std::move(shape);
  r.num_slices = slices;
  auto m = create_device_mesh(slice(type), r);
  REQUIRE(m.has_value());
  return *m;
}

// Hops between two chips of a grid, from coordinates computed here (x fastest).
int hops(const AcceleratorType& t, int a, int b) {
  int total = 0, rest_a = a, rest_b = b;
  for (size_t i = 0; i < 3; ++i) {
    int k = t.dims[i];
    int d = std::abs(rest_a % k - rest_b % k);
    if (t.wrap[i]) {
      d = std::min(d, k - d);
    }
    total += d;
    rest_a /= k;
    rest_b /= k;
  }
  return total;
}

} // namespace

TEST_SUITE_BEGIN("topology");

TEST_CASE("topology::create_device_mesh uses every device exactly once") {
  struct Case {
    const char* type;
    std::vector<int> shape;
    int slices;
  };
  const Case cases[] = {
      {"v5p-128", {16, 4}, 1},     {"v5p-128", {2, 8, 4}, 1},      {"v5p-512", {16, 16}, 1},
      {"v6e-16", {2, 2, 4}, 1},    {"v5litepod-16", {16}, 1},      {"v5litepod-4", {2, 2}, 1},
      {"v4-32", {4, 4}, 3},        {"v5p-128", {1, 64}, 2},        {"v6e-256", {8, 32}, 1},
      {"v5p-1024", {8, 2, 32}, 1}, {"tpu7x-128", {4, 4, 2, 2}, 1}, {"v5p-12288", {96, 64}, 1},
  };
  for (const auto& c : cases) {
    CAPTURE(c.type);
    auto t = slice(c.type);
    auto m = mesh_of(c.type, c.shape, c.slices);
    std::vector<int> sorted = m.devices;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(static_cast<int>(sorted.size()) == t.chips * c.slices);
    for (int i = 0; i < t.chips * c.slices; ++i) {
      CHECK(sorted[static_cast<size_t>(i)] == i);
    }
    // The factors each axis takes multiply to its size, and the physical axes are covered once.
    Dims used{1, 1, 1};
    for (const auto& a : m.axes) {
      int f = 1;
      for (size_t i = 0; i < a.physical_axes.size(); ++i) {
        f *= a.physical_factors[i];
        used[static_cast<size_t>(a.physical_axes[i])] *= a.physical_factors[i];
      }
      if (!m.ring_order) {
        CHECK(f * a.dcn == a.size);
      }
    }
    if (!m.ring_order) {
      CHECK(used == t.dims);
    }
  }
}

TEST_CASE("topology::create_device_mesh follows JAX's docstring examples") {
  SUBCASE("4x4x16 with (16, 16): model takes the x,y plane, data takes z") {
    auto t = slice("v5p-4x4x16");
    auto m = mesh_of("v5p-4x4x16", {16, 16});
    CHECK(m.axes[1].physical_axes == std::vector<int>{0, 1});
    CHECK(m.axes[0].physical_axes == std::vector<int>{2});
    CHECK_FALSE(m.axes[0].split);
    CHECK_FALSE(m.axes[1].split);
    // Neighbours along the data axis are z-neighbours, around the ring.
    for (int j = 0; j < 16; ++j) {
      for (int i = 0; i < 16; ++i) {
        CHECK(hops(t, m.at({i, j}), m.at({(i + 1) % 16, j})) == 1);
      }
    }
  }
  SUBCASE("4x4x4 with (16, 4): the last axis takes x, the first takes y,z") {
    auto t = slice("v5p-128");
    auto m = mesh_of("v5p-128", {16, 4});
    CHECK(m.axes[1].physical_axes == std::vector<int>{0});
    CHECK(m.axes[0].physical_axes == std::vector<int>{1, 2});
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 4; ++j) {
        int d = m.at({i, j});
        CHECK(d % 4 == j); // x is the position along the model axis
        CHECK(hops(t, d, m.at({i, (j + 1) % 4})) == 1);
      }
    }
  }
  SUBCASE("v6e 4x4 with (4, 4): rows along y, columns along x") {
    auto m = mesh_of("v6e-16", {4, 4});
    CHECK(m.axes[1].physical_axes == std::vector<int>{0});
    CHECK(m.axes[0].physical_axes == std::vector<int>{1});
    CHECK(m.devices == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  }
}

TEST_CASE("topology::assign_whole_axes fails where only splitting works") {
  CHECK(assign_whole_axes({4, 4, 4}, {2, 8, 4}).empty());
  CHECK(assign_whole_axes({4, 4, 1}, {2, 2, 4}).empty());
  auto whole = assign_whole_axes({4, 4, 16}, {16, 16});
  REQUIRE(whole.size() == 2);
  CHECK(whole[1] == AxisFactors{4, 4, 1});
  CHECK(whole[0] == AxisFactors{1, 1, 16});
}

TEST_CASE("topology::create_device_mesh splits physical axes when whole ones do not fit") {
  SUBCASE("(2, 2, 4) on a 4x4 grid: the last axis takes x, the first two split y") {
    auto m = mesh_of("v6e-16", {2, 2, 4});
    CHECK(m.axes[2].physical_axes == std::vector<int>{0});
    CHECK_FALSE(m.axes[2].split);
    CHECK(m.axes[1].physical_axes == std::vector<int>{1});
    CHECK(m.axes[1].split);
    CHECK(m.axes[0].physical_axes == std::vector<int>{1});
    CHECK(m.axes[0].split);
    // y = 2a + b (the lower logical axis major), x = c.
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 2; ++b) {
        for (int c = 0; c < 4; ++c) {
          CHECK(m.at({a, b, c}) == c + 4 * (2 * a + b));
        }
      }
    }
  }
  SUBCASE("(4, 2, 2) on a 4x4 grid: the second axis packs onto x, which the last one split") {
    // JAX prefers the physical axis a more intensive logical axis already uses (c.2 rule 3).
    auto m = mesh_of("v6e-16", {4, 2, 2});
    CHECK(m.axes[2].physical_axes == std::vector<int>{0});
    CHECK(m.axes[2].physical_factors == std::vector<int>{2});
    CHECK(m.axes[1].physical_axes == std::vector<int>{0});
    CHECK(m.axes[1].physical_factors == std::vector<int>{2});
    CHECK(m.axes[0].physical_axes == std::vector<int>{1});
    CHECK_FALSE(m.axes[0].split);
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 2; ++b) {
        for (int c = 0; c < 2; ++c) {
          CHECK(m.at({a, b, c}) == (2 * b + c) + 4 * a);
        }
      }
    }
  }
  SUBCASE("(2, 8, 4) on 4x4x4: 8 takes the whole of y and half of z") {
    auto m = mesh_of("v5p-128", {2, 8, 4});
    CHECK(m.axes[2].physical_axes == std::vector<int>{0});
    CHECK(m.axes[1].physical_axes == std::vector<int>{1, 2});
    CHECK(m.axes[1].physical_factors == std::vector<int>{4, 2});
    CHECK(m.axes[0].physical_axes == std::vector<int>{2});
    CHECK(m.axes[0].physical_factors == std::vector<int>{2});
    // b = 2y + zb (x major within the axis); z = 2a + zb (the lower logical axis major).
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 8; ++b) {
        for (int c = 0; c < 4; ++c) {
          int y = b / 2, z = 2 * a + b % 2;
          CHECK(m.at({a, b, c}) == c + 4 * (y + 4 * z));
        }
      }
    }
  }
}

TEST_CASE("topology::create_device_mesh uses JAX's v5e ring orders") {
  SUBCASE("a 2x2 v5e is the ring (0,0) (1,0) (1,1) (0,1)") {
    auto m = mesh_of("v5litepod-4", {4});
    CHECK(m.ring_order);
    CHECK(m.devices == std::vector<int>{0, 1, 3, 2});
  }
  SUBCASE("a 4x4 v5e with a 16-device axis is a closed ring of physical neighbours") {
    auto t = slice("v5litepod-16");
    for (auto shape : {std::vector<int>{16}, std::vector<int>{1, 16}, std::vector<int>{16, 1}}) {
      MeshRequest r;
      r.shape = shape;
      auto m = create_device_mesh(t, r);
      REQUIRE(m.has_value());
      CHECK(m->ring_order);
      for (size_t i = 0; i < 16; ++i) {
        CHECK(hops(t, m->devices[i], m->devices[(i + 1) % 16]) == 1); // 4x4 has no wrap
      }
    }
  }
  SUBCASE("other shapes and other generations use the general layout") {
    CHECK_FALSE(mesh_of("v5litepod-16", {4, 4}).ring_order);
    CHECK_FALSE(mesh_of("v6e-16", {16}).ring_order);
    CHECK_FALSE(mesh_of("v6e-4", {4}).ring_order);
  }
}

TEST_CASE("topology::create_device_mesh stacks slices on the first axis over DCN") {
  auto one = mesh_of("v5p-32", {4, 4});
  auto m = mesh_of("v5p-32", {4, 4}, 3);
  CHECK(m.shape == std::vector<int>{12, 4});
  CHECK(m.axes[0].dcn == 3);
  CHECK(m.axes[0].size == 12);
  CHECK(m.axes[1].dcn == 1);
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        CHECK(m.at({4 * s + i, j}) == one.at({i, j}) + 16 * s);
      }
    }
  }
}

TEST_CASE("topology::create_device_mesh rejects requests that do not fit, reporting each") {
  auto t = slice("v5p-128");
  SUBCASE("a shape with the wrong number of devices names both numbers") {
    MeshRequest r;
    r.shape = {4, 64};
    auto m = create_device_mesh(t, r);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().kind == ErrorKind::usage);
    CHECK(m.error().message.find("'4,64' has 256 devices") != std::string::npos);
    CHECK(m.error().message.find("has 64") != std::string::npos);
  }
  SUBCASE("every problem at once") {
    MeshRequest r;
    r.shape = {4, 8};
    r.axis_names = {"a", "b", "c"};
    r.num_slices = 0;
    auto m = create_device_mesh(t, r);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().all_messages().size() == 3);
  }
  SUBCASE("names must be distinct and non-empty") {
    MeshRequest r;
    r.shape = {16, 4};
    r.axis_names = {"data", "data"};
    auto m = create_device_mesh(t, r);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().message.find("'data' is used twice") != std::string::npos);
    r.axis_names = {"data", ""};
    CHECK_FALSE(create_device_mesh(t, r).has_value());
  }
  SUBCASE("sizes must be at least 1 and the shape not empty") {
    MeshRequest r;
    r.shape = {0, 64};
    CHECK_FALSE(create_device_mesh(t, r).has_value());
    r.shape = {};
    CHECK_FALSE(create_device_mesh(t, r).has_value());
  }
}

TEST_SUITE_END();
