// The ring all-gather of spmd-matmul over TCP: each process holds one equal-sized block and
// ends with all of them. Neighbours are process p-1 and p+1 (mod P) in process order, so the
// ring runs through each slice's workers in order and crosses slices (the DCN hop) once per
// slice boundary. See ring_allgather.cpp for the schedule.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "agent/rendezvous.hpp"
#include "agent/spmd_wire.hpp"
#include "agent/tcp.hpp"
#include "util/expected.hpp"

namespace tpuctl::agent {

// This process's two ring connections: `out` to the next process, `in` from the previous one.
struct RingLinks {
  int self = 0;
  int prev = 0;
  int next = 0;
  Socket out;
  Socket in;
  std::vector<ProcessEntry> table;
};

// Connects to the next process (table[next].host:ring_port, retrying until it listens) and
// accepts the previous one on `listener`, with a ring-hello / ring-accept handshake both ways.
// A connection that is not a tpuctl spmd-matmul, runs another job or is not the previous
// process is refused with a reject frame saying why, and the wait goes on. With one process
// nothing is connected. Errors (failure, within about `timeout`): the next process unreachable
// or refusing this one (its reason), the previous process not connecting (naming it and the
// connections refused meanwhile).
Expected<RingLinks> connect_ring(const JobSpec& job, int self,
                                 const std::vector<ProcessEntry>& table, const Socket& listener,
                                 std::chrono::milliseconds timeout);

// All-gathers P blocks of `block_bytes` each, stored one after the other in `blocks` (block p
// belongs to process p; this process's own block must be filled in). In step s = 0..P-2 a
// process sends block (self - s) mod P to the next process while it receives block
// (self - s - 1) mod P from the previous one, both at once (poll), so no send can deadlock on a
// full socket buffer. Each block frame's header names the job, the sender and the step; anything
// else is an error. Errors (failure): a step not finished within `timeout` (naming the neighbour
// and how many bytes moved), a closed connection, an unexpected frame.
Status ring_allgather(RingLinks& ring, const JobSpec& job, uint8_t* blocks, size_t block_bytes,
                      std::chrono::milliseconds timeout);

} // namespace tpuctl::agent
