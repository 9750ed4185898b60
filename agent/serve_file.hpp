// Serving one file to the other workers of a slice over plain TCP. Provisioning sends the agent
// over SSH to one worker in every batch (a seed) and lets the others fetch it from their seed
// (remote::push_fetch_script) instead of each receiving its own copy through sshd, whose
// per-byte work (decrypting, buffering, piping) on the receiving host dominated a push from
// nothing at pod scale; on a real network it also keeps N copies off the controller's uplink.
// The content is neither secret (it is tpuctl) nor trusted: every fetcher checks it against the
// sha256 the controller sent over SSH before it is installed.
//
// The protocol: a client sends one byte. 'F' asks for the file, which follows, then the server
// closes. 'Q' asks the server to stop: it takes no more clients, finishes what it is sending and
// ends. Provisioning sends 'Q' once its fetchers are done, and a new server that finds the port
// taken sends it to take over from a server of an earlier provisioning.
#pragma once

#include <chrono>
#include <string>

#include "util/expected.hpp"

namespace tpuctl::agent {

inline constexpr char k_serve_fetch = 'F';
inline constexpr char k_serve_quit = 'Q';

struct ServeFileOptions {
  std::string file;
  std::string host; // the address to listen on (this worker's slice address; never the wildcard)
  int port = 0;
  int clients = 1; // return once this many fetches were served; 0: until asked to stop
  std::chrono::milliseconds timeout{30000};
  // Return once listening and serve from a detached child process (its own session, stdio on
  // /dev/null) that ends as a foreground server would.
  bool background = false;
};

struct ServeFileResult {
  int served = 0;       // fetches that received the whole file
  int failed = 0;       // connections that broke off
  bool stopped = false; // a client asked the server to stop
  int pid = 0;          // background: the serving process
  bool ok(int clients) const { return clients == 0 || served == clients; }
};

// Reads `file` once, listens on host:port (taking the port over from an earlier server that
// still holds it: 'Q', then up to 2 s of retries) and sends the whole file to each client that
// asks for it (up to 8 at a time), until `clients` fetches ended, a client asked it to stop or
// `timeout` passed. Errors (nothing served): failure when the file cannot be read or the
// address cannot be listened on; usage for clients < 0 or a timeout <= 0.
Expected<ServeFileResult> serve_file(const ServeFileOptions& options);

// Asks the server on host:port to stop (a 'Q'), waiting at most `wait`. True when one took it.
bool stop_file_server(const std::string& host, int port, std::chrono::milliseconds wait);

} // namespace tpuctl::agent
