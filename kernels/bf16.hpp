// bfloat16: the top 16 bits of an IEEE fp32. The TPU MXU multiplies bf16 and accumulates fp32;
// a bf16 x bf16 product is exact in fp32 (8-bit x 8-bit significands fit in 24 bits), so only
// the order of the fp32 additions makes two correct implementations differ.
#pragma once

#include <cstdint>
#include <cstring>

namespace tpuctl::kernels {

using bf16_t = uint16_t; // raw bits

// How a bf16 kernel treats subnormals: kept (IEEE, the widening paths), or flushed (DAZ on
// inputs, FTZ on each step's result: vdpbf16ps and tdpbf16ps).
enum class Subnormals { kept, flushed };

// fp32 -> bf16, round to nearest even (as the TPU and JAX convert). NaN stays NaN (quiet);
// infinities and signed zeros are kept; values that round past the largest finite bf16 become
// infinity, as IEEE rounding requires.
inline bf16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<bf16_t>((u >> 16) | 0x0040u); // quiet NaN, sign kept
  }
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_t>((u + rounding) >> 16);
}

// bf16 -> fp32 is exact: shift the bits into the top half.
inline float bf16_to_fp32(bf16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

} // namespace tpuctl::kernels
