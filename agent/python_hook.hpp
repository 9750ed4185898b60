// The Python start-up every worker gets (agent/python/sitecustomize.py, baked into the binary):
// `agent preflight --python-dir DIR` writes it at provisioning, next to the agent, and every
// command tpuctl runs on the worker puts DIR on PYTHONPATH (provision/slice/worker_env.hpp), so
// a JAX program there sees every chip of the slice as on a Cloud TPU VM.
#pragma once

#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace tpuctl::agent {

// The file's text, as written.
std::string_view python_hook_text();

// Writes DIR/sitecustomize.py (0600 in a 0700 DIR made when missing, as everything tpuctl
// writes on a worker: the job's Python runs as the same user), through a temporary file and
// rename(), unless the file already holds the same text. Errors: failure naming the path and
// the system's reason.
Status install_python_hook(const std::string& dir);

} // namespace tpuctl::agent
