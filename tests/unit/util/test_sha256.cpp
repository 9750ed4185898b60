#include <random>

#include <doctest/doctest.h>

#include "tests/support/helpers.hpp"
#include "util/process.hpp"
#include "util/sha256.hpp"
#include "util/sha256_blocks.hpp"

using tpuctl::util::Sha256;
using tpuctl::util::sha256_hex;

TEST_SUITE_BEGIN("util");

TEST_CASE("util::sha256_hex matches the FIPS 180-4 test vectors") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("util::Sha256 gives the same digest however the input is split") {
  std::string data;
  for (int i = 0; i < 1000; ++i) {
    data += static_cast<char>(i * 7 + 3);
  }
  const std::string whole = sha256_hex(data);
  for (size_t chunk : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u, 999u}) {
    CAPTURE(chunk);
    Sha256 h;
    for (size_t off = 0; off < data.size(); off += chunk) {
      h.update(std::string_view(data).substr(off, chunk));
    }
    CHECK(h.hex_digest() == whole);
  }
}

TEST_CASE("util::sha256_hex agrees with sha256sum around every padding boundary") {
  std::mt19937 rng(7);
  for (size_t len : {0u, 1u, 54u, 55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 128u, 1000u, 70000u}) {
    CAPTURE(len);
    std::string data(len, '\0');
    for (auto& c : data) {
      c = static_cast<char>(rng());
    }
    tpuctl::util::ProcessOptions o;
    o.stdin_data = data;
    auto r = tpuctl::util::run_process({"sha256sum"}, o);
    REQUIRE(r);
    CHECK(r->out.substr(0, 64) == sha256_hex(data));
  }
}

TEST_CASE("util::sha256_file_hex hashes a file and names a missing one") {
  tpuctl::test::TempDir tmp;
  auto file = tmp.path() / "f";
  std::FILE* f = std::fopen(file.c_str(), "wb");
  std::fputs("abc", f);
  std::fclose(f);
  CHECK(tpuctl::util::sha256_file_hex(file).value_or("") == sha256_hex("abc"));
  auto missing = tpuctl::util::sha256_file_hex(tmp.path() / "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("nope") != std::string::npos);
}

TEST_CASE("util: the SHA-NI block function and the portable one give the same state, block by "
          "block and many blocks at once") {
  using namespace tpuctl::util::detail;
  if (!sha256_shani_available()) {
    MESSAGE("this CPU has no SHA extensions: only the portable path ran (the digests above)");
    return;
  }
  std::mt19937 rng(11);
  std::vector<uint8_t> data(64 * 37);
  for (auto& b : data) {
    b = static_cast<uint8_t>(rng());
  }
  for (size_t blocks : {size_t{1}, size_t{2}, size_t{3}, size_t{37}}) {
    CAPTURE(blocks);
    uint32_t portable[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                            0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint32_t shani[8];
    std::copy(std::begin(portable), std::end(portable), shani);
    sha256_blocks_portable(portable, data.data(), blocks);
    sha256_blocks_shani(shani, data.data(), blocks);
    CHECK(std::equal(std::begin(portable), std::end(portable), shani));
  }
}
