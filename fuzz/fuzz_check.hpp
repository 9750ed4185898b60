// What the fuzz targets share: turning the input into text and checking properties. A property
// that does not hold prints what was expected and aborts, which libFuzzer reports as a crash and
// saves the input (like a sanitizer finding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tpuctl::fuzz {

inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

[[noreturn]] inline void fail(const char* file, int line, const char* what,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: property failed: %s\n  %s\n", file, line, what, detail.c_str());
  std::abort();
}

} // namespace tpuctl::fuzz

// FUZZ_CHECK(cond, detail): aborts with `detail` (a std::string expression) when cond is false.
#define FUZZ_CHECK(cond, detail)                                                                   \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ::tpuctl::fuzz::fail(__FILE__, __LINE__, #cond, (detail));                                   \
    }                                                                                              \
  } while (0)
