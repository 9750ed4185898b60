// SHA-256 on the x86 SHA extensions; the only file of util/ built with -msha -msse4.1, called only
// after sha256_shani_available() checked the CPU at run time.
//
// The state lives in two registers as the instructions want it: ABEF and CDGH (A in the high
// lane). Each group of four rounds adds the round constants to four message words and runs
// sha256rnds2 twice (two rounds each, the second on the upper two words), swapping which register
// is "ABEF": after two rounds the old A, B, E, F are the new C, D, G, H. The message schedule runs
// four words at a time: W[t..t+3] = msg2(msg1(W[t-16..t-13], W[t-12..]) + W[t-7..t-4],
// W[t-4..t-1]); msg1 adds sigma0, msg2 adds sigma1 of the words it depends on.
#include "util/sha256_blocks.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

namespace tpuctl::util::detail {

void sha256_blocks_shani(uint32_t state[8], const uint8_t* data, size_t blocks) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  // state[0..3] = A B C D and state[4..7] = E F G H -> ABEF and CDGH.
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);

  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abef_before = abef;
    const __m128i cdgh_before = cdgh;
    __m128i w[4]; // the last four groups of message words: w[i % 4] is W[4i..4i+3]
    for (int i = 0; i < 16; ++i) {
      __m128i m;
      if (i < 4) {
        m = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i)),
                             byte_swap);
      } else {
        const __m128i& w16 = w[i & 3];
        const __m128i& w12 = w[(i + 1) & 3];
        const __m128i& w8 = w[(i + 2) & 3];
        const __m128i& w4 = w[(i + 3) & 3];
        m = _mm_sha256msg2_epu32(
            _mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), _mm_alignr_epi8(w4, w8, 4)), w4);
      }
      w[i & 3] = m;
      const __m128i k = _mm_add_epi32(
          m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&k_sha256_round[4 * i])));
      // Two rounds make the old ABEF the new CDGH, so the registers trade roles and trade back.
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(k, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_before);
    cdgh = _mm_add_epi32(cdgh, cdgh_before);
  }

  // ABEF and CDGH -> A B C D, E F G H.
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  dcba = _mm_blend_epi16(feba, dchg, 0xF0);
  hgfe = _mm_alignr_epi8(dchg, feba, 8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), dcba);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), hgfe);
}

bool sha256_shani_available() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_SSE4_1) == 0 || (c & bit_SSSE3) == 0) {
    return false;
  }
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    return false;
  }
  return (b & bit_SHA) != 0;
}

} // namespace tpuctl::util::detail

#else

namespace tpuctl::util::detail {

void sha256_blocks_shani(uint32_t state[8], const uint8_t* data, size_t blocks) {
  sha256_blocks_portable(state, data, blocks);
}

bool sha256_shani_available() {
  return false;
}

} // namespace tpuctl::util::detail

#endif
