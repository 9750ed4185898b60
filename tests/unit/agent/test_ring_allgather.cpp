// The ring all-gather, with every process a thread of this test on its own loopback address
// (127.0.120.x: this file's block).
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "agent/ring_allgather.hpp"

using namespace tpuctl::agent;
using namespace std::chrono_literals;

TEST_SUITE_BEGIN("agent");

namespace {

const JobSpec k_job{5, 64, 64, 64, tpuctl::kernels::GemmDtype::int8, 4, 1, 4};

struct Ring {
  std::vector<Socket> listeners;
  std::vector<ProcessEntry> table;
};

// P processes on 127.0.120.1.., each with a bound ring listener.
Ring make_ring(int processes) {
  Ring r;
  for (int p = 0; p < processes; ++p) {
    std::string host = "127.0.120." + std::to_string(p + 1);
    auto l = listen_on(host, 0);
    REQUIRE_MESSAGE(l, l.error().message);
    r.table.push_back(ProcessEntry{p, 0, p, host, local_port(*l)});
    r.listeners.push_back(std::move(*l));
  }
  return r;
}

uint8_t pattern(int block, size_t i) {
  return static_cast<uint8_t>((block * 131 + i * 7 + i / 251) & 0xFF);
}

std::string text(const tpuctl::Error& e) {
  return e.message;
}

} // namespace

TEST_CASE("agent::ring_allgather: every process ends with every block, in place") {
  for (int processes : {1, 2, 3, 5}) {
    // 1 MiB blocks: larger than the socket buffers, so sending and receiving must overlap.
    const size_t block = (1u << 20) + 13;
    JobSpec job = k_job;
    job.processes = processes;
    job.data = processes;
    Ring ring = make_ring(processes);
    std::vector<std::vector<uint8_t>> data(static_cast<size_t>(processes));
    std::vector<std::string> errors(static_cast<size_t>(processes));
    std::vector<std::thread> threads;
    for (int p = 0; p < processes; ++p) {
      threads.emplace_back([&, p] {
        auto& mine = data[static_cast<size_t>(p)];
        mine.assign(block * static_cast<size_t>(processes), 0);
        for (size_t i = 0; i < block; ++i) {
          mine[static_cast<size_t>(p) * block + i] = pattern(p, i);
        }
        auto links = connect_ring(job, p, ring.table, ring.listeners[static_cast<size_t>(p)], 20s);
        if (!links) {
          errors[static_cast<size_t>(p)] = text(links.error());
          return;
        }
        auto st = ring_allgather(*links, job, mine.data(), block, 20s);
        if (!st) {
          errors[static_cast<size_t>(p)] = text(st.error());
        }
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    for (int p = 0; p < processes; ++p) {
      CAPTURE(processes);
      CAPTURE(p);
      CHECK(errors[static_cast<size_t>(p)] == "");
      bool all = true;
      for (int b = 0; b < processes && all; ++b) {
        for (size_t i = 0; i < block; ++i) {
          if (data[static_cast<size_t>(p)][static_cast<size_t>(b) * block + i] != pattern(b, i)) {
            all = false;
            break;
          }
        }
      }
      CHECK(all);
    }
  }
}

TEST_CASE("agent::connect_ring refuses a stray and a mismatched peer, then takes the real one") {
  JobSpec job = k_job;
  job.processes = 2;
  job.data = 2;
  Ring ring = make_ring(2);
  const auto to_1 = resolve_address("127.0.120.2", ring.table[1].ring_port);
  REQUIRE(to_1);
  const auto deadline = SteadyClock::now() + 10s;
  // A stranger speaking HTTP, and a tpuctl running another job, reach process 1 first.
  auto stray = connect_until(*to_1, deadline);
  REQUIRE(stray);
  std::string http = "GET / HTTP/1.1\r\nHost: x\r\n" + std::string(64, ' ') + "\r\n\r\n";
  REQUIRE(send_all_until(*stray, http.data(), http.size(), deadline));
  auto other = connect_until(*to_1, deadline);
  REQUIRE(other);
  JobSpec other_job = job;
  other_job.seed = 99;
  FrameHeader hello;
  hello.type = FrameType::ring_hello;
  hello.job = other_job;
  hello.sender = 0;
  REQUIRE(write_frame(*other, hello, "", deadline));

  std::vector<std::vector<uint8_t>> data(2, std::vector<uint8_t>(2 * 1000));
  std::fill_n(data[0].begin(), 1000, uint8_t{1});
  std::fill_n(data[1].begin() + 1000, 1000, uint8_t{2});
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      auto links = connect_ring(job, p, ring.table, ring.listeners[static_cast<size_t>(p)], 10s);
      if (!links) {
        errors[p] = text(links.error());
        return;
      }
      auto st = ring_allgather(*links, job, data[static_cast<size_t>(p)].data(), 1000, 10s);
      errors[p] = st ? "" : text(st.error());
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
  CHECK(data[0][1500] == 2);
  CHECK(data[1][500] == 1);

  auto r1 = read_frame(*stray, deadline);
  REQUIRE(r1);
  CHECK(r1->header.type == FrameType::reject);
  CHECK(r1->payload.find("not a tpuctl spmd-matmul peer") != std::string::npos);
  auto r2 = read_frame(*other, deadline);
  REQUIRE(r2);
  CHECK(r2->header.type == FrameType::reject);
  CHECK(r2->payload == "process 0 runs a different job (seed 5 on process 1, 99 on process 0)");
}

TEST_CASE("agent::connect_ring: a previous process that never connects fails in time, named") {
  JobSpec job = k_job;
  job.processes = 3;
  job.data = 3;
  Ring ring = make_ring(3);
  // Only process 1 runs: its next (2) listens, its previous (0) never calls.
  auto t0 = SteadyClock::now();
  auto links = connect_ring(job, 1, ring.table, ring.listeners[1], 400ms);
  auto elapsed = SteadyClock::now() - t0;
  REQUIRE(!links);
  CHECK(links.error().message ==
        "ring: process 0 (slice 0, worker 0, 127.0.120.1), the previous process in the ring, "
        "did not connect within 400ms");
  CHECK(elapsed < 3s);
}

TEST_CASE("agent::ring_allgather: a neighbour that stops sending fails the step, named") {
  JobSpec job = k_job;
  job.processes = 2;
  job.data = 2;
  Ring ring = make_ring(2);
  tpuctl::Expected<RingLinks> links[2] = {tpuctl::usage_error("not run"),
                                          tpuctl::usage_error("not run")};
  std::thread t1([&] { links[1] = connect_ring(job, 1, ring.table, ring.listeners[1], 10s); });
  links[0] = connect_ring(job, 0, ring.table, ring.listeners[0], 10s);
  t1.join();
  REQUIRE(links[0]);
  REQUIRE(links[1]);
  // Process 1 is connected but never sends its block.
  std::vector<uint8_t> data(2 * 4096, 7);
  auto t0 = SteadyClock::now();
  auto st = ring_allgather(*links[0], job, data.data(), 4096, 300ms);
  REQUIRE(!st);
  CHECK(st.error().message == "ring: all-gather step 1 of 1: process 1 (slice 0, worker 1, "
                              "127.0.120.2) sent 0 of 4160 bytes within 300ms");
  CHECK(SteadyClock::now() - t0 < 3s);

  // And one that closes its connection is reported at once.
  links[1]->out.close();
  auto t1b = SteadyClock::now();
  auto closed = ring_allgather(*links[0], job, data.data(), 4096, 10s);
  REQUIRE(!closed);
  CHECK(closed.error().message.find("closed the connection") != std::string::npos);
  CHECK(SteadyClock::now() - t1b < 3s);
}
