#include <random>
#include <set>

#include <doctest/doctest.h>

#include "provision/queue/placement.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

TEST_SUITE_BEGIN("provision");

namespace {

// A pool whose every position holds a free host named "h<position index>".
HostGrid full_grid(const std::string& generation, const std::string& shape,
                   int chips_per_host = 4) {
  auto layout = make_pool_layout(generation, chips_per_host, shape);
  REQUIRE(layout);
  HostGrid grid(*layout);
  for (int i = 0; i < layout->capacity(); ++i) {
    GridCell& cell = grid.at(position_of(*layout, i));
    cell.state = CellState::free;
    cell.host = "h" + std::to_string(i);
  }
  grid.refresh();
  return grid;
}

void set_cell(HostGrid& grid, const Dims& pos, CellState state, const std::string& owner) {
  grid.at(pos).state = state;
  grid.at(pos).owner = owner;
  grid.refresh();
}

topology::AcceleratorType type_of(const std::string& name) {
  auto t = topology::parse_accelerator_type(name);
  REQUIRE(t);
  return *t;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::set<Dims> positions(const Placement& p) {
  std::set<Dims> out;
  for (const auto& h : p.hosts) {
    out.insert(h.position);
  }
  return out;
}

} // namespace

TEST_CASE("provision::place_slices puts two v5litepod-16 side by side on an 8-host v5e pool") {
  HostGrid grid = full_grid("v5e", "8x4"); // 4x2 hosts
  auto type = type_of("v5litepod-16");     // 4x4 chips = 2x2 hosts
  auto two = place_slices(grid, type, 2, "p");
  REQUIRE(two);
  REQUIRE(two->size() == 2);
  auto a = positions((*two)[0]);
  auto b = positions((*two)[1]);
  CHECK(a.size() == 4);
  CHECK(b.size() == 4);
  for (const auto& pos : a) {
    CHECK(b.count(pos) == 0);
  }
  CHECK((*two)[0].block.size == Dims{2, 2, 1});

  SUBCASE("a third does not fit and the message names the claimed hosts") {
    claim(grid, (*two)[0], "qr-1");
    claim(grid, (*two)[1], "qr-42");
    auto third = place_slice(grid, type, "p");
    REQUIRE(!third);
    CHECK(third.error().kind == ErrorKind::capacity);
    CHECK(third.error().reason == "no_free_block");
    const std::string& msg = third.error().message;
    CHECK(contains(msg, "v5litepod-16 needs a free block of 2x2 hosts (4x4 chips)"));
    CHECK(contains(msg, "no host is free"));
    CHECK(contains(msg, "(claimed by qr-"));
    CHECK(contains(msg, "are in the way"));
  }
  SUBCASE("a drained host in the way is named with its reason, next to the largest free block") {
    claim(grid, (*two)[0], "qr-42");
    // Drain one host of the other half.
    const auto& other = (*two)[1].hosts;
    set_cell(grid, other[1].position, CellState::drained, "disk");
    auto third = place_slice(grid, type, "p");
    REQUIRE(!third);
    const std::string& msg = third.error().message;
    // Three free hosts remain in an L: the largest free rectangle has 2 hosts.
    CHECK((contains(msg, "the largest free block is 1x2 hosts") ||
           contains(msg, "the largest free block is 2x1 hosts")));
    CHECK(contains(msg, "host " + other[1].host + " (drained: disk) is in the way"));
    auto why = explain_no_fit(grid, type, 1, "p");
    CHECK(!why.never);
    CHECK(why.in_the_way == std::vector<std::string>{other[1].host + " (drained: disk)"});
  }
}

TEST_CASE("provision::place_slice numbers workers by host position, x fastest") {
  HostGrid grid = full_grid("v5e", "16x16"); // 8x8 hosts
  auto type = type_of("v5litepod-4x8");      // 2x4 hosts, never rotated
  set_cell(grid, Dims{0, 0, 0}, CellState::claimed, "qr-1");
  auto p = place_slice(grid, type);
  REQUIRE(p);
  CHECK(p->block.size == Dims{2, 4, 1});
  REQUIRE(p->hosts.size() == 8);
  for (int w = 0; w < 8; ++w) {
    const auto& h = p->hosts[static_cast<size_t>(w)];
    CHECK(h.worker == w);
    Dims expect{p->block.origin[0] + w % 2, p->block.origin[1] + w / 2, 0};
    CHECK(h.position == expect);
    CHECK(h.host == grid.at(expect).host);
    CHECK(grid.at(h.position).state == CellState::free);
  }
}

TEST_CASE("provision::place_slice keeps a sub-cube v4 slice inside one cube and packs cubes") {
  HostGrid grid = full_grid("v4", "8x4x4"); // 4x2x4 hosts = two cubes of 2x2x4 hosts
  CHECK(cube_hosts(grid.layout()) == Dims{2, 2, 4});
  auto type = type_of("v4-32"); // 2x2x4 chips = 1x1x4 hosts
  REQUIRE(type.host_bounds == Dims{1, 1, 4});

  SUBCASE("inside one cube, no wraparound") {
    auto p = place_slice(grid, type);
    REQUIRE(p);
    CHECK(p->hosts.size() == 4);
    std::set<Dims> cubes;
    for (const auto& h : p->hosts) {
      cubes.insert(Dims{h.position[0] / 2, h.position[1] / 2, h.position[2] / 4});
    }
    CHECK(cubes.size() == 1);
    CHECK(!p->multi_cube());
  }
  SUBCASE("a partly used cube is filled before a whole free one") {
    set_cell(grid, Dims{3, 1, 0}, CellState::claimed, "qr-7"); // a host of the second cube
    auto p = place_slice(grid, type);
    REQUIRE(p);
    for (const auto& h : p->hosts) {
      CHECK(h.position[0] >= 2);
    }
    // The first cube stays whole, so a one-cube slice still fits.
    claim(grid, *p, "qr-8");
    auto cube = place_slice(grid, type_of("v4-128"));
    REQUIRE(cube);
    CHECK(cube->cubes.size() == 1);
    CHECK(cube->cubes[0].physical == Dims{0, 0, 0});
  }
}

TEST_CASE("provision::place_slice gives a one-cube v5p-128 a whole free cube or explains") {
  HostGrid grid = full_grid("v5p", "8x4x4"); // two cubes
  auto type = type_of("v5p-128");
  set_cell(grid, Dims{0, 0, 1}, CellState::claimed, "qr-1");
  auto p = place_slice(grid, type, "p");
  REQUIRE(p);
  REQUIRE(p->cubes.size() == 1);
  CHECK(p->cubes[0].physical == Dims{1, 0, 0});
  CHECK(p->cube_grid == Dims{1, 1, 1});
  CHECK(p->hosts.size() == 16);
  for (const auto& h : p->hosts) {
    CHECK(h.position[0] >= 2);
  }
  set_cell(grid, Dims{2, 1, 3}, CellState::drained, "fan");
  auto none = place_slice(grid, type, "p");
  REQUIRE(!none);
  CHECK(none.error().kind == ErrorKind::capacity);
  CHECK(contains(none.error().message, "needs 1 whole free cube (2x2x4 hosts each)"));
  CHECK(contains(none.error().message, "0 of 2 cubes are free"));
  // Either cube is one host away; the nearer-to-origin one is named.
  CHECK(contains(none.error().message, "(claimed by qr-1) is in the way"));
}

TEST_CASE("provision::place_slice builds v5p-256 from two free cubes that need not touch") {
  HostGrid grid = full_grid("v5p", "12x4x4"); // three cubes along x
  auto type = type_of("v5p-256");             // 4x4x8 chips: a 1x1x2 cube grid, 2x2x8 hosts
  REQUIRE(type.host_bounds == Dims{2, 2, 8});
  set_cell(grid, Dims{2, 0, 0}, CellState::claimed, "qr-9"); // the middle cube is busy
  auto p = place_slice(grid, type);
  REQUIRE(p);
  CHECK(p->cube_grid == Dims{1, 1, 2});
  REQUIRE(p->cubes.size() == 2);
  CHECK(p->cubes[0].logical == Dims{0, 0, 0});
  CHECK(p->cubes[1].logical == Dims{0, 0, 1});
  std::set<Dims> physical{p->cubes[0].physical, p->cubes[1].physical};
  CHECK(physical == std::set<Dims>{Dims{0, 0, 0}, Dims{2, 0, 0}});
  REQUIRE(p->hosts.size() == 32);
  std::set<Dims> used;
  for (int w = 0; w < 32; ++w) {
    const auto& h = p->hosts[static_cast<size_t>(w)];
    CHECK(h.worker == w);
    CHECK(h.logical == Dims{w % 2, (w / 2) % 2, w / 4});
    CHECK(grid.at(h.position).state == CellState::free);
    CHECK(h.host == grid.at(h.position).host);
    // The host sits in the physical cube its logical cube maps to, at the same offset.
    const Dims& cube = p->cubes[static_cast<size_t>(h.logical[2] / 4)].physical;
    CHECK(h.position == Dims{cube[0] * 2 + h.logical[0], cube[1] * 2 + h.logical[1],
                             cube[2] * 4 + h.logical[2] % 4});
    used.insert(h.position);
  }
  CHECK(used.size() == 32);
}

TEST_CASE("provision::check_compatible rejects wrong host sizes and generations") {
  HostGrid v5e = full_grid("v5e", "8x4");
  auto eight = place_slice(v5e, type_of("v5litepod-8"), "p");
  REQUIRE(!eight);
  CHECK(eight.error().kind == ErrorKind::usage);
  CHECK(eight.error().message == "accelerator type 'v5litepod-8' needs hosts of 8 chips (2x4); "
                                 "pool 'p' has hosts of 4 chips (2x2) (use a pool with hosts of "
                                 "that size)");
  HostGrid v4 = full_grid("v4", "4x4x4");
  auto gen = place_slice(v4, type_of("v5p-128"), "p");
  REQUIRE(!gen);
  CHECK(gen.error().kind == ErrorKind::usage);
  CHECK(contains(gen.error().message, "'v5p-128' is a v5p type but pool 'p' holds v4 hosts"));
  CHECK(explain_no_fit(v4, type_of("v5p-128")).never);
}

TEST_CASE("provision::fits_empty says whether the pool could ever hold the request") {
  auto v5e = make_pool_layout("v5e", 4, "8x4");
  REQUIRE(v5e);
  CHECK(fits_empty(*v5e, type_of("v5litepod-16"), 2));
  CHECK(!fits_empty(*v5e, type_of("v5litepod-16"), 3));
  CHECK(!fits_empty(*v5e, type_of("v5litepod-64"), 1));
  CHECK(!fits_empty(*v5e, type_of("v5litepod-8"), 1)); // wrong host size
  auto v4 = make_pool_layout("v4", 4, "4x4x4");
  REQUIRE(v4);
  CHECK(fits_empty(*v4, type_of("v4-32"), 4)); // four 1x1x4 columns in a 2x2x4 cube
  CHECK(!fits_empty(*v4, type_of("v4-32"), 5));
  CHECK(fits_empty(*v4, type_of("v4-128"), 1));
  CHECK(!fits_empty(*v4, type_of("v4-256"), 1));

  SUBCASE("a request the pool can never hold is reported as such") {
    HostGrid grid = full_grid("v5e", "8x4");
    auto big = place_slice(grid, type_of("v5litepod-64"), "p");
    REQUIRE(!big);
    CHECK(big.error().kind == ErrorKind::capacity);
    CHECK(big.error().reason == "never_fits");
    CHECK(big.error().message == "v5litepod-64 needs a block of 4x4 hosts (8x8 chips); pool 'p' "
                                 "is 4x2 hosts (8x4 chips), so it can never hold it");
  }
}

TEST_CASE("provision::place_slices is all or nothing") {
  HostGrid grid = full_grid("v5e", "8x4");
  auto type = type_of("v5litepod-16");
  auto three = place_slices(grid, type, 3, "p");
  REQUIRE(!three);
  CHECK(three.error().reason == "never_fits");
  set_cell(grid, Dims{0, 0, 0}, CellState::claimed, "qr-3");
  auto two = place_slices(grid, type, 2, "p");
  REQUIRE(!two);
  CHECK(two.error().reason == "no_free_block");
  CHECK(contains(two.error().message, "only 1 of 2 slices of v5litepod-16 fit now"));
  CHECK(grid.count(CellState::free) == 7); // nothing was claimed
  auto one = place_slices(grid, type, 1, "p");
  REQUIRE(one);
  CHECK(one->size() == 1);
}

TEST_CASE("provision::try_place_slice uses only free hosts and respects cubes (random pools)") {
  // Oracle: brute force over every block position inside each cube, or counting free cubes.
  std::mt19937 rng(12345);
  const std::vector<std::string> names{"v4-8", "v4-16", "v4-32", "v4-64", "v4-128", "v4-256"};
  HostGrid base = full_grid("v4", "8x8x8"); // 4x4x8 hosts, 2x2x2 cubes of 2x2x4 hosts
  const Dims c = cube_hosts(base.layout());
  int placed = 0;
  int refused = 0;
  for (int round = 0; round < 300; ++round) {
    HostGrid grid = base;
    double busy = std::uniform_real_distribution<double>(0.0, 0.6)(rng);
    for (int i = 0; i < grid.layout().capacity(); ++i) {
      if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < busy) {
        grid.at(position_of(grid.layout(), i)).state =
            (i % 3 == 0) ? CellState::drained : CellState::claimed;
      }
    }
    grid.refresh();
    auto type = type_of(names[static_cast<size_t>(round) % names.size()]);
    const Dims& hb = type.host_bounds;
    bool multi = type.cubes() > 0;
    // Does a placement exist?
    bool exists = false;
    if (multi) {
      int free_cubes = 0;
      for (int cz = 0; cz < 2; ++cz) {
        for (int cy = 0; cy < 2; ++cy) {
          for (int cx = 0; cx < 2; ++cx) {
            bool all = true;
            for (int i = 0; i < 16; ++i) {
              Dims pos{cx * 2 + i % 2, cy * 2 + (i / 2) % 2, cz * 4 + i / 4};
              all = all && grid.at(pos).state == CellState::free;
            }
            free_cubes += all ? 1 : 0;
          }
        }
      }
      exists = free_cubes >= type.cubes();
    } else {
      for (int i = 0; i < grid.layout().capacity() && !exists; ++i) {
        Dims o = position_of(grid.layout(), i);
        bool inside = true;
        for (int a = 0; a < 3; ++a) {
          inside = inside && o[a] / c[a] == (o[a] + hb[a] - 1) / c[a] &&
                   o[a] + hb[a] <= grid.layout().host_grid[a];
        }
        exists = inside && grid.block_free(o, hb);
      }
    }
    auto p = try_place_slice(grid, type);
    CHECK(p.has_value() == exists);
    if (!p) {
      ++refused;
      continue;
    }
    ++placed;
    CHECK(static_cast<int>(p->hosts.size()) == type.hosts);
    std::set<Dims> seen;
    std::set<Dims> cubes;
    for (const auto& h : p->hosts) {
      CHECK(grid.at(h.position).state == CellState::free);
      CHECK(seen.insert(h.position).second);
      cubes.insert(Dims{h.position[0] / c[0], h.position[1] / c[1], h.position[2] / c[2]});
    }
    if (!multi) {
      CHECK(cubes.size() == 1);
    } else {
      CHECK(static_cast<int>(cubes.size()) == type.cubes());
    }
  }
  // The random pools exercise both outcomes.
  CHECK(placed > 50);
  CHECK(refused > 20);
}
