// The MXU cycle model.
//
// An R x C systolic array computes C[M x N] = A[M x K] * B[K x N] by keeping one operand in the
// PEs and streaming another through them. SCALE-Sim names the mapping by what stays put:
//
//   dataflow  Sr (on the rows)  Sc (on the columns)  T (streamed, one vector per cycle)
//   os        M                 N                    K      outputs accumulate in place
//   ws        K                 N                    M      weights B stay (the TPU MXU)
//   is        K                 M                    N      inputs A stay
//
// A GEMM larger than the array is cut into folds of R x C: F = ceil(Sr/R) * ceil(Sc/C) (column
// folds outer, row folds inner). Every fold is charged the whole array, padded with zeros,
// which is where the padding tax comes from: mapping efficiency = Sr*Sc / (F*R*C).
//
// SCALE-Sim v2 (commit 22f88b1) runs the folds one after another with no overlap. For ws and is
// a fold takes 2R + C + T - 2 cycles: R to shift the stationary tile in from the top, R - 1 of
// skew (row i of the streamed vectors enters i cycles late), T of streaming, and C - 1 for the
// last partial sums to leave through the last column. For os there is nothing to preload: both
// operands enter skewed and the last MAC happens R + C + T - 2 cycles after the first; the
// results are read in place and not charged. SCALE-Sim prints the index of the last cycle, not
// a count, so its "Total Cycles" is F * per_fold - 1 (scalesim_total_cycles); tpuctl's `cycles`
// is the count. Its other figures, reproduced exactly:
//   compute util = Sr*Sc*T / (F*R*C*U), with U = R + C + T - 2 (os) but 2R + 2C + T - 3 for ws
//                  and is (U is the fold's demand-matrix height + width - 1, not its cycles)
//   overall util = M*N*K / (total * R*C), with SCALE-Sim's reported total
// These were checked against 74 runs of the real simulator and its golden AlexNet conv1 row.
//
// The tpu mode models TPU v1's double-buffered weights (Jouppi et al. 2017, section 2: "the
// weights are preloaded, and take effect with the advancing wave alongside the first data of a
// new block"). Each PE has a shadow register; fold f+1's tile shifts into the shadows (R cycles)
// while fold f streams, and fold f+1's first vector follows fold f's last one into the array, so
// skew and drain are paid once. The first fold pays its preload; a later fold starts max(T, R)
// cycles after the previous one, so its preload is hidden when T >= R and costs R - T cycles
// of bubble otherwise:
//   cycles = R + (F - 1) * max(T, R) + (R - 1) + T + (C - 1)
// With one fold this equals SCALE-Sim's count. The os dataflow keeps nothing stationary, so it
// has no tpu mode. In tpu mode scalesim_total_cycles still says what SCALE-Sim would print, for
// comparison; overall util and wasted PE-cycles use the tpu count.
#include "kernels/systolic_model.hpp"

#include <algorithm>
#include <iterator>
#include <vector>

#include "util/strings.hpp"

namespace tpuctl::kernels {

namespace {

// 64-bit arithmetic that remembers whether anything overflowed.
class Checked {
public:
  int64_t mul(int64_t a, int64_t b) {
    int64_t r = 0;
    m_overflow = __builtin_mul_overflow(a, b, &r) || m_overflow;
    return r;
  }
  int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    m_overflow = __builtin_add_overflow(a, b, &r) || m_overflow;
    return r;
  }
  int64_t sub(int64_t a, int64_t b) {
    int64_t r = 0;
    m_overflow = __builtin_sub_overflow(a, b, &r) || m_overflow;
    return r;
  }
  bool overflow() const { return m_overflow; }

private:
  bool m_overflow = false;
};

int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

std::string quoted(int64_t v) {
  return "'" + std::to_string(v) + "'";
}

std::string array_text(const ArrayShape& a) {
  return std::to_string(a.rows) + "x" + std::to_string(a.cols);
}

struct ConvField {
  const char* name;
  int64_t ConvLayer::*member;
};

const ConvField k_conv_fields[] = {
    {"input height", &ConvLayer::ifmap_h},   {"input width", &ConvLayer::ifmap_w},
    {"filter height", &ConvLayer::filter_h}, {"filter width", &ConvLayer::filter_w},
    {"channels", &ConvLayer::channels},      {"filters", &ConvLayer::filters},
    {"stride", &ConvLayer::stride},
};

// `known[i]` is false for a field that did not parse; checks that involve it are skipped.
void validate_conv(const ConvLayer& conv, ErrorList& problems, const bool* known = nullptr) {
  constexpr size_t k_ih = 0, k_iw = 1, k_fh = 2, k_fw = 3;
  auto ok = [&](size_t i) { return (!known || known[i]) && conv.*k_conv_fields[i].member >= 1; };
  for (size_t i = 0; i < std::size(k_conv_fields); ++i) {
    const auto& f = k_conv_fields[i];
    if ((!known || known[i]) && conv.*f.member < 1) {
      problems.add(usage_error(std::string("--conv: ") + f.name + " " + quoted(conv.*f.member) +
                               " must be at least 1"));
    }
  }
  if (ok(k_fh) && ok(k_ih) && conv.filter_h > conv.ifmap_h) {
    problems.add(usage_error("--conv: filter height " + quoted(conv.filter_h) +
                             " is larger than the input height " + quoted(conv.ifmap_h) +
                             ": the filter must fit in the input"));
  }
  if (ok(k_fw) && ok(k_iw) && conv.filter_w > conv.ifmap_w) {
    problems.add(usage_error("--conv: filter width " + quoted(conv.filter_w) +
                             " is larger than the input width " + quoted(conv.ifmap_w) +
                             ": the filter must fit in the input"));
  }
}

// 100 * num / den for exact integer num, den (long double keeps 64 bits of mantissa).
double percent(long double num, long double den) {
  return static_cast<double>(100.0L * num / den);
}

} // namespace

std::string_view to_string(Dataflow dataflow) {
  switch (dataflow) {
  case Dataflow::os:
    return "os";
  case Dataflow::ws:
    return "ws";
  case Dataflow::is:
    return "is";
  }
  return "ws";
}

std::string_view to_string(CycleMode mode) {
  return mode == CycleMode::tpu ? "tpu" : "scalesim";
}

Expected<Dataflow> parse_dataflow(std::string_view text) {
  for (Dataflow d : {Dataflow::ws, Dataflow::os, Dataflow::is}) {
    if (text == to_string(d)) {
      return d;
    }
  }
  return usage_error("--dataflow: '" + std::string(text) +
                     "' is not a dataflow (use ws, os or is)");
}

Expected<CycleMode> parse_cycle_mode(std::string_view text) {
  if (text == "scalesim") {
    return CycleMode::scalesim;
  }
  if (text == "tpu") {
    return CycleMode::tpu;
  }
  return usage_error("--mode: '" + std::string(text) + "' is not a mode (use scalesim or tpu)");
}

Expected<ArrayShape> parse_array_shape(std::string_view text) {
  auto bad = [&] {
    return usage_error("--array: '" + std::string(text) + "' is not RxC (e.g. 128x128)");
  };
  size_t x = text.find_first_of("xX");
  if (x == std::string_view::npos || x == 0 || x + 1 == text.size()) {
    return bad();
  }
  auto rows = util::parse_int(text.substr(0, x), "--array");
  auto cols = util::parse_int(text.substr(x + 1), "--array");
  if (!rows || !cols) {
    return bad();
  }
  if (*rows < 1 || *cols < 1) {
    return usage_error("--array: '" + std::string(text) +
                       "' has no PEs: an array needs at least 1 row and 1 column (e.g. 128x128)");
  }
  return ArrayShape{*rows, *cols};
}

Expected<ConvLayer> parse_conv_layer(std::string_view text) {
  std::vector<std::string> parts = util::split(text, ',');
  constexpr size_t k_fields = std::size(k_conv_fields);
  if (parts.size() != k_fields) {
    return usage_error("--conv: '" + std::string(text) + "' has " + std::to_string(parts.size()) +
                       " values but needs 7: IH,IW,FH,FW,C,F,STRIDE (e.g. 224,224,11,11,3,96,4)");
  }
  ConvLayer conv;
  ErrorList problems;
  bool known[k_fields] = {};
  for (size_t i = 0; i < k_fields; ++i) {
    auto v = util::parse_int(util::trim(parts[i]), std::string("--conv: ") + k_conv_fields[i].name);
    if (!v) {
      problems.add(v.error());
    } else {
      conv.*k_conv_fields[i].member = *v;
      known[i] = true;
    }
  }
  validate_conv(conv, problems, known);
  if (!problems.empty()) {
    return problems.combined();
  }
  return conv;
}

Expected<GemmShape> conv_to_gemm(const ConvLayer& conv) {
  ErrorList problems;
  validate_conv(conv, problems);
  if (!problems.empty()) {
    return problems.combined();
  }
  Checked c;
  int64_t oh = ceil_div(c.add(conv.ifmap_h - conv.filter_h, conv.stride), conv.stride);
  int64_t ow = ceil_div(c.add(conv.ifmap_w - conv.filter_w, conv.stride), conv.stride);
  GemmShape g;
  g.m = c.mul(oh, ow);
  g.k = c.mul(c.mul(conv.filter_h, conv.filter_w), conv.channels);
  g.n = conv.filters;
  if (c.overflow()) {
    return usage_error("--conv: the layer's GEMM (output pixels x filter volume) does not fit in "
                       "64 bits: use a smaller layer");
  }
  return g;
}

Expected<CycleReport> model_gemm(const GemmShape& gemm, const ArrayShape& array, Dataflow dataflow,
                                 CycleMode mode) {
  ErrorList problems;
  const std::pair<const char*, int64_t> sizes[] = {
      {"--m", gemm.m}, {"--n", gemm.n}, {"--k", gemm.k}};
  for (const auto& [flag, v] : sizes) {
    if (v < 1) {
      problems.add(usage_error(std::string(flag) + ": " + quoted(v) +
                               " is not a valid size: M, N and K must be at least 1"));
    }
  }
  if (array.rows < 1 || array.cols < 1) {
    problems.add(usage_error("--array: '" + array_text(array) +
                             "' has no PEs: an array needs at least 1 row and 1 column"));
  }
  if (mode == CycleMode::tpu && dataflow == Dataflow::os) {
    problems.add(usage_error("--mode: 'tpu' double-buffers the stationary tile, and the os "
                             "dataflow has none: use --dataflow ws or is, or --mode scalesim"));
  }
  if (!problems.empty()) {
    return problems.combined();
  }

  CycleReport r;
  r.gemm = gemm;
  r.array = array;
  r.dataflow = dataflow;
  r.mode = mode;
  const int64_t rows = array.rows, cols = array.cols;
  switch (dataflow) {
  case Dataflow::os:
    r.sr = gemm.m, r.sc = gemm.n, r.t = gemm.k;
    break;
  case Dataflow::ws:
    r.sr = gemm.k, r.sc = gemm.n, r.t = gemm.m;
    break;
  case Dataflow::is:
    r.sr = gemm.k, r.sc = gemm.m, r.t = gemm.n;
    break;
  }
  r.row_folds = ceil_div(r.sr, rows);
  r.col_folds = ceil_div(r.sc, cols);

  Checked c;
  const int64_t t = r.t;
  r.folds = c.mul(r.row_folds, r.col_folds);
  const int64_t pes = c.mul(rows, cols);
  const bool os = dataflow == Dataflow::os;
  // SCALE-Sim's per-fold cycles and the height + width - 1 of its per-fold demand matrices.
  const int64_t fill = c.add(rows, cols) - 2; // R + C - 2
  const int64_t per_fold = os ? c.add(fill, t) : c.add(c.add(fill, rows), t);
  const int64_t util_cycles = os ? per_fold : c.add(c.add(per_fold, cols), -1);
  const int64_t scalesim_cycles = c.mul(r.folds, per_fold);
  r.scalesim_total_cycles = scalesim_cycles - 1;

  if (mode == CycleMode::scalesim) {
    r.cycles = scalesim_cycles;
    r.breakdown.preload = os ? 0 : c.mul(r.folds, rows);
    r.breakdown.skew = c.mul(r.folds, os ? fill : rows - 1);
    r.breakdown.stream = c.mul(r.folds, t);
    r.breakdown.drain = os ? 0 : c.mul(r.folds, cols - 1);
  } else {
    const int64_t bubble = std::max<int64_t>(0, rows - t); // exposed preload of a later fold
    r.breakdown.preload = c.add(rows, c.mul(r.folds - 1, bubble));
    r.breakdown.skew = rows - 1;
    r.breakdown.stream = c.mul(r.folds, t);
    r.breakdown.drain = cols - 1;
    r.cycles = c.add(c.add(r.breakdown.preload, r.breakdown.skew),
                     c.add(r.breakdown.stream, r.breakdown.drain));
  }

  const int64_t macs = c.mul(c.mul(gemm.m, gemm.n), gemm.k);
  const int64_t used_pes = c.mul(r.sr, r.sc);
  const int64_t charged_pes = c.mul(r.folds, pes);
  r.wasted_pe_cycles = c.sub(c.mul(pes, r.cycles), macs);
  if (c.overflow()) {
    return usage_error("--m/--n/--k: " + std::to_string(gemm.m) + "x" + std::to_string(gemm.n) +
                       "x" + std::to_string(gemm.k) + " on a " + array_text(array) +
                       " array needs more than 2^63 PE-cycles to count: use smaller sizes");
  }

  const long double ld_used = static_cast<long double>(used_pes);
  const long double ld_charged = static_cast<long double>(charged_pes);
  r.mapping_efficiency_pct = percent(ld_used, ld_charged);
  r.padding_tax_pct = 100.0 - r.mapping_efficiency_pct;
  r.compute_util_pct = percent(ld_used * static_cast<long double>(t),
                               ld_charged * static_cast<long double>(util_cycles));
  // SCALE-Sim divides by its reported total, which is 0 only for a 1x1x1 os GEMM on a 1x1 array
  // (where it would divide by zero); the count (1 cycle) is used there.
  int64_t total = mode == CycleMode::scalesim ? r.scalesim_total_cycles : r.cycles;
  if (total == 0) {
    total = r.cycles;
  }
  r.overall_util_pct = percent(static_cast<long double>(macs),
                               static_cast<long double>(total) * static_cast<long double>(pes));
  return r;
}

} // namespace tpuctl::kernels
