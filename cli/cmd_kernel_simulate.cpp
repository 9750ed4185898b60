// tpuctl kernel simulate: the MXU cycle model (kernels/systolic_model.hpp) for one GEMM or one
// convolution layer: folds, cycles, utilizations and padding tax, as SCALE-Sim v2 reports them.
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "kernels/systolic_model.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

struct SimulateOptions {
  // Kept as text so that every bad value is reported in tpuctl's words, all at once.
  std::string m, n, k;
  std::string array = "128x128";
  std::string dataflow = "ws";
  std::string mode = "scalesim";
  std::string conv;
  CLI::Option* m_opt = nullptr;
  CLI::Option* n_opt = nullptr;
  CLI::Option* k_opt = nullptr;
  CLI::Option* conv_opt = nullptr;
};

struct Request {
  kernels::GemmShape gemm{1, 1, 1};
  kernels::ArrayShape array{1, 1};
  kernels::Dataflow dataflow = kernels::Dataflow::ws;
  kernels::CycleMode mode = kernels::CycleMode::scalesim;
  bool from_conv = false;
  kernels::ConvLayer conv;
};

// Collects every problem of the command line; unparsable values get harmless placeholders so
// the remaining checks still run.
Expected<Request> parse_request(const SimulateOptions& o) {
  ErrorList problems;
  Request req;
  const bool any_size = o.m_opt->count() + o.n_opt->count() + o.k_opt->count() > 0;
  if (o.conv_opt->count() > 0) {
    req.from_conv = true;
    if (any_size) {
      problems.add(usage_error("--conv '" + o.conv +
                               "' sets M, N and K itself: give either --conv or --m/--n/--k, "
                               "not both"));
    }
    auto conv = kernels::parse_conv_layer(o.conv);
    if (!conv) {
      problems.add(conv.error());
    } else if (auto gemm = kernels::conv_to_gemm(*conv); !gemm) {
      problems.add(gemm.error());
    } else {
      req.conv = *conv;
      req.gemm = *gemm;
    }
  } else {
    const struct {
      const char* flag;
      const CLI::Option* opt;
      const std::string& text;
      int64_t kernels::GemmShape::*member;
      const char* meaning;
    } sizes[] = {{"--m", o.m_opt, o.m, &kernels::GemmShape::m, "the rows of A and C"},
                 {"--n", o.n_opt, o.n, &kernels::GemmShape::n, "the columns of B and C"},
                 {"--k", o.k_opt, o.k, &kernels::GemmShape::k, "the reduction dimension"}};
    for (const auto& s : sizes) {
      if (s.opt->count() == 0) {
        problems.add(usage_error(std::string(s.flag) + " is missing: give " + s.meaning +
                                 " (or describe a convolution layer with --conv)"));
        continue;
      }
      auto v = util::parse_int(util::trim(s.text), s.flag);
      if (!v) {
        problems.add(v.error());
      } else {
        req.gemm.*s.member = *v;
      }
    }
  }
  if (auto array = kernels::parse_array_shape(o.array); !array) {
    problems.add(array.error());
  } else {
    req.array = *array;
  }
  if (auto dataflow = kernels::parse_dataflow(o.dataflow); !dataflow) {
    problems.add(dataflow.error());
  } else {
    req.dataflow = *dataflow;
  }
  if (auto mode = kernels::parse_cycle_mode(o.mode); !mode) {
    problems.add(mode.error());
  } else {
    req.mode = *mode;
  }
  if (auto model = kernels::model_gemm(req.gemm, req.array, req.dataflow, req.mode); !model) {
    problems.add(model.error());
  }
  if (!problems.empty()) {
    return problems.combined();
  }
  return req;
}

std::string array_text(const kernels::ArrayShape& a) {
  return std::to_string(a.rows) + "x" + std::to_string(a.cols);
}

// A percentage with up to 6 decimals, trailing zeros dropped: 94.53125, 90.780010, 100.
std::string pct(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') {
    s.pop_back();
  }
  if (!s.empty() && s.back() == '.') {
    s.pop_back();
  }
  return s + "%";
}

Json report_json(const kernels::CycleReport& r) {
  return Json{{"m", r.gemm.m},
              {"n", r.gemm.n},
              {"k", r.gemm.k},
              {"array", array_text(r.array)},
              {"dataflow", std::string(kernels::to_string(r.dataflow))},
              {"mode", std::string(kernels::to_string(r.mode))},
              {"folds", r.folds},
              {"cycles", r.cycles},
              {"scalesim_total_cycles", r.scalesim_total_cycles},
              {"mapping_efficiency_pct", r.mapping_efficiency_pct},
              {"compute_util_pct", r.compute_util_pct},
              {"overall_util_pct", r.overall_util_pct},
              {"padding_tax_pct", r.padding_tax_pct},
              {"wasted_pe_cycles", r.wasted_pe_cycles}};
}

// Which GEMM dimension plays Sr, Sc and T under this dataflow.
const char* const* mapping_names(kernels::Dataflow d) {
  static const char* const os[] = {"M", "N", "K"};
  static const char* const ws[] = {"K", "N", "M"};
  static const char* const is[] = {"K", "M", "N"};
  return d == kernels::Dataflow::os ? os : d == kernels::Dataflow::ws ? ws : is;
}

std::string where_cycles_went(const kernels::CycleReport& r) {
  const auto& b = r.breakdown;
  std::ostringstream os;
  os << "preload " << b.preload << " + skew " << b.skew << " + stream " << b.stream << " + drain "
     << b.drain << " = " << r.cycles;
  if (r.mode == kernels::CycleMode::tpu) {
    os << " (first tile's preload, " << (r.folds - 1)
       << (r.t >= r.array.rows ? " later preloads hidden behind streaming"
                               : " later preloads each exposing R - T cycles")
       << ", skew and drain paid once)";
  } else if (r.dataflow == kernels::Dataflow::os) {
    os << " (" << r.folds << " folds of " << r.cycles / r.folds
       << " cycles; results read in place)";
  } else {
    os << " (" << r.folds << " folds of " << r.cycles / r.folds << " cycles, no overlap)";
  }
  return os.str();
}

void print_table(std::ostream& os, const Request& req, const kernels::CycleReport& r) {
  const char* const* names = mapping_names(r.dataflow);
  std::vector<std::vector<std::string>> rows;
  if (req.from_conv) {
    const auto& c = req.conv;
    rows.push_back({"layer", "conv " + std::to_string(c.ifmap_h) + "x" + std::to_string(c.ifmap_w) +
                                 "x" + std::to_string(c.channels) + ", " +
                                 std::to_string(c.filters) + " filters " +
                                 std::to_string(c.filter_h) + "x" + std::to_string(c.filter_w) +
                                 ", stride " + std::to_string(c.stride)});
  }
  rows.push_back({"gemm", std::to_string(r.gemm.m) + " x " + std::to_string(r.gemm.n) + " x " +
                              std::to_string(r.gemm.k) + " (M x N x K)"});
  rows.push_back({"array", array_text(r.array) + ", " +
                               std::string(kernels::to_string(r.dataflow)) + " dataflow, " +
                               std::string(kernels::to_string(r.mode)) + " mode"});
  rows.push_back({"mapping", std::string(names[0]) + "=" + std::to_string(r.sr) + " on rows, " +
                                 names[1] + "=" + std::to_string(r.sc) + " on columns, " +
                                 names[2] + "=" + std::to_string(r.t) + " streamed"});
  rows.push_back({"folds", std::to_string(r.folds) + " (" + std::to_string(r.row_folds) +
                               " row x " + std::to_string(r.col_folds) + " column)"});
  rows.push_back({"cycles", std::to_string(r.cycles) + " (SCALE-Sim v2 reports " +
                                std::to_string(r.scalesim_total_cycles) + ")"});
  rows.push_back({"mapping efficiency", pct(r.mapping_efficiency_pct)});
  rows.push_back({"compute utilization", pct(r.compute_util_pct) + " (SCALE-Sim's definition)"});
  rows.push_back({"overall utilization", pct(r.overall_util_pct) + " (MACs / PE-cycles)"});
  rows.push_back({"padding tax", pct(r.padding_tax_pct)});
  rows.push_back({"wasted PE-cycles", std::to_string(r.wasted_pe_cycles)});
  rows.push_back({"where cycles went", where_cycles_went(r)});
  size_t width = 0;
  for (const auto& row : rows) {
    width = std::max(width, row[0].size());
  }
  for (const auto& row : rows) {
    os << row[0] << ":" << std::string(width - row[0].size() + 1, ' ') << row[1] << "\n";
  }
}

} // namespace

void setup_kernel_simulate(CLI::App& group, Registry& registry) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = registry.add(
      group, "simulate",
      "MXU cycle model of a GEMM or conv layer on an R x C systolic array (SCALE-Sim v2 exact)",
      [o](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(Request req, parse_request(*o));
        TPUCTL_TRY_ASSIGN(kernels::CycleReport r,
                          kernels::model_gemm(req.gemm, req.array, req.dataflow, req.mode));
        TPUCTL_TRY(emit(ctx, report_json(r),
                        [&](std::ostream& os, const Json&) { print_table(os, req, r); }));
        return 0;
      });
  o->m_opt = cmd->add_option("--m", o->m, "rows of A and C")->type_name("M");
  o->n_opt = cmd->add_option("--n", o->n, "columns of B and C")->type_name("N");
  o->k_opt = cmd->add_option("--k", o->k, "the reduction dimension")->type_name("K");
  cmd->add_option("--array", o->array, "systolic array rows x columns (default 128x128)")
      ->type_name("RxC");
  cmd->add_option("--dataflow", o->dataflow,
                  "what stays in the PEs: ws (weights; default), os or is")
      ->type_name("DF");
  cmd->add_option("--mode", o->mode, "scalesim (default) or tpu (see below)")->type_name("MODE");
  o->conv_opt = cmd->add_option("--conv", o->conv, "a conv layer instead of --m/--n/--k")
                    ->type_name("IH,IW,FH,FW,C,F,STRIDE");
  cmd->footer(
      "Dataflows: ws keeps B (weights) in the PEs, as the TPU MXU does; os accumulates C in\n"
      "place; is keeps A (inputs). --conv maps a layer as SCALE-Sim does: M = OH*OW, N = F,\n"
      "K = FH*FW*C, with OH = ceil((IH - FH + STRIDE) / STRIDE).\n"
      "Modes: scalesim reproduces SCALE-Sim v2 (every fold preloads, skews, streams and drains\n"
      "alone; its printed total is cycles - 1). tpu models TPU v1's double-buffered tiles (ws,\n"
      "is): the next tile loads while the current one streams, hidden when the streamed\n"
      "dimension is at least R, and folds follow each other through the array.\n"
      "Example: tpuctl kernel simulate --m 3025 --n 96 --k 363 --array 32x32\n");
}

} // namespace tpuctl::cli
