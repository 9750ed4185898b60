// A minimal fork-join pool for the GEMM: parallel_for(count, body) runs body(0) .. body(count-1)
// at once, body(0) on the calling thread and the others on pool threads that are started on
// first use and kept (sleeping on a condition variable) until the process exits.
#pragma once

#include <functional>

namespace tpuctl::kernels {

// Runs body(i) for every i in [0, count), each on its own thread, and returns when all are done.
// Never fails: when the pool is busy (another thread is inside parallel_for) or count <= 1, the
// bodies run one after another on the caller. Exceptions thrown by a body are not supported
// (GEMM bodies do not throw); one would terminate the process.
void parallel_for(int count, const std::function<void(int)>& body);

} // namespace tpuctl::kernels
