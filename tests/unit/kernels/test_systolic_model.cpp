// The cycle model against SCALE-Sim v2's published and measured results (kernels.md sections
// 3.1 and 3.2), hand-worked tpu-mode cases, the conv mapping, parsing and validation.
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "kernels/systolic_model.hpp"

using namespace tpuctl::kernels;

TEST_SUITE_BEGIN("kernels");

namespace {

struct GoldenRow {
  const char* name;
  std::optional<ConvLayer> conv; // the topology row SCALE-Sim ran, when it was a conv layer
  GemmShape gemm;                // M, N, K worked out by hand from that row
  ArrayShape array;
  Dataflow dataflow;
  int64_t total_cycles;
  double overall_pct, mapping_pct, compute_pct;
};

// kernels.md 3.1 (the v2 repository's golden trace) and 3.2 (v2 @ 22f88b1, CALC mode). The
// test_valid_N rows are ARM SCALE-Sim's validation CSVs: a 1 x N input, 1x1 filter, N channels,
// N filters, stride 1, i.e. an N x N x N GEMM.
const GoldenRow k_golden[] = {
    {"alexnet conv1 32x32 ws (v2 golden trace)",
     ConvLayer{224, 224, 11, 11, 3, 96, 4},
     {3025, 96, 363},
     {32, 32},
     Dataflow::ws,
     112283,
     91.68309650614964,
     94.53125,
     90.78000992063492},
    {"test_valid_4 4x4 os",
     ConvLayer{1, 4, 1, 1, 4, 4, 1},
     {4, 4, 4},
     {4, 4},
     Dataflow::os,
     9,
     44.44444444444444,
     100.0,
     40.0},
    {"test_valid_4 4x4 ws",
     ConvLayer{1, 4, 1, 1, 4, 4, 1},
     {4, 4, 4},
     {4, 4},
     Dataflow::ws,
     13,
     30.76923076923077,
     100.0,
     23.52941176470588},
    {"test_valid_8 8x8 os",
     ConvLayer{1, 8, 1, 1, 8, 8, 1},
     {8, 8, 8},
     {8, 8},
     Dataflow::os,
     21,
     38.095238095238095,
     100.0,
     36.36363636363637},
    {"test_valid_8 8x8 ws",
     ConvLayer{1, 8, 1, 1, 8, 8, 1},
     {8, 8, 8},
     {8, 8},
     Dataflow::ws,
     29,
     27.586206896551722,
     100.0,
     21.62162162162162},
    {"test_valid_16 16x16 os",
     ConvLayer{1, 16, 1, 1, 16, 16, 1},
     {16, 16, 16},
     {16, 16},
     Dataflow::os,
     45,
     35.55555555555556,
     100.0,
     34.78260869565217},
    {"test_valid_16 16x16 ws",
     ConvLayer{1, 16, 1, 1, 16, 16, 1},
     {16, 16, 16},
     {16, 16},
     Dataflow::ws,
     61,
     26.229508196721312,
     100.0,
     20.77922077922078},
    {"test_valid_32 32x32 os",
     ConvLayer{1, 32, 1, 1, 32, 32, 1},
     {32, 32, 32},
     {32, 32},
     Dataflow::os,
     93,
     34.40860215053763,
     100.0,
     34.04255319148936},
    {"test_valid_32 32x32 ws",
     ConvLayer{1, 32, 1, 1, 32, 32, 1},
     {32, 32, 32},
     {32, 32},
     Dataflow::ws,
     125,
     25.6,
     100.0,
     20.382165605095544},
    {"gemm 256x256x768 128x128 ws (ARM issue #51)",
     std::nullopt,
     {256, 256, 768},
     {128, 128},
     Dataflow::ws,
     7655,
     40.130633572828216,
     100.0,
     33.46405228758171},
    {"gemv 1x256x768 128x128 ws (ARM issue #51)",
     std::nullopt,
     {1, 256, 768},
     {128, 128},
     Dataflow::ws,
     4595,
     0.2611534276387378,
     100.0,
     0.19607843137254902},
    {"inception 5b 3x3 128x128 ws",
     ConvLayer{7, 7, 3, 3, 192, 384, 1},
     {25, 384, 1728},
     {128, 128},
     Dataflow::ws,
     17093,
     5.923477446908091,
     96.42857142857143,
     4.5144462279293744},
};

void check_golden_row(const GoldenRow& row, const CycleReport& r) {
  CHECK(r.scalesim_total_cycles == row.total_cycles);
  CHECK(r.cycles == row.total_cycles + 1);
  CHECK(std::abs(r.overall_util_pct - row.overall_pct) <= 1e-9);
  CHECK(std::abs(r.mapping_efficiency_pct - row.mapping_pct) <= 1e-9);
  CHECK(std::abs(r.compute_util_pct - row.compute_pct) <= 1e-9);
  CHECK(std::abs(r.padding_tax_pct - (100.0 - row.mapping_pct)) <= 1e-9);
}

GemmShape random_gemm(std::mt19937_64& rng, int64_t max) {
  std::uniform_int_distribution<int64_t> d(1, max);
  return {d(rng), d(rng), d(rng)};
}

} // namespace

TEST_CASE("kernels::model_gemm reproduces every published SCALE-Sim v2 result") {
  for (const auto& row : k_golden) {
    CAPTURE(row.name);
    auto r = model_gemm(row.gemm, row.array, row.dataflow);
    REQUIRE(r);
    check_golden_row(row, *r);
  }
}

TEST_CASE("kernels::conv_to_gemm maps the golden conv layers as SCALE-Sim does") {
  for (const auto& row : k_golden) {
    if (!row.conv) {
      continue;
    }
    CAPTURE(row.name);
    auto g = conv_to_gemm(*row.conv);
    REQUIRE(g);
    CHECK(g->m == row.gemm.m);
    CHECK(g->n == row.gemm.n);
    CHECK(g->k == row.gemm.k);
    auto r = model_gemm(*g, row.array, row.dataflow);
    REQUIRE(r);
    check_golden_row(row, *r);
  }
}

TEST_CASE("kernels::model_gemm works the AlexNet conv1 example of kernels.md by parts") {
  auto r = model_gemm({3025, 96, 363}, {32, 32}, Dataflow::ws);
  REQUIRE(r);
  CHECK(r->sr == 363); // K on the rows
  CHECK(r->sc == 96);  // N on the columns
  CHECK(r->t == 3025); // M streamed
  CHECK(r->row_folds == 12);
  CHECK(r->col_folds == 3);
  CHECK(r->folds == 36);
  CHECK(r->cycles == 36 * 3119);
  CHECK(r->breakdown.preload == 36 * 32);
  CHECK(r->breakdown.skew == 36 * 31);
  CHECK(r->breakdown.stream == 36 * 3025);
  CHECK(r->breakdown.drain == 36 * 31);
  CHECK(r->mapping_efficiency_pct == 94.53125);
  CHECK(r->padding_tax_pct == 5.46875);
  CHECK(r->wasted_pe_cycles == int64_t{1024} * 112284 - int64_t{3025} * 96 * 363);
}

TEST_CASE("kernels::model_gemm maps each dataflow's operands as SCALE-Sim does") {
  // M=5, N=7, K=3 on a 2x4 array, worked by hand.
  SUBCASE("os: M on rows, N on columns, K streamed; R + C + T - 2 per fold") {
    auto r = model_gemm({5, 7, 3}, {2, 4}, Dataflow::os);
    REQUIRE(r);
    CHECK(r->folds == 3 * 2);
    CHECK(r->cycles == 6 * (2 + 4 + 3 - 2));
    CHECK(r->mapping_efficiency_pct == doctest::Approx(100.0 * 35 / 48));
    // U = R + C + T - 2 = 7
    CHECK(r->compute_util_pct == doctest::Approx(100.0 * 35 * 3 / (48.0 * 7)));
    CHECK(r->breakdown.preload == 0);
  }
  SUBCASE("ws: K on rows, N on columns, M streamed; 2R + C + T - 2 per fold") {
    auto r = model_gemm({5, 7, 3}, {2, 4}, Dataflow::ws);
    REQUIRE(r);
    CHECK(r->folds == 2 * 2);
    CHECK(r->cycles == 4 * (4 + 4 + 5 - 2));
    CHECK(r->scalesim_total_cycles == 43);
    // U = 2R + 2C + T - 3 = 14, SCALE-Sim's quirk
    CHECK(r->compute_util_pct == doctest::Approx(100.0 * 21 * 5 / (32.0 * 14)));
    CHECK(r->overall_util_pct == doctest::Approx(100.0 * 105 / (43.0 * 8)));
  }
  SUBCASE("is: K on rows, M on columns, N streamed") {
    auto r = model_gemm({5, 7, 3}, {2, 4}, Dataflow::is);
    REQUIRE(r);
    CHECK(r->folds == 2 * 2);
    CHECK(r->cycles == 4 * (4 + 4 + 7 - 2));
    CHECK(r->mapping_efficiency_pct == 100.0 * 15 / 32);
  }
}

TEST_CASE("kernels::model_gemm tpu mode hides the next tile's preload behind streaming") {
  SUBCASE("T >= R: only the first preload is paid, skew and drain once") {
    // 4x4 array, ws, M=10 (T), K=8 (two row folds), N=4. Cycles 0-3 load tile 0; fold 0
    // streams 4-13 while tile 1 loads (4-7); fold 1 streams 14-23; its last vector enters row
    // 3 at 26 and leaves column 3 at 29: 30 cycles. SCALE-Sim: 2 x (8 + 4 + 10 - 2) = 40.
    auto tpu = model_gemm({10, 4, 8}, {4, 4}, Dataflow::ws, CycleMode::tpu);
    REQUIRE(tpu);
    CHECK(tpu->cycles == 30);
    CHECK(tpu->scalesim_total_cycles == 39);
    CHECK(tpu->breakdown.preload == 4);
    CHECK(tpu->wasted_pe_cycles == 16 * 30 - 10 * 4 * 8);
    CHECK(tpu->overall_util_pct == doctest::Approx(100.0 * 320 / (30.0 * 16)));
  }
  SUBCASE("T < R: each later tile exposes R - T cycles") {
    // 4x4 array, ws, M=2 (T), K=12 (three row folds), N=4. Tile 0 loads 0-3, fold 0 streams
    // 4-5; tile 1 loads 4-7, fold 1 streams 8-9; tile 2 loads 8-11, fold 2 streams 12-13;
    // the last vector leaves column 3 at 13 + 3 + 3 = 19: 20 cycles (SCALE-Sim: 3 x 12 = 36).
    auto tpu = model_gemm({2, 4, 12}, {4, 4}, Dataflow::ws, CycleMode::tpu);
    REQUIRE(tpu);
    CHECK(tpu->cycles == 20);
    CHECK(tpu->breakdown.preload == 4 + 2 * 2);
    auto scalesim = model_gemm({2, 4, 12}, {4, 4}, Dataflow::ws);
    REQUIRE(scalesim);
    CHECK(scalesim->cycles == 36);
  }
  SUBCASE("the os dataflow has no tpu mode") {
    auto r = model_gemm({4, 4, 4}, {4, 4}, Dataflow::os, CycleMode::tpu);
    REQUIRE(!r);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    CHECK(r.error().message.find("--mode: 'tpu'") == 0);
  }
}

TEST_CASE("kernels::model_gemm properties hold on random shapes") {
  std::mt19937_64 rng(20260101);
  std::uniform_int_distribution<int64_t> dim(1, 40);
  for (int i = 0; i < 300; ++i) {
    GemmShape g = random_gemm(rng, 300);
    ArrayShape a{dim(rng), dim(rng)};
    CAPTURE(g.m);
    CAPTURE(g.n);
    CAPTURE(g.k);
    CAPTURE(a.rows);
    CAPTURE(a.cols);
    for (Dataflow d : {Dataflow::ws, Dataflow::is}) {
      auto s = model_gemm(g, a, d);
      auto t = model_gemm(g, a, d, CycleMode::tpu);
      REQUIRE(s);
      REQUIRE(t);
      // Double buffering never costs cycles, and saves them exactly when there are two folds.
      CHECK(t->cycles <= s->cycles);
      CHECK((t->cycles == s->cycles) == (s->folds == 1));
      CHECK(t->scalesim_total_cycles == s->scalesim_total_cycles);
      CHECK(t->mapping_efficiency_pct == s->mapping_efficiency_pct);
      // No fold runs faster than streaming its vectors.
      CHECK(t->cycles >= t->folds * t->t);
    }
    auto os = model_gemm(g, a, Dataflow::os);
    REQUIRE(os);
    // Output stationary never preloads: with M = K it folds like ws and takes R fewer cycles
    // per fold.
    GemmShape square{g.m, g.n, g.m};
    auto os_sq = model_gemm(square, a, Dataflow::os);
    auto ws_sq = model_gemm(square, a, Dataflow::ws);
    REQUIRE(os_sq);
    REQUIRE(ws_sq);
    CHECK(ws_sq->cycles - os_sq->cycles == os_sq->folds * a.rows);
    // Padding is the only mapping loss: sizes that are multiples of the array map at 100%.
    auto exact = model_gemm({a.rows * 3, a.cols * 2, a.rows}, a, Dataflow::os);
    REQUIRE(exact);
    CHECK(exact->mapping_efficiency_pct == 100.0);
    CHECK(exact->padding_tax_pct == 0.0);
  }
}

TEST_CASE("kernels::model_gemm rejects bad sizes, listing every problem") {
  SUBCASE("zero and negative sizes and an empty array") {
    auto r = model_gemm({0, -3, 5}, {0, 8}, Dataflow::ws);
    REQUIRE(!r);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    auto all = r.error().all_messages();
    REQUIRE(all.size() == 3);
    CHECK(all[0] == "--m: '0' is not a valid size: M, N and K must be at least 1");
    CHECK(all[1] == "--n: '-3' is not a valid size: M, N and K must be at least 1");
    CHECK(all[2].find("--array: '0x8' has no PEs") == 0);
  }
  SUBCASE("a product too large to count in 64 bits") {
    int64_t big = int64_t{1} << 40;
    auto r = model_gemm({big, big, big}, {128, 128}, Dataflow::ws);
    REQUIRE(!r);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
    CHECK(r.error().message.find("more than 2^63 PE-cycles") != std::string::npos);
  }
  SUBCASE("large but countable sizes work") {
    auto r = model_gemm({1 << 20, 1 << 20, 1 << 20}, {256, 256}, Dataflow::ws);
    REQUIRE(r);
    CHECK(r->folds == 4096 * 4096);
    CHECK(r->mapping_efficiency_pct == 100.0);
  }
}

TEST_CASE("kernels::conv_to_gemm uses ceil for the output size and validates the layer") {
  SUBCASE("AlexNet conv1: (224 - 11 + 4) / 4 rounds up to 55, not down to 54") {
    auto g = conv_to_gemm({224, 224, 11, 11, 3, 96, 4});
    REQUIRE(g);
    CHECK(g->m == 55 * 55);
    CHECK(g->k == 11 * 11 * 3);
    CHECK(g->n == 96);
  }
  SUBCASE("a filter as large as the input gives one output pixel") {
    auto g = conv_to_gemm({5, 7, 5, 7, 2, 3, 2});
    REQUIRE(g);
    CHECK(g->m == 1);
    CHECK(g->k == 70);
  }
  SUBCASE("a filter larger than the input and a zero stride are both reported") {
    auto g = conv_to_gemm({5, 5, 6, 3, 1, 1, 0});
    REQUIRE(!g);
    auto all = g.error().all_messages();
    REQUIRE(all.size() == 2);
    CHECK(all[0] == "--conv: stride '0' must be at least 1");
    CHECK(all[1] == "--conv: filter height '6' is larger than the input height '5': the filter "
                    "must fit in the input");
  }
}

TEST_CASE("kernels::parse_array_shape accepts RxC and names the value otherwise") {
  auto ok = parse_array_shape("128x64");
  REQUIRE(ok);
  CHECK(ok->rows == 128);
  CHECK(ok->cols == 64);
  auto upper = parse_array_shape("1X8");
  REQUIRE(upper);
  CHECK(upper->cols == 8);
  for (const char* bad : {"32x", "x32", "32", "axb", "3x4x5", "", "8x-1"}) {
    CAPTURE(bad);
    auto r = parse_array_shape(bad);
    REQUIRE(!r);
    CHECK(r.error().kind == tpuctl::ErrorKind::usage);
  }
  CHECK(parse_array_shape("32x").error().message == "--array: '32x' is not RxC (e.g. 128x128)");
  CHECK(parse_array_shape("0x4").error().message.find("--array: '0x4' has no PEs") == 0);
}

TEST_CASE("kernels::parse_conv_layer reads IH,IW,FH,FW,C,F,STRIDE and lists every problem") {
  auto ok = parse_conv_layer("224, 224, 11, 11, 3, 96, 4");
  REQUIRE(ok);
  CHECK(ok->ifmap_h == 224);
  CHECK(ok->filters == 96);
  CHECK(ok->stride == 4);
  auto count = parse_conv_layer("224,224,11");
  REQUIRE(!count);
  CHECK(count.error().message.find("has 3 values but needs 7") != std::string::npos);
  auto several = parse_conv_layer("abc,224,11,11,0,96,4");
  REQUIRE(!several);
  auto all = several.error().all_messages();
  REQUIRE(all.size() == 2);
  CHECK(all[0] == "--conv: input height: 'abc' is not a whole number");
  CHECK(all[1] == "--conv: channels '0' must be at least 1");
}

TEST_CASE("kernels::parse_dataflow and parse_cycle_mode name the choices") {
  CHECK(*parse_dataflow("os") == Dataflow::os);
  CHECK(*parse_dataflow("ws") == Dataflow::ws);
  CHECK(*parse_dataflow("is") == Dataflow::is);
  CHECK(parse_dataflow("WS").error().message ==
        "--dataflow: 'WS' is not a dataflow (use ws, os or is)");
  CHECK(*parse_cycle_mode("tpu") == CycleMode::tpu);
  CHECK(*parse_cycle_mode("scalesim") == CycleMode::scalesim);
  CHECK(parse_cycle_mode("rtl").error().message ==
        "--mode: 'rtl' is not a mode (use scalesim or tpu)");
}

TEST_SUITE_END();
