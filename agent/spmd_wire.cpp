// Frames of spmd-matmul (layout in spmd_wire.hpp). Explicit little-endian byte packing rather
// than memcpy of structs, so the format does not depend on padding or on the host.
#include "agent/spmd_wire.hpp"

#include <cstring>

#include "util/strings.hpp"

namespace tpuctl::agent {

namespace {

constexpr uint8_t k_magic[4] = {'T', 'P', 'S', 'M'};
constexpr uint16_t k_version = 2;

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}
uint16_t get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

Error truncated() {
  return make_error(ErrorKind::failure, "a frame's payload is truncated");
}

} // namespace

std::string describe_job_mismatch(const JobSpec& a, const std::string& mine, const JobSpec& b,
                                  const std::string& theirs) {
  std::vector<std::string> diffs;
  auto field = [&](const char* name, const std::string& x, const std::string& y) {
    if (x != y) {
      diffs.push_back(std::string(name) + " " + x + " on " + mine + ", " + y + " on " + theirs);
    }
  };
  field("seed", std::to_string(a.seed), std::to_string(b.seed));
  field("m", std::to_string(a.m), std::to_string(b.m));
  field("n", std::to_string(a.n), std::to_string(b.n));
  field("k", std::to_string(a.k), std::to_string(b.k));
  field("dtype", kernels::to_string(a.dtype), kernels::to_string(b.dtype));
  field("mesh", std::to_string(a.data) + "," + std::to_string(a.model),
        std::to_string(b.data) + "," + std::to_string(b.model));
  field("processes", std::to_string(a.processes), std::to_string(b.processes));
  return util::join(diffs, "; ");
}

std::string describe_job(const JobSpec& j) {
  return "m=" + std::to_string(j.m) + " n=" + std::to_string(j.n) + " k=" + std::to_string(j.k) +
         " " + kernels::to_string(j.dtype) + " mesh " + std::to_string(j.data) + "," +
         std::to_string(j.model) + " seed " + std::to_string(j.seed) + " processes " +
         std::to_string(j.processes);
}

const char* to_string(FrameType type) {
  switch (type) {
  case FrameType::hello:
    return "hello";
  case FrameType::table:
    return "table";
  case FrameType::reject:
    return "reject";
  case FrameType::abort:
    return "abort";
  case FrameType::report:
    return "report";
  case FrameType::ring_hello:
    return "ring hello";
  case FrameType::ring_accept:
    return "ring accept";
  case FrameType::block:
    return "block";
  }
  return "unknown";
}

void encode_header(const FrameHeader& h, uint8_t out[k_frame_header_bytes]) {
  std::memset(out, 0, k_frame_header_bytes);
  std::memcpy(out, k_magic, 4);
  put16(out + 4, k_version);
  put16(out + 6, static_cast<uint16_t>(h.type));
  put32(out + 8, static_cast<uint32_t>(h.sender));
  put32(out + 12, h.aux);
  put64(out + 16, h.job.seed);
  put32(out + 24, static_cast<uint32_t>(h.job.m));
  put32(out + 28, static_cast<uint32_t>(h.job.n));
  put32(out + 32, static_cast<uint32_t>(h.job.k));
  put32(out + 36, static_cast<uint32_t>(h.job.dtype));
  put32(out + 40, static_cast<uint32_t>(h.job.data));
  put32(out + 44, static_cast<uint32_t>(h.job.model));
  put32(out + 48, static_cast<uint32_t>(h.job.processes));
  put64(out + 56, h.payload_bytes);
}

Expected<FrameHeader> decode_header(const uint8_t in[k_frame_header_bytes]) {
  if (std::memcmp(in, k_magic, 4) != 0) {
    return make_error(ErrorKind::failure,
                      "not a tpuctl spmd-matmul peer (it sent '" +
                          util::printable(std::string(reinterpret_cast<const char*>(in), 8)) +
                          "...' instead of a TPSM frame)");
  }
  uint16_t version = get16(in + 4);
  if (version != k_version) {
    return make_error(ErrorKind::failure, "the peer speaks spmd-matmul protocol version " +
                                              std::to_string(version) + ", this tpuctl speaks " +
                                              std::to_string(k_version) +
                                              ": run the same tpuctl on every worker");
  }
  uint16_t type = get16(in + 6);
  if (type < static_cast<uint16_t>(FrameType::hello) ||
      type > static_cast<uint16_t>(FrameType::block)) {
    return make_error(ErrorKind::failure,
                      "the peer sent an unknown frame type " + std::to_string(type));
  }
  uint32_t dtype = get32(in + 36);
  if (dtype > static_cast<uint32_t>(kernels::GemmDtype::int8)) {
    return make_error(ErrorKind::failure,
                      "the peer sent an unknown dtype " + std::to_string(dtype));
  }
  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.sender = static_cast<int>(get32(in + 8));
  h.aux = get32(in + 12);
  h.job.seed = get64(in + 16);
  h.job.m = static_cast<int>(get32(in + 24));
  h.job.n = static_cast<int>(get32(in + 28));
  h.job.k = static_cast<int>(get32(in + 32));
  h.job.dtype = static_cast<kernels::GemmDtype>(dtype);
  h.job.data = static_cast<int>(get32(in + 40));
  h.job.model = static_cast<int>(get32(in + 44));
  h.job.processes = static_cast<int>(get32(in + 48));
  h.payload_bytes = get64(in + 56);
  return h;
}

Status write_frame(const Socket& socket, const FrameHeader& header, const std::string& payload,
                   Deadline deadline) {
  FrameHeader h = header;
  h.payload_bytes = payload.size();
  uint8_t raw[k_frame_header_bytes];
  encode_header(h, raw);
  std::string bytes(reinterpret_cast<const char*>(raw), k_frame_header_bytes);
  bytes += payload;
  return send_all_until(socket, bytes.data(), bytes.size(), deadline);
}

Expected<Frame> read_frame(const Socket& socket, Deadline deadline, uint64_t max_payload) {
  uint8_t raw[k_frame_header_bytes];
  TPUCTL_TRY(recv_exact_until(socket, raw, sizeof raw, deadline));
  Frame f;
  TPUCTL_TRY_ASSIGN(f.header, decode_header(raw));
  if (f.header.payload_bytes > max_payload) {
    return make_error(ErrorKind::failure,
                      "a " + std::string(to_string(f.header.type)) + " frame announces " +
                          std::to_string(f.header.payload_bytes) + " bytes, more than the " +
                          std::to_string(max_payload) + " allowed");
  }
  f.payload.resize(f.header.payload_bytes);
  if (!f.payload.empty()) {
    TPUCTL_TRY(recv_exact_until(socket, f.payload.data(), f.payload.size(), deadline));
  }
  return f;
}

void ByteWriter::u32(uint32_t v) {
  uint8_t b[4];
  put32(b, v);
  m_out.append(reinterpret_cast<const char*>(b), 4);
}

void ByteWriter::u64(uint64_t v) {
  uint8_t b[8];
  put64(b, v);
  m_out.append(reinterpret_cast<const char*>(b), 8);
}

void ByteWriter::f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  u64(bits);
}

void ByteWriter::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  m_out += s;
}

Expected<uint32_t> ByteReader::u32() {
  if (m_data.size() - m_pos < 4 || m_pos > m_data.size()) {
    return truncated();
  }
  uint32_t v = get32(reinterpret_cast<const uint8_t*>(m_data.data()) + m_pos);
  m_pos += 4;
  return v;
}

Expected<uint64_t> ByteReader::u64() {
  if (m_data.size() - m_pos < 8 || m_pos > m_data.size()) {
    return truncated();
  }
  uint64_t v = get64(reinterpret_cast<const uint8_t*>(m_data.data()) + m_pos);
  m_pos += 8;
  return v;
}

Expected<double> ByteReader::f64() {
  TPUCTL_TRY_ASSIGN(uint64_t bits, u64());
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

Expected<std::string> ByteReader::str() {
  TPUCTL_TRY_ASSIGN(uint32_t n, u32());
  if (m_data.size() - m_pos < n) {
    return truncated();
  }
  std::string s = m_data.substr(m_pos, n);
  m_pos += n;
  return s;
}

std::string encode_check_in(const CheckIn& c) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(c.self.process));
  w.u32(static_cast<uint32_t>(c.self.slice));
  w.u32(static_cast<uint32_t>(c.self.worker));
  w.str(c.self.host);
  w.u32(static_cast<uint32_t>(c.self.ring_port));
  w.u32(static_cast<uint32_t>(c.slice_hostnames.size()));
  for (const auto& h : c.slice_hostnames) {
    w.str(h);
  }
  return w.bytes();
}

namespace {

Expected<ProcessEntry> read_entry(ByteReader& r) {
  ProcessEntry e;
  TPUCTL_TRY_ASSIGN(uint32_t p, r.u32());
  TPUCTL_TRY_ASSIGN(uint32_t s, r.u32());
  TPUCTL_TRY_ASSIGN(uint32_t w, r.u32());
  TPUCTL_TRY_ASSIGN(e.host, r.str());
  TPUCTL_TRY_ASSIGN(uint32_t port, r.u32());
  e.process = static_cast<int>(p);
  e.slice = static_cast<int>(s);
  e.worker = static_cast<int>(w);
  e.ring_port = static_cast<int>(port);
  return e;
}

} // namespace

Expected<CheckIn> decode_check_in(const std::string& payload) {
  ByteReader r(payload);
  CheckIn c;
  TPUCTL_TRY_ASSIGN(c.self, read_entry(r));
  TPUCTL_TRY_ASSIGN(uint32_t count, r.u32());
  if (count > 100000) {
    return make_error(ErrorKind::failure, "a check-in lists too many hostnames");
  }
  for (uint32_t i = 0; i < count; ++i) {
    TPUCTL_TRY_ASSIGN(auto h, r.str());
    c.slice_hostnames.push_back(std::move(h));
  }
  return c;
}

std::string encode_table(const std::vector<ProcessEntry>& table) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(table.size()));
  for (const auto& e : table) {
    w.u32(static_cast<uint32_t>(e.process));
    w.u32(static_cast<uint32_t>(e.slice));
    w.u32(static_cast<uint32_t>(e.worker));
    w.str(e.host);
    w.u32(static_cast<uint32_t>(e.ring_port));
  }
  return w.bytes();
}

Expected<std::vector<ProcessEntry>> decode_table(const std::string& payload, int processes) {
  ByteReader r(payload);
  TPUCTL_TRY_ASSIGN(uint32_t count, r.u32());
  if (static_cast<int>(count) != processes) {
    return make_error(ErrorKind::failure, "the coordinator's table lists " + std::to_string(count) +
                                              " processes, not " + std::to_string(processes));
  }
  std::vector<ProcessEntry> table;
  for (uint32_t i = 0; i < count; ++i) {
    TPUCTL_TRY_ASSIGN(auto e, read_entry(r));
    if (e.process != static_cast<int>(i)) {
      return make_error(ErrorKind::failure, "the coordinator's table is out of order");
    }
    table.push_back(std::move(e));
  }
  return table;
}

std::string encode_report(const WorkerReport& report) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(report.process));
  w.f64(report.compute_ms);
  w.f64(report.comm_ms);
  w.f64(report.gops);
  w.u32(report.checksum_ok ? 1 : 0);
  w.str(report.error);
  w.f64(report.peak_gops);
  return w.bytes();
}

Expected<WorkerReport> decode_report(const std::string& payload) {
  ByteReader in(payload);
  WorkerReport rep;
  TPUCTL_TRY_ASSIGN(uint32_t id, in.u32());
  TPUCTL_TRY_ASSIGN(rep.compute_ms, in.f64());
  TPUCTL_TRY_ASSIGN(rep.comm_ms, in.f64());
  TPUCTL_TRY_ASSIGN(rep.gops, in.f64());
  TPUCTL_TRY_ASSIGN(uint32_t okay, in.u32());
  TPUCTL_TRY_ASSIGN(rep.error, in.str());
  TPUCTL_TRY_ASSIGN(rep.peak_gops, in.f64());
  rep.process = static_cast<int>(id);
  rep.checksum_ok = okay != 0;
  return rep;
}

} // namespace tpuctl::agent
