// The block functions behind util::Sha256 (util/sha256.hpp), exposed for its tests: each mixes
// `blocks` consecutive 64-byte blocks of `data` into the eight state words, exactly as FIPS 180-4's
// compression function does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpuctl::util::detail {

// The 64 round constants of SHA-256.
extern const uint32_t k_sha256_round[64];

// Plain C++: every host.
void sha256_blocks_portable(uint32_t state[8], const uint8_t* data, size_t blocks);

// The x86 SHA extensions (SHA-NI: sha256rnds2, sha256msg1/2), about 10x the portable speed. Call
// only when sha256_shani_available() says so.
void sha256_blocks_shani(uint32_t state[8], const uint8_t* data, size_t blocks);

// Whether this CPU has the SHA extensions (and SSE4.1, which the shuffles need): false off x86.
bool sha256_shani_available();

} // namespace tpuctl::util::detail
