// The check-in of a multi-controller job: every process meets global process 0 (the
// coordinator) at JAX_COORDINATOR_ADDRESS, tells it where it listens for ring traffic, and gets
// back the table of every process of every slice. See rendezvous.cpp for the protocol.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/spmd_wire.hpp"
#include "agent/tcp.hpp"
#include "util/expected.hpp"

namespace tpuctl::agent {

// "process 3 (slice 0, worker 3, 127.120.1.5)": how errors name a peer.
std::string describe_process(const ProcessEntry& entry);

struct RendezvousOptions {
  JobSpec job;                              // job.processes is the number expected
  ProcessEntry self;                        // this process, with its ring listener's port
  std::vector<std::string> slice_hostnames; // this process's slice, worker order
  HostPort coordinator;                     // process 0 listens here (on its own address)
  std::chrono::milliseconds timeout{30000};
};

struct Rendezvous {
  std::vector<ProcessEntry> table; // every process, indexed by process id
  // Process 0: links[p] is the connection to process p (links[0] unused). Others: links[0] is
  // the connection to the coordinator. Kept open for the reports.
  std::vector<Socket> links;
  std::string coordinator_address; // "host:port"
};

// Process 0 listens on options.coordinator, waits until every other process checked in, and
// sends each the table. Any other process connects (retrying while the coordinator is not up),
// checks in and waits for the table. Check-ins that are not a tpuctl spmd-matmul, run another
// job, or claim a taken or impossible process id get a reject frame naming the reason.
// Errors (failure), all within about options.timeout (a worker waits at most 2 x timeout + 2 s):
//   coordinator: processes missing at the deadline, each named by describe_process (the address
//     comes from its slice's hostnames when any process of that slice checked in), plus the
//     connections it refused; the checked-in processes get the same message in an abort frame;
//   worker: the coordinator unreachable (naming process 0 and its address), a reject or abort
//     from it (its reason), no table in time; usage when the listen address is not usable.
Expected<Rendezvous> rendezvous(const RendezvousOptions& options);

// Sends `report` to the coordinator (best effort for a failing process). Errors: as write_frame.
Status send_report(const Rendezvous& rendezvous, const JobSpec& job, const WorkerReport& report,
                   std::chrono::milliseconds timeout);

// Process 0: every process's report, indexed by process id (`own` at index 0).
// Errors: failure naming each process whose report did not arrive within `timeout`.
Expected<std::vector<WorkerReport>> collect_reports(const Rendezvous& rendezvous,
                                                    const JobSpec& job, const WorkerReport& own,
                                                    std::chrono::milliseconds timeout);

// "5s", "1.5s", "750ms".
std::string duration_text(std::chrono::milliseconds d);

} // namespace tpuctl::agent
