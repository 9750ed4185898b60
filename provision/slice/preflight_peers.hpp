// Which links the preflight checks: O(N) of them, not all N(N-1) pairs.
//
// A slice's workers talk over three kinds of path, and preflight proves each one a job will use:
//   coordinator  every worker reaches worker 0 of its slice at the coordinator port (JAX's
//                distributed client connects there first: JAX_COORDINATOR_ADDRESS);
//   ICI          every worker reaches its neighbours in the slice's torus of hosts (the host
//                grid TPU_HOST_BOUNDS, x fastest, wrapping on the axes the chip torus wraps):
//                the hosts whose chips its chips have ICI links to, which is where collectives
//                on a real TPU travel (and on a host network, where ring and torus collectives
//                send their traffic);
//   DCN          for multislice, every worker reaches the worker of the same id in every other
//                slice (MEGASCALE's cross-slice path; at least one peer per slice, spread so no
//                one worker carries a slice's whole check).
// Each link is checked from both ends (both workers call each other), so a firewall that only
// lets one direction through is caught, and each worker waits until the peers that call it have
// (so no one exits before its peers reached it). Per worker that is at most 1 + 6 + (slices - 1)
// calls; worker 0 of each slice hears from its whole slice. What is no longer checked: paths
// between workers that are neither neighbours nor coordinator nor DCN peers, which no
// collective of a ring/torus layout uses directly (the all-pairs check of 256 hosts was 65,280
// connections, and 5.3 million for a 2,304-host pod).
//
// Workers are numbered globally: slice * workers_per_slice + worker.
#pragma once

#include <string>
#include <vector>

#include "topology/accelerator_type.hpp"
#include "util/expected.hpp"

namespace tpuctl::provision {

struct PreflightLink {
  int peer = 0;      // global index
  std::string label; // "coordinator", "ICI x", "ICI y, coordinator", "DCN"
};

struct WorkerLinks {
  std::vector<PreflightLink> calls; // ascending by peer
  std::vector<int> expects;         // the workers that call this one, ascending
};

// The links of every worker of `slices` slices of `type`, by global index. Errors: usage for
// slices < 1.
Expected<std::vector<WorkerLinks>> preflight_links(const topology::AcceleratorType& type,
                                                   int slices);

// The label of the link from `from` to `to` in `links` ("" when `from` does not call `to`).
std::string link_label(const std::vector<WorkerLinks>& links, int from, int to);

} // namespace tpuctl::provision
