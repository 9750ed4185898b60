// The MXU cycle model: how many cycles an R x C systolic array takes for an M x K by K x N
// product, and how well it uses its PEs, exactly as SCALE-Sim v2 reports them (plus a TPU v1
// double-buffered mode). Closed form, O(1) per GEMM. The essay is in systolic_model.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace tpuctl::kernels {

// Which operand stays in the PEs: the outputs (os), the weights B (ws, the TPU MXU) or the
// inputs A (is).
enum class Dataflow { os, ws, is };

// scalesim: SCALE-Sim v2's timing (every fold preloads, skews, streams and drains alone).
// tpu: TPU v1's double-buffered stationary tile (the next fold's R-cycle preload hides behind
// the current fold's streaming, and folds follow each other through the array as a wavefront).
enum class CycleMode { scalesim, tpu };

struct ArrayShape {
  int64_t rows = 128; // R
  int64_t cols = 128; // C
};

// C[m x n] = A[m x k] * B[k x n].
struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

// A convolution layer as SCALE-Sim's topology CSV describes it.
struct ConvLayer {
  int64_t ifmap_h = 0;
  int64_t ifmap_w = 0;
  int64_t filter_h = 0;
  int64_t filter_w = 0;
  int64_t channels = 0;
  int64_t filters = 0;
  int64_t stride = 1;
};

// Where a run's cycles went; the four parts add up to `cycles`.
struct CycleBreakdown {
  int64_t preload = 0; // cycles spent shifting stationary tiles in while nothing else moves
  int64_t skew = 0;    // pipeline fill: the wavefront crossing the array before results appear
  int64_t stream = 0;  // cycles injecting the streamed operand (T per fold)
  int64_t drain = 0;   // the last partial sums leaving through the remaining columns
};

struct CycleReport {
  GemmShape gemm;
  ArrayShape array;
  Dataflow dataflow = Dataflow::ws;
  CycleMode mode = CycleMode::scalesim;
  // The spatio-temporal mapping: Sr operand rows on the array rows, Sc on its columns, T in time.
  int64_t sr = 0, sc = 0, t = 0;
  int64_t row_folds = 0, col_folds = 0, folds = 0;
  int64_t cycles = 0;                // a count, from the first preload/injection to the last result
  int64_t scalesim_total_cycles = 0; // what SCALE-Sim v2 prints for this GEMM: its cycles - 1
  double mapping_efficiency_pct = 0; // 100 * Sr*Sc / (folds*R*C)
  double compute_util_pct = 0;       // SCALE-Sim v2's definition (see systolic_model.cpp)
  double overall_util_pct = 0;       // 100 * M*N*K / (total * R*C)
  double padding_tax_pct = 0;        // 100 - mapping_efficiency_pct
  int64_t wasted_pe_cycles = 0;      // R*C*cycles - M*N*K
  CycleBreakdown breakdown;
};

std::string_view to_string(Dataflow dataflow);
std::string_view to_string(CycleMode mode);

// "ws" / "os" / "is". Fails (usage) naming the value and the choices.
Expected<Dataflow> parse_dataflow(std::string_view text);
// "scalesim" / "tpu". Fails (usage) naming the value and the choices.
Expected<CycleMode> parse_cycle_mode(std::string_view text);
// "RxC", e.g. "128x128" or "1x8". Fails (usage) when it is not two whole numbers >= 1.
Expected<ArrayShape> parse_array_shape(std::string_view text);
// "IH,IW,FH,FW,C,F,STRIDE", e.g. "224,224,11,11,3,96,4". Fails (usage) listing every problem:
// wrong count, non-numbers, values < 1, a filter larger than the input.
Expected<ConvLayer> parse_conv_layer(std::string_view text);

// The GEMM SCALE-Sim runs for a convolution: M = OH*OW, K = FH*FW*C, N = F, with
// OH = ceil((IH - FH + S) / S) (ceil, as SCALE-Sim does: AlexNet conv1 224/11/4 gives 55).
// Fails (usage) on the same problems as parse_conv_layer, or when M or K overflows.
Expected<GemmShape> conv_to_gemm(const ConvLayer& conv);

// The cycle report of one GEMM. Fails (usage) when a size or array dimension is below 1, when
// --mode tpu is asked of the os dataflow (nothing stationary to double-buffer), or when a count
// would not fit in 64 bits.
Expected<CycleReport> model_gemm(const GemmShape& gemm, const ArrayShape& array,
                                 Dataflow dataflow = Dataflow::ws,
                                 CycleMode mode = CycleMode::scalesim);

} // namespace tpuctl::kernels
