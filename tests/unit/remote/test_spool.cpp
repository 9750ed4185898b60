#include <fcntl.h>
#include <random>
#include <string>
#include <unistd.h>

#include <doctest/doctest.h>

#include "remote/grouping.hpp"
#include "remote/input_bytes.hpp"
#include "remote/spool.hpp"
#include "tests/support/helpers.hpp"
#include "util/sha256.hpp"

using tpuctl::remote::InputBytes;
using tpuctl::remote::Spool;

TEST_SUITE_BEGIN("remote");

namespace {

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) {
    c = static_cast<char>(rng());
  }
  return s;
}

} // namespace

TEST_CASE("remote::Spool keeps a small output in memory and a large one in a file, whole") {
  Spool small(1024);
  small.append("hello ");
  small.append("world\n");
  CHECK_FALSE(small.spilled());
  CHECK(small.size() == 12);
  CHECK(small.last_byte() == '\n');
  CHECK(small.text().value() == "hello world\n");
  CHECK(small.digest() == tpuctl::util::sha256_hex("hello world\n"));

  const std::string big = random_bytes(3 * 1024 * 1024 + 17, 1);
  Spool spool(4096);
  std::mt19937 rng(2);
  for (size_t at = 0; at < big.size();) {
    const size_t n = std::min<size_t>(big.size() - at, 1 + rng() % 70000);
    spool.append(std::string_view(big).substr(at, n));
    at += n;
  }
  CHECK(spool.spilled());
  CHECK(spool.error().empty());
  CHECK(spool.size() == big.size());
  CHECK(spool.last_byte() == big.back());
  CHECK(spool.text().value() == big);
  CHECK(spool.digest() == tpuctl::util::sha256_hex(big));
  size_t pieces = 0;
  REQUIRE(spool.for_each([&](std::string_view p) {
    CHECK(p.size() <= (size_t{1} << 20));
    ++pieces;
  }));
  CHECK(pieces >= 4); // read back in pieces, never whole
  std::string buffer;
  for (uint64_t at :
       {uint64_t{0}, uint64_t{4000}, uint64_t{4096}, uint64_t{1234567}, uint64_t{big.size() - 1}}) {
    // Up to 300 bytes: the memory part ends at 4096, where a read stops short.
    const auto piece = spool.read_at(at, 300, buffer);
    CHECK_FALSE(piece.empty());
    CHECK(piece.size() <= 300);
    CHECK(piece == std::string_view(big).substr(at, piece.size()));
  }
  CHECK(spool.read_at(big.size(), 10, buffer).empty());
}

TEST_CASE("remote::InputBytes::spool takes a prefix, then all a descriptor gives, any size") {
  tpuctl::test::TempDir dir;
  const std::string data = random_bytes(2 * 1024 * 1024 + 5, 3);
  const std::string file = (dir.path() / "input").string();
  {
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    ::close(fd);
  }
  int fd = ::open(file.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  auto in = InputBytes::spool("SECRET=1\n", fd);
  ::close(fd);
  REQUIRE(in);
  std::string want = "SECRET=1\n";
  want += data;
  REQUIRE((*in)->size() == want.size());
  std::string all, buffer;
  for (uint64_t at = 0; at < want.size();) {
    auto piece = (*in)->read(at, 256 * 1024, buffer);
    REQUIRE_FALSE(piece.empty());
    all.append(piece);
    at += piece.size();
  }
  CHECK(all == want);
  CHECK(InputBytes::of("abc")->read(1, 10, buffer) == "bc");
}

TEST_CASE("remote::group_outputs groups spooled outputs by digest and size, reading a kept copy") {
  const std::string big = random_bytes(200 * 1024, 4);
  const std::vector<std::string> names{"w0", "w1", "w2"};
  std::vector<tpuctl::remote::HostResult> results(names.size());
  for (size_t i = 0; i < results.size(); ++i) {
    results[i].index = i;
    results[i].host = names[i];
    results[i].out_spool = std::make_shared<Spool>(1024);
    results[i].err_spool = std::make_shared<Spool>(1024);
    results[i].out_spool->append(i == 1 ? std::string_view("other\n") : std::string_view(big));
  }
  // The first host's copy was freed as an identical one ended first: the group reads the other.
  results[0].out_spool->drop_content();
  auto groups = tpuctl::remote::group_outputs(results, tpuctl::remote::Stream::out);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].hosts == std::vector<std::string>{"w0", "w2"});
  REQUIRE(groups[0].spool != nullptr);
  CHECK(groups[0].spool->text().value() == big);
  CHECK(groups[1].hosts == std::vector<std::string>{"w1"});
  CHECK(groups[1].spool->text().value() == "other\n");
  CHECK(tpuctl::remote::group_outputs(results, tpuctl::remote::Stream::err).empty());
  CHECK_FALSE(results[0].out_spool->text()); // freed: reading it fails, never gives wrong bytes
}
