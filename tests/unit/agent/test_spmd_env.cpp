// Who a process is, from the worker environment, and the frames it speaks.
#include <doctest/doctest.h>

#include "agent/spmd_env.hpp"
#include "agent/spmd_wire.hpp"

using namespace tpuctl::agent;

TEST_SUITE_BEGIN("agent");

namespace {

bool has(const tpuctl::Error& e, const std::string& text) {
  for (const auto& m : e.all_messages()) {
    if (m.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("agent::parse_spmd_identity follows JAX's process arithmetic") {
  SUBCASE("one slice") {
    auto id = parse_spmd_identity({{"TPU_WORKER_ID", "2"},
                                   {"TPU_WORKER_HOSTNAMES", "h0,h1,h2,h3"},
                                   {"JAX_COORDINATOR_ADDRESS", "h0:8476"}});
    REQUIRE(id);
    CHECK(id->process == 2);
    CHECK(id->processes == 4);
    CHECK(id->slice == 0);
    CHECK(id->slices == 1);
    CHECK(id->own_host == "h2");
    CHECK(id->coordinator.host == "h0");
    CHECK(id->coordinator.port == 8476);
    CHECK(!id->is_coordinator());
  }
  SUBCASE("slice 1 of 2: slice-major process ids, the coordinator in slice 0") {
    auto id = parse_spmd_identity({{"TPU_WORKER_ID", "1"},
                                   {"TPU_WORKER_HOSTNAMES", "b0,b1,b2,b3"},
                                   {"JAX_COORDINATOR_ADDRESS", "a0:8476"},
                                   {"MEGASCALE_NUM_SLICES", "2"},
                                   {"MEGASCALE_SLICE_ID", "1"},
                                   {"TPUCTL_PROCESS_ID", "5"},
                                   {"TPUCTL_NUM_PROCESSES", "8"}});
    REQUIRE(id);
    CHECK(id->process == 5);
    CHECK(id->processes == 8);
    CHECK(id->own_host == "b1");
    CHECK(id->coordinator.host == "a0");
  }
  SUBCASE("IPv6 coordinator") {
    auto id = parse_spmd_identity({{"TPU_WORKER_ID", "0"},
                                   {"TPU_WORKER_HOSTNAMES", "::1"},
                                   {"JAX_COORDINATOR_ADDRESS", "[::1]:9000"}});
    REQUIRE(id);
    CHECK(id->coordinator.host == "::1");
    CHECK(id->coordinator.port == 9000);
    CHECK(id->is_coordinator());
  }
}

TEST_CASE("agent::parse_spmd_identity reports every problem, naming the variable") {
  SUBCASE("nothing set") {
    auto id = parse_spmd_identity({});
    REQUIRE(!id);
    CHECK(id.error().kind == tpuctl::ErrorKind::usage);
    CHECK(has(id.error(), "TPU_WORKER_HOSTNAMES is not set"));
    CHECK(has(id.error(), "TPU_WORKER_ID is not set"));
    CHECK(has(id.error(), "JAX_COORDINATOR_ADDRESS is not set"));
    CHECK(has(id.error(), "tpuctl ssh NAME --worker=all"));
  }
  SUBCASE("out of range and malformed") {
    auto id = parse_spmd_identity({{"TPU_WORKER_ID", "4"},
                                   {"TPU_WORKER_HOSTNAMES", "h0,h1,h2,h3"},
                                   {"JAX_COORDINATOR_ADDRESS", "h0"},
                                   {"MEGASCALE_NUM_SLICES", "2"}});
    REQUIRE(!id);
    CHECK(has(id.error(), "TPU_WORKER_ID '4' is out of range"));
    CHECK(has(id.error(), "MEGASCALE_SLICE_ID is not set"));
    CHECK(has(id.error(), "JAX_COORDINATOR_ADDRESS: 'h0' is not host:port"));
  }
  SUBCASE("tpuctl's own ids disagree with JAX's") {
    auto id = parse_spmd_identity({{"TPU_WORKER_ID", "1"},
                                   {"TPU_WORKER_HOSTNAMES", "h0,h1"},
                                   {"JAX_COORDINATOR_ADDRESS", "h0:8476"},
                                   {"TPUCTL_PROCESS_ID", "3"}});
    REQUIRE(!id);
    CHECK(has(id.error(), "TPUCTL_PROCESS_ID '3' disagrees with 1"));
  }
  SUBCASE("an empty hostname") {
    auto id = parse_spmd_identity({{"TPU_WORKER_ID", "0"},
                                   {"TPU_WORKER_HOSTNAMES", "h0,,h2"},
                                   {"JAX_COORDINATOR_ADDRESS", "h0:8476"}});
    REQUIRE(!id);
    CHECK(has(id.error(), "entry 1 is empty"));
  }
}

TEST_CASE("agent::split_host_port") {
  auto hp = split_host_port("10.0.0.1:8476", "X");
  REQUIRE(hp);
  CHECK(hp->host == "10.0.0.1");
  CHECK(hp->port == 8476);
  CHECK(!split_host_port("10.0.0.1:0", "X"));
  CHECK(!split_host_port("10.0.0.1:65536", "X"));
  CHECK(!split_host_port(":80", "X"));
  CHECK(!split_host_port("[::1]80", "X"));
  CHECK(!split_host_port("host:8o", "X"));
}

TEST_CASE("agent::encode_header/decode_header round-trip; strangers are named") {
  FrameHeader h;
  h.type = FrameType::block;
  h.sender = 6;
  h.aux = 3;
  h.job = JobSpec{0xFEEDFACECAFEBEEFull, 512, 256, 128, tpuctl::kernels::GemmDtype::bf16, 2, 4, 8};
  h.payload_bytes = 1ull << 33;
  uint8_t raw[k_frame_header_bytes];
  encode_header(h, raw);
  auto back = decode_header(raw);
  REQUIRE(back);
  CHECK(back->type == FrameType::block);
  CHECK(back->sender == 6);
  CHECK(back->aux == 3);
  CHECK(back->job == h.job);
  CHECK(back->payload_bytes == h.payload_bytes);

  SUBCASE("not a frame") {
    const char ssh[k_frame_header_bytes] = "SSH-2.0-OpenSSH_9.2p1";
    auto bad = decode_header(reinterpret_cast<const uint8_t*>(ssh));
    REQUIRE(!bad);
    CHECK(bad.error().message.find("not a tpuctl spmd-matmul peer") != std::string::npos);
    CHECK(bad.error().message.find("SSH-2.0-") != std::string::npos);
  }
  SUBCASE("another version") {
    raw[4] = 9;
    auto bad = decode_header(raw);
    REQUIRE(!bad);
    CHECK(bad.error().message.find("version 9") != std::string::npos);
  }
}

TEST_CASE("agent::describe_job_mismatch names every field that differs") {
  JobSpec a{1, 256, 256, 256, tpuctl::kernels::GemmDtype::int8, 4, 1, 4};
  JobSpec b = a;
  CHECK(describe_job_mismatch(a, "process 0", b, "process 2").empty());
  b.k = 512;
  b.seed = 2;
  CHECK(describe_job_mismatch(a, "process 0", b, "process 2") ==
        "seed 1 on process 0, 2 on process 2; k 256 on process 0, 512 on process 2");
}

TEST_CASE("agent::ByteReader fails past the end instead of reading garbage") {
  ByteWriter w;
  w.u32(7);
  w.str("abc");
  w.f64(2.5);
  std::string bytes = w.bytes();
  ByteReader r(bytes);
  CHECK(*r.u32() == 7);
  CHECK(*r.str() == "abc");
  CHECK(*r.f64() == 2.5);
  CHECK(!r.u32());
  std::string cut = bytes.substr(0, 6); // the string's length says 3, 2 bytes follow
  ByteReader r2(cut);
  CHECK(*r2.u32() == 7);
  CHECK(!r2.str());
}
