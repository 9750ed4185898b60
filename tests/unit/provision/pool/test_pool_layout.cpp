#include <doctest/doctest.h>

#include "provision/pool/host_grid.hpp"
#include "provision/pool/pool_layout.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;

TEST_SUITE_BEGIN("provision");

TEST_CASE("provision::make_pool_layout defaults to the generation's pod of 4-chip hosts") {
  auto v5p = make_pool_layout("v5p", std::nullopt, "");
  REQUIRE(v5p);
  CHECK(v5p->shape == Dims{16, 20, 28});
  CHECK(v5p->host_grid == Dims{8, 10, 28});
  CHECK(v5p->capacity() == 2240);
  auto v5e = make_pool_layout("v5litepod", 4, "8x4");
  REQUIRE(v5e);
  CHECK(v5e->host_grid == Dims{4, 2, 1});
}

TEST_CASE("provision::make_pool_layout reports every problem with the offending value") {
  auto wrong_rank = make_pool_layout("v5e", 4, "4x4x4");
  REQUIRE(!wrong_rank);
  CHECK(wrong_rank.error().message.find("'4x4x4' has 3 dimensions") != std::string::npos);
  auto odd = make_pool_layout("v4", 4, "3x4x4");
  REQUIRE(!odd);
  CHECK(odd.error().message.find("not a whole number of hosts") != std::string::npos);
  auto big = make_pool_layout("v5e", 4, "32x32");
  REQUIRE(!big);
  CHECK(big.error().message.find("larger than a v5e pod (16x16)") != std::string::npos);
  auto cph = make_pool_layout("v5p", 8, "");
  REQUIRE(!cph);
  CHECK(cph.error().message == "--chips-per-host: 8 is not a host size of v5p (use 4)");
  CHECK(!make_pool_layout("v9", 4, ""));
}

TEST_CASE("provision::compact_layout holds the largest slices the host count allows") {
  CHECK(compact_layout("v5e", std::nullopt, 8)->shape == Dims{8, 4, 1});
  CHECK(compact_layout("v6e", std::nullopt, 16)->shape == Dims{8, 8, 1});
  CHECK(compact_layout("v4", std::nullopt, 16)->shape == Dims{4, 4, 4});
  CHECK(compact_layout("v5p", std::nullopt, 16)->host_grid == Dims{2, 2, 4});
  CHECK(compact_layout("v5e", std::nullopt, 1)->shape == Dims{2, 2, 1});
  CHECK(!compact_layout("v5e", std::nullopt, 100)); // 400 chips > a 256-chip pod
}

TEST_CASE("provision::parse_position checks the grid") {
  auto layout = *make_pool_layout("v5e", 4, "8x4");
  CHECK(*parse_position(layout, "3,1") == Dims{3, 1, 0});
  CHECK(!parse_position(layout, "4,0"));
  CHECK(!parse_position(layout, "1"));
  CHECK(!parse_position(layout, "a,b"));
  CHECK(position_index(layout, Dims{1, 1, 0}) == 5);
  CHECK(position_of(layout, 5) == Dims{1, 1, 0});
}

TEST_CASE("provision::largest_free_blocks finds maximal free boxes, biggest first") {
  auto layout = *make_pool_layout("v5e", 4, "8x4"); // 4x2 hosts
  HostGrid grid(layout);
  for (int i = 0; i < layout.capacity(); ++i) {
    grid.at(position_of(layout, i)) = GridCell{CellState::free, "h" + std::to_string(i), ""};
  }
  grid.refresh();
  auto all = largest_free_blocks(grid, 3);
  REQUIRE(all.size() == 1);
  CHECK(all[0].size == Dims{4, 2, 1});

  grid.at(Dims{1, 0, 0}).state = CellState::claimed; // h1 claimed
  grid.at(Dims{2, 1, 0}).state = CellState::drained; // h6 drained
  grid.refresh();
  CHECK(!grid.block_free(Dims{0, 0, 0}, Dims{2, 2, 1}));
  CHECK(grid.block_free(Dims{2, 0, 0}, Dims{2, 1, 1}));
  auto blocks = largest_free_blocks(grid, 10);
  REQUIRE(!blocks.empty());
  CHECK(blocks[0].volume() == 2);
  for (const auto& b : blocks) {
    for (int x = 0; x < b.size[0]; ++x) {
      for (int y = 0; y < b.size[1]; ++y) {
        CHECK(grid.at(Dims{b.origin[0] + x, b.origin[1] + y, 0}).state == CellState::free);
      }
    }
  }
}

TEST_SUITE_END();
