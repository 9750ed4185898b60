// Serving one file to the other workers of a slice over plain TCP. Provisioning sends the agent
// over SSH to one worker in every batch (a seed) and lets the others fetch it from their seed
// (remote::push_fetch_script) instead of each receiving its own copy through sshd, whose
// per-byte work (decrypting, buffering, piping) on the receiving host dominated a push from
// nothing at pod scale; on a real network it also keeps N copies off the controller's uplink.
// The content is neither secret (it is tpuctl) nor trusted: every fetcher checks it against the
// sha256 the controller sent over SSH before it is installed.
#pragma once

#include <chrono>
#include <string>

#include "util/expected.hpp"

namespace tpuctl::agent {

struct ServeFileOptions {
  std::string file;
  std::string host; // the address to listen on (this worker's slice address; never the wildcard)
  int port = 0;
  int clients = 1; // return once this many connections were served
  std::chrono::milliseconds timeout{30000};
};

struct ServeFileResult {
  int served = 0; // connections that received the whole file
  int failed = 0; // connections that broke off
  bool ok(int clients) const { return served == clients; }
};

// Reads `file` once, listens on host:port and sends the whole file to each connection (up to 8
// at a time), until `clients` connections have ended or `timeout` passed. Errors (nothing
// served): failure when the file cannot be read or the address cannot be listened on; usage
// for clients < 1 or a timeout <= 0.
Expected<ServeFileResult> serve_file(const ServeFileOptions& options);

} // namespace tpuctl::agent
