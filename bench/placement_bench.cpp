// placement_bench: placement and queue decisions on a simulated tpu7x pool.
//
// The pool: 9,216 chips of tpu7x, 2,304 hosts of 4 chips, shape 16x24x24 chips (8x12x24 hosts,
// 144 cubes of 4x4x4 chips). 10,000 requests of mixed shapes arrive over simulated time, each
// with a tier (high, normal, spot) and a run time; a placed slice holds its hosts until its run
// time is over, then releases them.
//
// The queue (deliberately simple): one FIFO per tier. Every tick the simulator releases
// finished slices, appends the tick's arrivals, then walks the tiers in priority order and, in
// each tier, the first k_window queued requests: a request that fits is placed (claim) and
// leaves the queue, one that does not is skipped for this tick ("place the head if it fits,
// else move on": backfill). Each such attempt is one decision; its latency covers
// try_place_slice() and, when it succeeds, claiming the hosts (which refreshes the grid's
// prefix sums). The first refusals are also explained (explain_no_fit), timed separately.
//
// Usage: placement_bench [seed]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "provision/queue/placement.hpp"

using namespace tpuctl;
using namespace tpuctl::provision;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int k_requests = 10000;
constexpr size_t k_window = 16; // queued requests looked at per tier per tick
constexpr int k_tiers = 3;
const char* const k_tier_names[k_tiers] = {"high", "normal", "spot"};

struct Request {
  int id = 0;
  int shape = 0; // index into the shape table
  int tier = 0;
  int arrival = 0;
  int duration = 0;
};

struct Running {
  int release_at = 0;
  Placement placement;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  return v[i];
}

} // namespace

int main(int argc, char** argv) {
  unsigned seed = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 42u;
  auto layout = make_pool_layout("tpu7x", 4, "16x24x24");
  if (!layout) {
    std::fprintf(stderr, "layout: %s\n", layout.error().message.c_str());
    return 1;
  }
  HostGrid grid(*layout);
  for (int i = 0; i < layout->capacity(); ++i) {
    GridCell& cell = grid.at(position_of(*layout, i));
    cell.state = CellState::free;
    cell.host = "h" + std::to_string(i);
  }
  grid.refresh();

  // Shapes and their weights: mostly sub-cube, a good share of multi-cube slices.
  const std::vector<std::pair<std::string, int>> shapes{
      {"tpu7x-2x2x1", 20}, {"tpu7x-2x2x2", 15}, {"tpu7x-2x2x4", 15}, {"tpu7x-2x4x4", 10},
      {"tpu7x-4x4x4", 15}, {"tpu7x-4x4x8", 10}, {"tpu7x-4x8x8", 8},  {"tpu7x-8x8x8", 4},
      {"tpu7x-8x8x16", 2}, {"tpu7x-8x16x16", 1}};
  std::vector<topology::AcceleratorType> types;
  std::vector<int> weights;
  for (const auto& [name, w] : shapes) {
    auto t = topology::parse_accelerator_type(name);
    if (!t) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), t.error().message.c_str());
      return 1;
    }
    if (!check_compatible(*layout, *t)) {
      std::fprintf(stderr, "%s does not suit the pool\n", name.c_str());
      return 1;
    }
    types.push_back(*t);
    weights.push_back(w);
  }

  std::mt19937 rng(seed);
  std::discrete_distribution<int> pick_shape(weights.begin(), weights.end());
  std::discrete_distribution<int> pick_tier({2, 5, 3});
  std::uniform_int_distribution<int> duration(20, 400);
  std::poisson_distribution<int> arrivals(0.35); // about 90% of capacity offered
  std::vector<Request> requests;
  for (int t = 0; static_cast<int>(requests.size()) < k_requests; ++t) {
    int n = arrivals(rng);
    for (int i = 0; i < n && static_cast<int>(requests.size()) < k_requests; ++i) {
      requests.push_back(Request{static_cast<int>(requests.size()), pick_shape(rng), pick_tier(rng),
                                 t, duration(rng)});
    }
  }

  std::deque<Request> queues[k_tiers];
  std::vector<Running> running;
  std::vector<double> decision_us;
  std::vector<double> explain_us;
  decision_us.reserve(400000);
  size_t next = 0;
  int placed = 0;
  long long wait_sum[k_tiers] = {0, 0, 0};
  int placed_in[k_tiers] = {0, 0, 0};
  long long busy_host_ticks = 0;
  int tick = 0;
  auto start = Clock::now();
  while (placed < k_requests) {
    // Release finished slices.
    bool released = false;
    for (size_t i = 0; i < running.size();) {
      if (running[i].release_at <= tick) {
        for (const auto& h : running[i].placement.hosts) {
          GridCell& cell = grid.at(h.position);
          cell.state = CellState::free;
          cell.owner.clear();
        }
        running[i] = std::move(running.back());
        running.pop_back();
        released = true;
      } else {
        ++i;
      }
    }
    if (released) {
      grid.refresh();
    }
    while (next < requests.size() && requests[next].arrival <= tick) {
      queues[requests[next].tier].push_back(requests[next]);
      ++next;
    }
    for (auto& queue : queues) {
      size_t looked = 0;
      for (auto it = queue.begin(); it != queue.end() && looked < k_window; ++looked) {
        const auto& type = types[static_cast<size_t>(it->shape)];
        auto t0 = Clock::now();
        auto p = try_place_slice(grid, type);
        if (p) {
          claim(grid, *p, "qr-" + std::to_string(it->id));
        }
        auto t1 = Clock::now();
        decision_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        if (p) {
          running.push_back(Running{tick + it->duration, std::move(*p)});
          wait_sum[it->tier] += tick - it->arrival;
          ++placed_in[it->tier];
          it = queue.erase(it);
          ++placed;
        } else {
          if (explain_us.size() < 200) {
            auto e0 = Clock::now();
            auto why = explain_no_fit(grid, type);
            auto e1 = Clock::now();
            explain_us.push_back(std::chrono::duration<double, std::micro>(e1 - e0).count());
            if (explain_us.size() == 1) {
              std::printf("first refusal: %s\n", why.message.c_str());
            }
          }
          ++it;
        }
      }
    }
    busy_host_ticks += layout->capacity() - grid.count(CellState::free);
    ++tick;
  }
  double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  double decisions_s = 0;
  for (double d : decision_us) {
    decisions_s += d / 1e6;
  }
  size_t left_queued = 0;
  for (const auto& queue : queues) {
    left_queued += queue.size();
  }
  std::printf("pool: tpu7x 16x24x24 chips, %d hosts, 144 cubes; seed %u\n", layout->capacity(),
              seed);
  std::printf("requests: %d placed over %d ticks (%zu still queued)\n", placed, tick, left_queued);
  for (int t = 0; t < k_tiers; ++t) {
    std::printf("tier %s: %d placed, mean wait %.1f ticks\n", k_tier_names[t], placed_in[t],
                placed_in[t] ? static_cast<double>(wait_sum[t]) / placed_in[t] : 0.0);
  }
  std::printf("mean host utilisation: %.1f%%\n",
              100.0 * static_cast<double>(busy_host_ticks) /
                  (static_cast<double>(tick) * layout->capacity()));
  std::printf("total simulation time: %.3f s (decisions: %.3f s)\n", total_s, decisions_s);
  std::printf("decisions: %zu; latency median %.1f us, p99 %.1f us, max %.1f us\n",
              decision_us.size(), percentile(decision_us, 0.5), percentile(decision_us, 0.99),
              percentile(decision_us, 1.0));
  std::printf("explain_no_fit (first %zu refusals): median %.1f us, p99 %.1f us\n",
              explain_us.size(), percentile(explain_us, 0.5), percentile(explain_us, 0.99));
  return 0;
}
