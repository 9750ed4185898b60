// util/base64: RFC 4648's test vectors both ways, OpenSSH's unpadded form, and what is refused.
#include <string>

#include <doctest/doctest.h>

#include "util/base64.hpp"

using tpuctl::util::base64_decode;
using tpuctl::util::base64_encode;

TEST_CASE("util::base64 encodes and decodes RFC 4648's vectors, padded or not") {
  const char* vectors[][2] = {{"", ""},
                              {"f", "Zg=="},
                              {"fo", "Zm8="},
                              {"foo", "Zm9v"},
                              {"foob", "Zm9vYg=="},
                              {"fooba", "Zm9vYmE="},
                              {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    CAPTURE(plain);
    CHECK(base64_encode(plain) == coded);
    CHECK(base64_decode(coded) == std::string(plain));
    std::string bare = coded;
    bare.erase(bare.find_last_not_of('=') + 1);
    CHECK(base64_encode(plain, false) == bare);
    CHECK(base64_decode(bare) == std::string(plain));
  }
  const std::string bytes("\0\x01\xfe\xff\x80", 5);
  CHECK(base64_decode(base64_encode(bytes)) == bytes);
}

TEST_CASE("util::base64_decode refuses characters outside the alphabet and impossible lengths") {
  CHECK_FALSE(base64_decode("Zm9v YmFy").has_value());
  CHECK_FALSE(base64_decode("Zm9v-mFy").has_value()); // the URL alphabet is another encoding
  CHECK_FALSE(base64_decode("Zm9vY").has_value());    // 4n + 1 characters: no input makes that
  CHECK_FALSE(base64_decode("Zm=v").has_value());     // '=' only at the end
}
