// The wire format of `tpuctl agent spmd-matmul`: every message, between a worker and the
// coordinator or between ring neighbours, is one frame = a fixed 64-byte header + a payload.
//
//   offset  size  field
//        0     4  magic "TPSM"
//        4     2  version (2: reports carry the unit's peak)
//        6     2  type (FrameType)
//        8     4  sender: the global process id of the sender
//       12     4  aux: the ring step (block frames), else 0
//       16     8  seed            -+
//       24    12  m, n, k          |  the job: a frame whose job differs from the receiver's
//       36     4  dtype            |  is rejected, naming the fields that differ
//       40     8  mesh data, model |
//       48     4  processes       -+
//       52     4  reserved (0)
//       56     8  payload length in bytes
//
// Integers are little-endian. A peer that is not a tpuctl spmd-matmul (wrong magic), speaks
// another version, runs another job or claims to be someone else is refused with a message that
// says which. Payloads of structured frames are built with ByteWriter and read with ByteReader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/tcp.hpp"
#include "kernels/gemm.hpp"
#include "util/expected.hpp"

namespace tpuctl::agent {

// What every process of one spmd-matmul run must agree on.
struct JobSpec {
  uint64_t seed = 0;
  int m = 0, n = 0, k = 0;
  kernels::GemmDtype dtype = kernels::GemmDtype::int8;
  int data = 1, model = 1; // the mesh
  int processes = 1;

  bool operator==(const JobSpec&) const = default;
};

// "seed 7 on process 0, 8 on process 2; m 256 on process 0, 512 on process 2": every field that
// differs, with `mine`/`theirs` as the labels. Empty when the jobs are equal.
std::string describe_job_mismatch(const JobSpec& a, const std::string& mine, const JobSpec& b,
                                  const std::string& theirs);
// "m=256 n=256 k=256 int8 mesh 4x1 seed 1 processes 4"
std::string describe_job(const JobSpec& job);

enum class FrameType : uint16_t {
  hello = 1,       // worker -> coordinator: check-in (CheckIn payload)
  table = 2,       // coordinator -> worker: every process's ring address
  reject = 3,      // either way: "you are refused", payload = the reason
  abort = 4,       // coordinator -> worker: the rendezvous failed, payload = why
  report = 5,      // worker -> coordinator: timings and checksum
  ring_hello = 6,  // ring: sender -> its next neighbour
  ring_accept = 7, // ring: the neighbour accepts
  block = 8,       // ring: one block of C (aux = step)
};
const char* to_string(FrameType type);

inline constexpr size_t k_frame_header_bytes = 64;
inline constexpr uint64_t k_max_control_payload = 1 << 20; // everything but block frames

struct FrameHeader {
  FrameType type = FrameType::hello;
  int sender = 0;
  uint32_t aux = 0;
  JobSpec job;
  uint64_t payload_bytes = 0;
};

void encode_header(const FrameHeader& header, uint8_t out[k_frame_header_bytes]);
// Errors: failure "not a tpuctl spmd-matmul peer (it sent ...)" for a wrong magic, failure naming
// both versions for another version, failure for an unknown type.
Expected<FrameHeader> decode_header(const uint8_t in[k_frame_header_bytes]);

struct Frame {
  FrameHeader header;
  std::string payload;
};

// Sends one frame. Errors: as send_all_until.
Status write_frame(const Socket& socket, const FrameHeader& header, const std::string& payload,
                   Deadline deadline);
// Reads one frame whose payload is at most `max_payload` bytes. Errors: as recv_exact_until and
// decode_header, failure for an oversized payload.
Expected<Frame> read_frame(const Socket& socket, Deadline deadline,
                           uint64_t max_payload = k_max_control_payload);

// One process of the job and the address its ring listener is bound to.
struct ProcessEntry {
  int process = 0;
  int slice = 0;
  int worker = 0;
  std::string host;
  int ring_port = 0;
};

// A hello frame's payload: who checks in, and its slice's hostnames (so that the coordinator can
// name the address of a missing peer of that slice).
struct CheckIn {
  ProcessEntry self;
  std::vector<std::string> slice_hostnames;
};

// What each process reports to process 0 after the gather and the check.
struct WorkerReport {
  int process = 0;
  double compute_ms = 0;
  double comm_ms = 0;
  double gops = 0;
  bool checksum_ok = false;
  std::string error;    // set when this process failed after the rendezvous
  double peak_gops = 0; // the peak of the unit its GEMM ran on (kernels::peak_kind_for), 0 unknown
};

// Payloads of hello, table and report frames. Decoding fails with a failure naming what is
// wrong (truncated, too many hostnames, a table of the wrong size or out of process order).
std::string encode_check_in(const CheckIn& check_in);
Expected<CheckIn> decode_check_in(const std::string& payload);
std::string encode_table(const std::vector<ProcessEntry>& table);
Expected<std::vector<ProcessEntry>> decode_table(const std::string& payload, int processes);
std::string encode_report(const WorkerReport& report);
Expected<WorkerReport> decode_report(const std::string& payload);

// Little-endian payload building: u32/u64/f64 and strings (u32 length + bytes).
class ByteWriter {
public:
  void u32(uint32_t v);
  void u64(uint64_t v);
  void f64(double v);
  void str(const std::string& s);
  const std::string& bytes() const { return m_out; }

private:
  std::string m_out;
};

// Reads what ByteWriter wrote. Every read fails with a "truncated" failure past the end.
class ByteReader {
public:
  explicit ByteReader(const std::string& data) : m_data(data) {}
  Expected<uint32_t> u32();
  Expected<uint64_t> u64();
  Expected<double> f64();
  Expected<std::string> str();

private:
  const std::string& m_data;
  size_t m_pos = 0;
};

} // namespace tpuctl::agent
