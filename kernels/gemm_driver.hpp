// Internal to kernels/gemm*.cpp: the driver entry points behind the public API of gemm.hpp.
// Arguments are already validated; `threads` is resolved (>= 1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemm.hpp"
#include "kernels/gemm_kernels.hpp"
#include "kernels/gemm_wide.hpp"

namespace tpuctl::kernels::detail {

// 64-byte aligned storage for std::free; throws std::bad_alloc when the memory is not there.
void* allocate_aligned(size_t bytes);

// Bytes of the packed copy of a k x n B of `dtype` (the layout run_* reads from `packed`).
size_t packed_b_bytes(GemmDtype dtype, int k, int n);

// Packs all of B into `dst` (packed_b_bytes long).
void pack_b_full_f32(const MicroKernels& mk, int threads, int k, int n, const float* b, long ldb,
                     float* dst);
void pack_b_full_bf16(const MicroKernels& mk, int threads, int k, int n, const bf16_t* b, long ldb,
                      float* dst);
void pack_b_full_s8(const MicroKernels& mk, int threads, int k, int n, const int8_t* b, long ldb,
                    int16_t* dst);

// C = A B with B either unpacked (b, ldb; packed == nullptr) or packed by pack_b_full_*.
void run_f32(const MicroKernels& mk, int threads, int m, int n, int k, const float* a, long lda,
             const float* b, long ldb, const float* packed, float* c, long ldc);
void run_bf16(const MicroKernels& mk, int threads, int m, int n, int k, const bf16_t* a, long lda,
              const bf16_t* b, long ldb, const float* packed, float* c, long ldc);
void run_s8(const MicroKernels& mk, int threads, int m, int n, int k, const int8_t* a, long lda,
            const int8_t* b, long ldb, const int16_t* packed, int32_t* c, long ldc);

// The same for a wide path G (gemm_wide.hpp), instantiated for each geometry it declares.
template <typename G>
size_t packed_b_bytes_wide(int k, int n);
template <typename G>
void pack_b_full_wide(const WideKernels<G>& mk, int threads, int k, int n,
                      const typename G::AElem* b, long ldb, typename G::PackB* dst);
template <typename G>
void run_wide(const WideKernels<G>& mk, int threads, int m, int n, int k,
              const typename G::AElem* a, long lda, const typename G::AElem* b, long ldb,
              const typename G::PackB* packed, typename G::C* c, long ldc);

} // namespace tpuctl::kernels::detail
