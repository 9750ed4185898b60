// Accelerator types and topologies as users type them (--accelerator-type, --type/--topology):
// parse_accelerator_type, parse_topology and accelerator_type_from_topology. Input: the text; a
// first line "GEN\nTOPOLOGY" also goes to accelerator_type_from_topology. Properties: a parsed
// type is self-consistent (chips, cores, hosts and bounds agree), its canonical name parses back
// to the same size and its topology forms to the same shape.
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "topology/accelerator_type.hpp"

using namespace tpuctl;
using namespace tpuctl::topology;

namespace {

int product(const Dims& d) {
  return d[0] * d[1] * d[2];
}

std::string describe(const AcceleratorType& t) {
  return t.name + " dims " + format_bounds(t.dims) + " chips " + std::to_string(t.chips) +
         " hosts " + std::to_string(t.hosts) + " host bounds " + format_bounds(t.host_bounds) +
         " chips/host " + format_bounds(t.chips_per_host_bounds);
}

void check_type(const AcceleratorType& t) {
  FUZZ_CHECK(t.generation != nullptr, describe(t));
  FUZZ_CHECK(t.chips == product(t.dims) && t.chips > 0, describe(t));
  FUZZ_CHECK(t.cores == t.chips * t.generation->cores_per_chip, describe(t));
  FUZZ_CHECK(t.hosts == product(t.host_bounds) && t.hosts > 0, describe(t));
  FUZZ_CHECK(t.chips_per_host == product(t.chips_per_host_bounds), describe(t));
  FUZZ_CHECK(t.hosts * t.chips_per_host == t.chips, describe(t));
  for (int i = 0; i < 3; ++i) {
    FUZZ_CHECK(t.host_bounds[i] * t.chips_per_host_bounds[i] == t.dims[i], describe(t));
  }
  // The canonical name is a size: it parses back to a slice of that size (for multi-cube sizes
  // the most cube-like shape, which need not be this one). The topology forms give this shape.
  auto again = parse_accelerator_type(t.name);
  FUZZ_CHECK(again.has_value(), describe(t) + ": canonical name rejected");
  FUZZ_CHECK(again->name == t.name && again->chips == t.chips,
             describe(t) + " vs " + describe(*again));
  auto by_topology = accelerator_type_from_topology(t.generation->name, t.topology());
  FUZZ_CHECK(by_topology.has_value(), describe(t) + ": topology form rejected");
  FUZZ_CHECK(by_topology->name == t.name && by_topology->dims == t.dims,
             describe(t) + " vs " + describe(*by_topology));
  auto typed = parse_accelerator_type(std::string(t.generation->type_prefix) + "-" + t.topology());
  FUZZ_CHECK(typed.has_value() && typed->dims == t.dims, describe(t) + ": type-topology form");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) {
    return 0; // types are short; longer inputs only slow the search down
  }
  const std::string text = fuzz::text_of(data, size);
  if (auto t = parse_accelerator_type(text)) {
    check_type(*t);
  } else {
    FUZZ_CHECK(!t.error().message.empty(), text);
  }
  if (auto topo = parse_topology(text)) {
    FUZZ_CHECK(topo->rank == 2 || topo->rank == 3, text);
    for (int i = 0; i < 3; ++i) {
      FUZZ_CHECK(topo->dims[i] >= 1 && topo->dims[i] <= 1024, text);
    }
    auto again = parse_topology(format_dims(topo->dims, topo->rank));
    FUZZ_CHECK(again && again->dims == topo->dims && again->rank == topo->rank, text);
  }
  if (auto nl = text.find('\n'); nl != std::string::npos) {
    if (auto t = accelerator_type_from_topology(text.substr(0, nl), text.substr(nl + 1))) {
      check_type(*t);
    }
  }
  return 0;
}
