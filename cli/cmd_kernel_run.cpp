// tpuctl kernel run / kernel bench: the fast CPU GEMM (kernels/gemm.hpp) on fresh random data,
// timed (one warm-up, then --reps timed runs, median reported) and compared with the peak of the
// unit it ran on, measured by a short probe (kernels/peak_probe.hpp: peak_kind_for the dtype and
// kernel family, e.g. the vpdpbusd zmm probe for int8 on avx512-vnni; cached per process).
// --isa caps the kernel family (kernels::GemmOptions::isa); one the host lacks is exit 2. With
// --check the result is verified by the shared gates of kernels/reference_gemm.hpp and a
// mismatch is exit 1.
//
// TPUCTL_DEBUG_CORRUPT_RESULT=1 (read here only, never by kernels/) corrupts one element of C
// before the check, so tests can prove that the exit-1 path works.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "kernels/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/peak_probe.hpp"
#include "kernels/reference_gemm.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

using kernels::GemmDtype;

constexpr int k_max_dim = 1 << 20;
constexpr double k_max_operand_bytes = 8.0 * (1ull << 30);
constexpr int k_max_threads = 256;
constexpr int k_max_reps = 10000;

struct Measurement {
  double seconds_median = 0;
  double gops_median = 0;
  double peak_gops = 0;
  kernels::PeakKind peak_kind = kernels::PeakKind::fp32_fma;
  bool checked = false;
  kernels::GemmCheck check;
  kernels::GemmIsa isa = kernels::GemmIsa::portable;
};

Expected<GemmDtype> parse_dtype(const std::string& text) {
  if (text == "int8") {
    return GemmDtype::int8;
  }
  if (text == "bf16") {
    return GemmDtype::bf16;
  }
  if (text == "fp32") {
    return GemmDtype::fp32;
  }
  return usage_error("--dtype: '" + text + "' is not a GEMM dtype (use int8, bf16 or fp32)");
}

void check_range(ErrorList& errors, const char* flag, long long value, long long min,
                 long long max) {
  if (value < min || value > max) {
    errors.add(ErrorKind::usage, std::string(flag) + ": '" + std::to_string(value) +
                                     "' is out of range (use " + std::to_string(min) + " to " +
                                     std::to_string(max) + ")");
  }
}

// Bytes of A, B and C for one problem (element sizes by dtype).
double operand_bytes(GemmDtype dtype, double m, double n, double k) {
  double in = dtype == GemmDtype::int8 ? 1 : (dtype == GemmDtype::bf16 ? 2 : 4);
  return (m * k + k * n) * in + m * n * 4;
}

void check_problem(ErrorList& errors, GemmDtype dtype, int m, int n, int k) {
  check_range(errors, "--m", m, 1, k_max_dim);
  check_range(errors, "--n", n, 1, k_max_dim);
  check_range(errors, "--k", k, 1, k_max_dim);
  if (errors.empty() && operand_bytes(dtype, m, n, k) > k_max_operand_bytes) {
    errors.add(ErrorKind::usage, "--m/--n/--k: " + std::to_string(m) + " x " + std::to_string(n) +
                                     " x " + std::to_string(k) +
                                     " needs more than 8 GiB of operands: use smaller sizes");
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Times `call` (one warm-up, then `reps` runs) and returns the median seconds.
template <typename Call>
Expected<double> time_median(int reps, Call call) {
  TPUCTL_TRY(call());
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    TPUCTL_TRY(call());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(seconds);
}

bool corrupt_requested() {
  const char* v = std::getenv("TPUCTL_DEBUG_CORRUPT_RESULT");
  return v && std::string(v) == "1";
}

// The family --isa names, checked against this host for `dtype`. Errors: usage (an unknown
// name, or a family the host lacks, naming the ones it has).
Expected<kernels::GemmIsa> resolve_isa(GemmDtype dtype, kernels::GemmIsa cap) {
  if (!kernels::amx_status().usable) {
    spdlog::debug("kernel: no AMX kernels here: {}", kernels::amx_status().reason);
  }
  kernels::GemmOptions options;
  options.isa = cap;
  auto isa = kernels::selected_isa(dtype, options);
  if (!isa) {
    return usage_error("--isa: " + isa.error().message);
  }
  return *isa;
}

Expected<Measurement> measure(GemmDtype dtype, int m, int n, int k, int threads, int reps,
                              bool check, kernels::GemmIsa cap) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(-128, 127);
  size_t a_size = static_cast<size_t>(m) * static_cast<size_t>(k);
  size_t b_size = static_cast<size_t>(k) * static_cast<size_t>(n);
  size_t c_size = static_cast<size_t>(m) * static_cast<size_t>(n);
  kernels::GemmOptions options;
  options.threads = threads;
  options.isa = cap;
  Measurement out;
  TPUCTL_TRY_ASSIGN(out.isa, resolve_isa(dtype, cap));
  out.peak_kind = kernels::peak_kind_for(dtype, out.isa);
  out.peak_gops = kernels::host_peak_gops(out.peak_kind, threads);
  bool corrupt = check && corrupt_requested();
  Expected<double> seconds = 0.0;
  if (dtype == GemmDtype::int8) {
    std::vector<int8_t> a(a_size), b(b_size);
    std::vector<int32_t> c(c_size);
    for (auto& x : a) {
      x = static_cast<int8_t>(byte(rng));
    }
    for (auto& x : b) {
      x = static_cast<int8_t>(byte(rng));
    }
    seconds = time_median(reps, [&] {
      return kernels::gemm_s8(m, n, k, a.data(), k, b.data(), n, c.data(), n, options);
    });
    if (seconds && check) {
      if (corrupt) {
        c[c_size / 2] += 1;
      }
      out.check = kernels::check_gemm_s8(m, n, k, a.data(), k, b.data(), n, c.data(), n);
    }
  } else if (dtype == GemmDtype::bf16) {
    std::vector<kernels::bf16_t> a(a_size), b(b_size);
    std::vector<float> c(c_size);
    for (auto& x : a) {
      x = kernels::fp32_to_bf16(real(rng));
    }
    for (auto& x : b) {
      x = kernels::fp32_to_bf16(real(rng));
    }
    seconds = time_median(reps, [&] {
      return kernels::gemm_bf16(m, n, k, a.data(), k, b.data(), n, c.data(), n, options);
    });
    if (seconds && check) {
      if (corrupt) {
        c[c_size / 2] += 1.0f;
      }
      out.check = kernels::check_gemm_bf16(m, n, k, a.data(), k, b.data(), n, c.data(), n,
                                           kernels::bf16_subnormals(out.isa));
    }
  } else {
    std::vector<float> a(a_size), b(b_size), c(c_size);
    for (auto& x : a) {
      x = real(rng);
    }
    for (auto& x : b) {
      x = real(rng);
    }
    seconds = time_median(reps, [&] {
      return kernels::gemm_f32(m, n, k, a.data(), k, b.data(), n, c.data(), n, options);
    });
    if (seconds && check) {
      if (corrupt) {
        c[c_size / 2] += 1.0f;
      }
      out.check = kernels::check_gemm_f32(m, n, k, a.data(), k, b.data(), n, c.data(), n);
    }
  }
  if (!seconds) {
    return seconds.error();
  }
  out.checked = check;
  out.seconds_median = *seconds;
  out.gops_median = 2.0 * m * n * k / std::max(*seconds, 1e-12) / 1e9;
  return out;
}

double round_to(double v, int decimals) {
  double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

Json result_json(GemmDtype dtype, int m, int n, int k, int threads, int reps,
                 const Measurement& r) {
  Json j;
  j["m"] = m;
  j["n"] = n;
  j["k"] = k;
  j["dtype"] = kernels::to_string(dtype);
  j["threads"] = threads;
  j["reps"] = reps;
  j["seconds_median"] = round_to(r.seconds_median, 9);
  j["gops_median"] = round_to(r.gops_median, 3);
  j["peak_gops"] = round_to(r.peak_gops, 3);
  j["pct_of_peak"] = round_to(r.peak_gops > 0 ? 100.0 * r.gops_median / r.peak_gops : 0, 2);
  j["checked"] = r.checked;
  j["max_abs_error"] = r.checked ? Json(r.check.max_abs_error) : Json(nullptr);
  j["isa"] = kernels::to_string(r.isa);
  j["peak_probe"] = kernels::to_string(r.peak_kind);
  // Every matrix unit this host has, with its measured peak at this thread count: what the
  // kernel could use, beside the unit it used (`isa`, `peak_probe`).
  Json units = Json::array();
  for (kernels::PeakKind kind : kernels::host_units()) {
    units.push_back(Json{{"isa", kernels::unit_isa(kind)},
                         {"probe", kernels::to_string(kind)},
                         {"peak_gops", round_to(kernels::host_peak_gops(kind, threads), 3)}});
  }
  j["units"] = std::move(units);
  // The units the CPU announces that the kernels will not use, and why (a permission the
  // kernel refused, an instruction that faulted when tried: kernels/cpu_features.hpp).
  Json refused = Json::array();
  for (const auto& [family, reason] : kernels::cpu_features().refused) {
    refused.push_back(Json{{"isa", family}, {"reason", reason}});
  }
  j["refused_units"] = std::move(refused);
  return j;
}

Error mismatch_error(GemmDtype dtype, int m, int n, const kernels::GemmCheck& c) {
  std::ostringstream os;
  os << "kernel run: the " << kernels::to_string(dtype) << " result fails the reference check in "
     << c.mismatches << " of " << static_cast<long long>(m) * n << " elements (first at row "
     << c.first_bad_row << ", column " << c.first_bad_col << "; max abs error " << c.max_abs_error
     << "): the fast GEMM is wrong on this host; please report it with this command line";
  return Error{ErrorKind::failure, os.str()};
}

struct RunFlags {
  int m = 1024, n = 1024, k = 1024; // the target square of bench/README.md

  std::string dtype = "int8";
  std::string isa = "auto";
  int threads = 1;
  int reps = 5;
  bool check = false;
};

// --isa's family, or the error (usage) added to `errors`.
kernels::GemmIsa parse_isa_flag(ErrorList& errors, const std::string& text) {
  auto isa = kernels::parse_gemm_isa(text);
  if (!isa) {
    errors.add(ErrorKind::usage, "--isa: " + isa.error().message);
    return kernels::GemmIsa::auto_select;
  }
  return *isa;
}

Expected<int> run_kernel_run(Context& ctx, const RunFlags& f) {
  ErrorList errors;
  auto dtype = parse_dtype(f.dtype);
  if (!dtype) {
    errors.add(dtype.error());
  }
  check_problem(errors, dtype.value_or(GemmDtype::int8), f.m, f.n, f.k);
  kernels::GemmIsa cap = parse_isa_flag(errors, f.isa);
  check_range(errors, "--threads", f.threads, 1, k_max_threads);
  check_range(errors, "--reps", f.reps, 1, k_max_reps);
  if (!errors.empty()) {
    return errors.combined();
  }
  TPUCTL_TRY_ASSIGN(Measurement r, measure(*dtype, f.m, f.n, f.k, f.threads, f.reps, f.check, cap));
  if (r.checked && !r.check.passed) {
    return mismatch_error(*dtype, f.m, f.n, r.check);
  }
  TPUCTL_TRY(emit(ctx, result_json(*dtype, f.m, f.n, f.k, f.threads, f.reps, r)));
  return 0;
}

struct BenchFlags {
  std::string sizes = "128,256,512,1024";
  std::string dtypes = "fp32,bf16,int8";
  std::string isa = "auto";
  int threads = 1;
  int reps = 5;
};

Expected<int> run_kernel_bench(Context& ctx, const BenchFlags& f) {
  ErrorList errors;
  std::vector<int64_t> sizes;
  if (auto parsed = util::parse_int_list(f.sizes, "--sizes", 1, 8192); parsed) {
    sizes = *parsed;
  } else {
    errors.add(parsed.error());
  }
  std::vector<GemmDtype> dtypes;
  for (const auto& name : util::split(f.dtypes, ',')) {
    auto d = parse_dtype(std::string(util::trim(name)));
    if (d) {
      dtypes.push_back(*d);
    } else {
      errors.add(d.error());
    }
  }
  kernels::GemmIsa cap = parse_isa_flag(errors, f.isa);
  check_range(errors, "--threads", f.threads, 1, k_max_threads);
  check_range(errors, "--reps", f.reps, 1, k_max_reps);
  if (!errors.empty()) {
    return errors.combined();
  }
  Json rows = Json::array();
  for (GemmDtype dtype : dtypes) {
    for (int64_t s : sizes) {
      int n = static_cast<int>(s);
      TPUCTL_TRY_ASSIGN(Measurement r, measure(dtype, n, n, n, f.threads, f.reps, false, cap));
      Json row = result_json(dtype, n, n, n, f.threads, f.reps, r);
      row.erase("checked");
      row.erase("max_abs_error");
      rows.push_back(row);
    }
  }
  TPUCTL_TRY(emit_list(ctx, rows,
                       {{"dtype", "dtype"},
                        {"m", "m"},
                        {"n", "n"},
                        {"k", "k"},
                        {"threads", "threads"},
                        {"gops_median", "gops_median"},
                        {"peak_gops", "peak_gops"},
                        {"pct_of_peak", "pct_of_peak"},
                        {"seconds_median", "seconds_median"},
                        {"isa", "isa"}}));
  return 0;
}

} // namespace

void setup_kernel_run(CLI::App& group, Registry& registry) {
  auto run_flags = std::make_shared<RunFlags>();
  CLI::App* run =
      registry.add(group, "run", "time the fast CPU GEMM on random data against this host's peak",
                   [run_flags](Context& ctx) { return run_kernel_run(ctx, *run_flags); });
  run->add_option("--m", run_flags->m, "rows of A and C (default 1024)")->type_name("M");
  run->add_option("--n", run_flags->n, "columns of B and C (default 1024)")->type_name("N");
  run->add_option("--k", run_flags->k, "columns of A, rows of B (default 1024)")->type_name("K");
  run->add_option("--dtype", run_flags->dtype,
                  "int8 (exact int32 result, default), bf16 (fp32 result) or fp32")
      ->type_name("DTYPE");
  run->add_option("--isa", run_flags->isa,
                  "kernel family: auto (default: the best this host has for the dtype), "
                  "portable, avx2, avx512, avx512-bf16, avx512-vnni or amx (a cap: the best "
                  "family it includes runs)")
      ->type_name("ISA");
  run->add_option("--threads", run_flags->threads, "threads to use (default 1)")->type_name("T");
  run->add_option("--reps", run_flags->reps, "timed runs after one warm-up (default 5)")
      ->type_name("R");
  run->add_flag("--check", run_flags->check,
                "verify the result against the reference gates; a mismatch is exit 1");

  auto bench_flags = std::make_shared<BenchFlags>();
  CLI::App* bench =
      registry.add(group, "bench", "a short sweep of square GEMMs per dtype, as a table",
                   [bench_flags](Context& ctx) { return run_kernel_bench(ctx, *bench_flags); });
  bench
      ->add_option("--sizes", bench_flags->sizes,
                   "square sizes, comma-separated (default 128,256,512,1024)")
      ->type_name("LIST");
  bench->add_option("--dtypes", bench_flags->dtypes, "dtypes to run (default fp32,bf16,int8)")
      ->type_name("LIST");
  bench
      ->add_option("--isa", bench_flags->isa,
                   "kernel family cap, as in 'kernel run' (default auto)")
      ->type_name("ISA");
  bench->add_option("--threads", bench_flags->threads, "threads to use (default 1)")
      ->type_name("T");
  bench
      ->add_option("--reps", bench_flags->reps, "timed runs per size after one warm-up (default 5)")
      ->type_name("R");
}

} // namespace tpuctl::cli
