// ssh's -L/-R forward specs (remote::parse_forward_spec), as --ssh-flag and the words after `--`
// give them. Input: one byte picking -L or -R, then the spec's text. Properties: an error is one
// non-empty line; a parsed spec has its ports in range (0 only for -R's PORT), a non-empty HOST
// without blanks or '/', and written back in canonical form (IPv6 in brackets, `*` for every
// interface) it parses to the same forward.
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "remote/forwarding.hpp"

using namespace tpuctl;

namespace {

std::string field(const std::string& s) {
  return s.find(':') != std::string::npos ? "[" + s + "]" : s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 512) {
    return 0;
  }
  const auto kind = (data[0] & 1) != 0 ? remote::ForwardKind::remote : remote::ForwardKind::local;
  const std::string text = fuzz::text_of(data + 1, size - 1);
  auto spec = remote::parse_forward_spec(kind, text);
  if (!spec) {
    FUZZ_CHECK(!spec.error().message.empty(), text);
    FUZZ_CHECK(spec.error().message.find('\n') == std::string::npos, spec.error().message);
    return 0;
  }
  FUZZ_CHECK(spec->port > 0 || kind == remote::ForwardKind::remote, text);
  FUZZ_CHECK(spec->host_port > 0, text);
  FUZZ_CHECK(!spec->host.empty(), text);
  for (char c : spec->host + spec->bind_address) {
    FUZZ_CHECK(static_cast<unsigned char>(c) > ' ' && c != '/', text);
  }
  FUZZ_CHECK(!(spec->any_address && !spec->bind_address.empty()), text);
  const std::string bind = spec->any_address            ? "*:"
                           : spec->bind_address.empty() ? ""
                                                        : field(spec->bind_address) + ":";
  const std::string again = bind + std::to_string(spec->port) + ":" + field(spec->host) + ":" +
                            std::to_string(spec->host_port);
  auto reread = remote::parse_forward_spec(kind, again);
  FUZZ_CHECK(reread.has_value(), again);
  FUZZ_CHECK(reread->bind_address == spec->bind_address &&
                 reread->any_address == spec->any_address && reread->port == spec->port &&
                 reread->host == spec->host && reread->host_port == spec->host_port,
             text + " -> " + again);
  return 0;
}
