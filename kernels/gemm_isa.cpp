// Which kernel family runs a GEMM: the families this host has (cpu_features.hpp), the paths
// each dtype has, and the cap GemmOptions::isa puts on the choice.
#include <string>
#include <vector>

#include "kernels/cpu_features.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_kernels.hpp"

namespace tpuctl::kernels {

namespace {

constexpr GemmIsa k_all[] = {GemmIsa::portable,    GemmIsa::avx2,        GemmIsa::avx512,
                             GemmIsa::avx512_bf16, GemmIsa::avx512_vnni, GemmIsa::amx};

// The families with a kernel for each dtype, best first.
constexpr GemmIsa k_f32_paths[] = {GemmIsa::avx512, GemmIsa::avx2, GemmIsa::portable};
constexpr GemmIsa k_bf16_paths[] = {GemmIsa::amx, GemmIsa::avx512_bf16, GemmIsa::avx512,
                                    GemmIsa::avx2, GemmIsa::portable};
constexpr GemmIsa k_s8_paths[] = {GemmIsa::amx, GemmIsa::avx512_vnni, GemmIsa::avx2,
                                  GemmIsa::portable};

bool host_has(GemmIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
  case GemmIsa::auto_select:
  case GemmIsa::portable:
    return true;
  case GemmIsa::avx2:
    return f.avx2_fma && detail::avx2_micro_kernels() != nullptr;
  case GemmIsa::avx512:
    return f.avx512;
  case GemmIsa::avx512_bf16:
    return f.avx512_bf16;
  case GemmIsa::avx512_vnni:
    return f.avx512_vnni;
  case GemmIsa::amx:
    return f.amx;
  }
  return false;
}

// Whether family `cap` includes family `isa` (gemm.hpp: the siblings avx512-bf16 and
// avx512-vnni include avx512 but not each other; amx includes all).
bool includes(GemmIsa cap, GemmIsa isa) {
  if (cap == GemmIsa::auto_select || cap == GemmIsa::amx || cap == isa) {
    return true;
  }
  if (isa == GemmIsa::amx || isa == GemmIsa::avx512_bf16 || isa == GemmIsa::avx512_vnni) {
    return false;
  }
  return static_cast<int>(isa) <= static_cast<int>(cap);
}

std::string host_list() {
  std::string out;
  for (GemmIsa isa : host_isas()) {
    out += (out.empty() ? "" : ", ") + std::string(to_string(isa));
  }
  return out;
}

} // namespace

const char* to_string(GemmIsa isa) {
  switch (isa) {
  case GemmIsa::auto_select:
    return "auto";
  case GemmIsa::portable:
    return "portable";
  case GemmIsa::avx2:
    return "avx2";
  case GemmIsa::avx512:
    return "avx512";
  case GemmIsa::avx512_bf16:
    return "avx512-bf16";
  case GemmIsa::avx512_vnni:
    return "avx512-vnni";
  case GemmIsa::amx:
    return "amx";
  }
  return "?";
}

Expected<GemmIsa> parse_gemm_isa(const std::string& text) {
  if (text == "auto") {
    return GemmIsa::auto_select;
  }
  for (GemmIsa isa : k_all) {
    if (text == to_string(isa)) {
      return isa;
    }
  }
  return usage_error("isa '" + text +
                     "' is not a kernel family (use auto, portable, avx2, avx512, avx512-bf16, "
                     "avx512-vnni or amx)");
}

std::vector<GemmIsa> host_isas() {
  std::vector<GemmIsa> out;
  for (GemmIsa isa : k_all) {
    if (host_has(isa)) {
      out.push_back(isa);
    }
  }
  return out;
}

Expected<GemmIsa> selected_isa(GemmDtype dtype, const GemmOptions& options) {
  if (!host_has(options.isa)) {
    std::string why;
    if (options.isa == GemmIsa::amx && !amx_status().reason.empty()) {
      why = "; no amx: " + amx_status().reason;
    }
    return usage_error("isa '" + std::string(to_string(options.isa)) +
                       "' is not available on this host: it has " + host_list() + why);
  }
  auto pick = [&](const auto& paths) {
    for (GemmIsa isa : paths) {
      if (host_has(isa) && includes(options.isa, isa)) {
        return isa;
      }
    }
    return GemmIsa::portable;
  };
  switch (dtype) {
  case GemmDtype::fp32:
    return pick(k_f32_paths);
  case GemmDtype::bf16:
    return pick(k_bf16_paths);
  case GemmDtype::int8:
    return pick(k_s8_paths);
  }
  return GemmIsa::portable;
}

Subnormals bf16_subnormals(GemmIsa isa) {
  return isa == GemmIsa::avx512_bf16 || isa == GemmIsa::amx ? Subnormals::flushed
                                                            : Subnormals::kept;
}

} // namespace tpuctl::kernels
