// What `tpuctl agent spmd-matmul` reads from the network: frame headers (agent::decode_header)
// and the payloads of hello, table and report frames (decode_check_in, decode_table,
// decode_report). Input: bytes as a peer would send them; the first 64 go to decode_header, all
// of them to each payload decoder. Property: whatever decodes encodes back to bytes that decode
// to the same value.
#include <cstring>
#include <string>

#include "agent/spmd_wire.hpp"
#include "fuzz/fuzz_check.hpp"

using namespace tpuctl;
using namespace tpuctl::agent;

namespace {

bool same(const ProcessEntry& a, const ProcessEntry& b) {
  return a.process == b.process && a.slice == b.slice && a.worker == b.worker && a.host == b.host &&
         a.ring_port == b.ring_port;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) {
    return 0;
  }
  if (size >= k_frame_header_bytes) {
    if (auto h = decode_header(data)) {
      uint8_t raw[k_frame_header_bytes];
      encode_header(*h, raw);
      auto again = decode_header(raw);
      FUZZ_CHECK(again && again->type == h->type && again->sender == h->sender &&
                     again->aux == h->aux && again->job == h->job &&
                     again->payload_bytes == h->payload_bytes,
                 "header does not survive encode/decode");
    } else {
      FUZZ_CHECK(!h.error().message.empty(), "header");
    }
  }
  const std::string payload = fuzz::text_of(data, size);
  if (auto c = decode_check_in(payload)) {
    auto again = decode_check_in(encode_check_in(*c));
    FUZZ_CHECK(again && same(again->self, c->self) && again->slice_hostnames == c->slice_hostnames,
               "check-in does not survive encode/decode");
  }
  const int processes = size > 0 ? data[0] % 8 : 0;
  if (auto t = decode_table(payload.substr(size > 0 ? 1 : 0), processes)) {
    FUZZ_CHECK(t->size() == static_cast<size_t>(processes), "table size");
    auto again = decode_table(encode_table(*t), processes);
    FUZZ_CHECK(again && again->size() == t->size(), "table does not survive encode/decode");
    for (size_t i = 0; i < t->size(); ++i) {
      FUZZ_CHECK(same((*again)[i], (*t)[i]) && (*t)[i].process == static_cast<int>(i),
                 "table entry " + std::to_string(i));
    }
  }
  if (auto r = decode_report(payload)) {
    auto again = decode_report(encode_report(*r));
    FUZZ_CHECK(again && again->process == r->process && again->error == r->error &&
                   again->checksum_ok == r->checksum_ok &&
                   same_bits(again->compute_ms, r->compute_ms) &&
                   same_bits(again->comm_ms, r->comm_ms) && same_bits(again->gops, r->gops) &&
                   same_bits(again->peak_gops, r->peak_gops),
               "report does not survive encode/decode");
  }
  return 0;
}
