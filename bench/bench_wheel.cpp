// bench_wheel: the agent's TimingWheel against the two textbook timer
// queues, on the same pre-generated workload in the same run.
//
// Workload (docs/benchmarks.md): 1 M pending deadlines, uniform in
// [1 s, 1 h] (reservation expiry, dispatch deadlines; 10 ms ticks). Then
// `pairs` schedule+cancel pairs at 1 M pending: each cancels a random pending
// timer and schedules a new one in its place (an order that completes before
// its deadline and the next order's deadline), so the count stays at 1 M.
// Then time moves on in 100 ms steps for an hour and every timer fires.
//
// Baselines: std::multimap<deadline, payload> (cancel = erase by the
// iterator kept at schedule) and a binary heap (std::priority_queue) with
// lazy cancel (a flag per timer; cancelled entries are skipped when popped
// and purged by a rebuild when they outnumber the live ones).
#include <algorithm>
#include <cstdint>
#include <map>
#include <queue>
#include <random>
#include <vector>

#include "bench_util.hpp"
#include "deadlines/timing_wheel.hpp"

namespace {

using vend::bench::Stopwatch;

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kStepMs = 100;

struct Workload {
  std::vector<int64_t> initial;        // deadlines of the pending timers
  std::vector<uint32_t> victim;        // per pair: index of the timer to cancel
  std::vector<int64_t> next_deadline;  // per pair: deadline of the new timer
};

Workload make_workload(int64_t pending, int64_t pairs) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> deadline(1000, kHourMs);
  std::uniform_int_distribution<uint32_t> index(0, static_cast<uint32_t>(pending - 1));
  Workload w;
  for (int64_t i = 0; i < pending; ++i) w.initial.push_back(deadline(rng));
  for (int64_t i = 0; i < pairs; ++i) {
    w.victim.push_back(index(rng));
    w.next_deadline.push_back(deadline(rng));
  }
  return w;
}

// Nanoseconds per schedule+cancel pair and per fired timer.
struct Timing {
  double pair_ns;
  double fire_ns;
};

Timing run_wheel(const Workload& w) {
  vend::agent::TimingWheel wheel(0, 10);
  std::vector<vend::agent::TimerId> ids;
  ids.reserve(w.initial.size());
  for (size_t i = 0; i < w.initial.size(); ++i) ids.push_back(wheel.schedule(w.initial[i], i));
  Stopwatch sw;
  for (size_t p = 0; p < w.victim.size(); ++p) {
    uint32_t v = w.victim[p];
    wheel.cancel(ids[v]);
    ids[v] = wheel.schedule(w.next_deadline[p], v);
  }
  double pair_ns = static_cast<double>(sw.elapsed_ns()) / static_cast<double>(w.victim.size());
  uint64_t fired = 0;
  uint64_t sum = 0;
  auto fire = [&](uint64_t payload, int64_t) {
    ++fired;
    sum += payload;
  };
  sw.restart();
  for (int64_t now = kStepMs; now <= kHourMs + kStepMs; now += kStepMs) wheel.advance(now, fire);
  double fire_ns = static_cast<double>(sw.elapsed_ns()) / static_cast<double>(fired);
  vend::bench::do_not_optimize(sum);
  if (fired != w.initial.size()) vend::bench::progress("bench_wheel", "BUG: wheel fire count");
  return {pair_ns, fire_ns};
}

Timing run_multimap(const Workload& w) {
  std::multimap<int64_t, uint64_t> tree;
  std::vector<std::multimap<int64_t, uint64_t>::iterator> ids;
  ids.reserve(w.initial.size());
  for (size_t i = 0; i < w.initial.size(); ++i) ids.push_back(tree.emplace(w.initial[i], i));
  Stopwatch sw;
  for (size_t p = 0; p < w.victim.size(); ++p) {
    uint32_t v = w.victim[p];
    tree.erase(ids[v]);
    ids[v] = tree.emplace(w.next_deadline[p], v);
  }
  double pair_ns = static_cast<double>(sw.elapsed_ns()) / static_cast<double>(w.victim.size());
  uint64_t fired = 0;
  uint64_t sum = 0;
  sw.restart();
  for (int64_t now = kStepMs; now <= kHourMs + kStepMs; now += kStepMs) {
    while (!tree.empty() && tree.begin()->first <= now) {
      ++fired;
      sum += tree.begin()->second;
      tree.erase(tree.begin());
    }
  }
  double fire_ns = static_cast<double>(sw.elapsed_ns()) / static_cast<double>(fired);
  vend::bench::do_not_optimize(sum);
  return {pair_ns, fire_ns};
}

// A binary heap with lazy cancel. Timer handles are sequence numbers; a
// cancelled handle is flagged and its heap entry dropped when it surfaces.
class LazyHeap {
 public:
  uint64_t schedule(int64_t deadline, uint64_t payload) {
    uint64_t id = cancelled_.size();
    cancelled_.push_back(0);
    heap_.push(Entry{deadline, id, payload});
    ++live_;
    return id;
  }
  void cancel(uint64_t id) {
    cancelled_[id] = 1;
    --live_;
    if (heap_.size() > 2 * live_ + 1024) purge();
  }
  // Pops every live entry due by `now`; returns how many, adds payloads to sum.
  uint64_t fire(int64_t now, uint64_t& sum) {
    uint64_t fired = 0;
    while (!heap_.empty() && heap_.top().deadline <= now) {
      Entry e = heap_.top();
      heap_.pop();
      if (cancelled_[e.id] != 0) continue;
      cancelled_[e.id] = 1;
      --live_;
      ++fired;
      sum += e.payload;
    }
    return fired;
  }

 private:
  struct Entry {
    int64_t deadline;
    uint64_t id;
    uint64_t payload;
    bool operator>(const Entry& o) const { return deadline > o.deadline; }
  };
  struct Access : std::priority_queue<Entry, std::vector<Entry>, std::greater<>> {
    std::vector<Entry>& items() { return c; }
  };
  void purge() {
    std::vector<Entry>& items = heap_.items();
    std::erase_if(items, [&](const Entry& e) { return cancelled_[e.id] != 0; });
    std::make_heap(items.begin(), items.end(), std::greater<>());
  }

  Access heap_;
  std::vector<uint8_t> cancelled_;
  size_t live_ = 0;
};

Timing run_heap(const Workload& w) {
  LazyHeap heap;
  std::vector<uint64_t> ids;
  ids.reserve(w.initial.size());
  for (size_t i = 0; i < w.initial.size(); ++i) ids.push_back(heap.schedule(w.initial[i], i));
  Stopwatch sw;
  for (size_t p = 0; p < w.victim.size(); ++p) {
    uint32_t v = w.victim[p];
    heap.cancel(ids[v]);
    ids[v] = heap.schedule(w.next_deadline[p], v);
  }
  double pair_ns = static_cast<double>(sw.elapsed_ns()) / static_cast<double>(w.victim.size());
  uint64_t fired = 0;
  uint64_t sum = 0;
  sw.restart();
  for (int64_t now = kStepMs; now <= kHourMs + kStepMs; now += kStepMs)
    fired += heap.fire(now, sum);
  double fire_ns = static_cast<double>(sw.elapsed_ns()) / static_cast<double>(fired);
  vend::bench::do_not_optimize(sum);
  return {pair_ns, fire_ns};
}

// The machine's memory latency now: ns per dependent load over a random
// cycle through 64 MiB (a pointer chase, as a linked timer list is). Timer
// structures at 1 M pending are bound by it; quoting it in the same run
// tells a slow machine from a slow structure.
double memory_latency_ns() {
  const size_t n = (64u << 20) / sizeof(uint32_t);
  std::vector<uint32_t> next(n);
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(7));
  for (size_t i = 0; i < n; ++i) next[order[i]] = order[(i + 1) % n];
  const int64_t loads = 2'000'000;
  uint32_t at = 0;
  Stopwatch sw;
  for (int64_t i = 0; i < loads; ++i) at = next[at];
  vend::bench::do_not_optimize(at);
  return static_cast<double>(sw.elapsed_ns()) / static_cast<double>(loads);
}

void run(const vend::bench::Options& opt, vend::bench::Report& report) {
  using vend::bench::Better;
  const int64_t pending = vend::bench::scaled(opt, 1'000'000, 1000);
  const int64_t pairs = vend::bench::scaled(opt, 1'000'000, 1000);
  Workload w = make_workload(pending, pairs);

  std::vector<double> wheel_pair, tree_pair, heap_pair, wheel_fire, tree_fire, heap_fire, latency;
  for (int r = 0; r < opt.runs; ++r) {  // interleaved: each run sees the same noise
    Timing wheel = run_wheel(w);
    Timing tree = run_multimap(w);
    Timing heap = run_heap(w);
    latency.push_back(memory_latency_ns());
    vend::bench::progress("bench_wheel", "run " + std::to_string(r + 1) + ": pair ns wheel " +
                                             std::to_string(wheel.pair_ns) + ", multimap " +
                                             std::to_string(tree.pair_ns) + ", heap " +
                                             std::to_string(heap.pair_ns));
    wheel_pair.push_back(wheel.pair_ns);
    tree_pair.push_back(tree.pair_ns);
    heap_pair.push_back(heap.pair_ns);
    wheel_fire.push_back(wheel.fire_ns);
    tree_fire.push_back(tree.fire_ns);
    heap_fire.push_back(heap.fire_ns);
  }

  // The wheel's pair time appears twice, once against each baseline.
  report.add("wheel_schedule_cancel", "ns/pair", wheel_pair, Better::kLower);
  report.add("wheel_schedule_cancel_vs_heap", "ns/pair", wheel_pair, Better::kLower);
  report.add("multimap_schedule_cancel", "ns/pair", tree_pair, Better::kLower);
  report.add("heap_schedule_cancel", "ns/pair", heap_pair, Better::kLower);
  report.add("wheel_fire", "ns/timer", wheel_fire, Better::kLower);
  report.add("wheel_fire_vs_heap", "ns/timer", wheel_fire, Better::kLower);
  report.add("multimap_fire", "ns/timer", tree_fire, Better::kLower);
  report.add("heap_fire", "ns/timer", heap_fire, Better::kLower);
  report.add("memory_latency", "ns/load", latency, Better::kLower);
  std::vector<double> in_latencies;
  for (size_t r = 0; r < latency.size(); ++r) in_latencies.push_back(wheel_pair[r] / latency[r]);
  report.add("wheel_pair_in_memory_latencies", "loads/pair", in_latencies, Better::kLower);
  report.compare("wheel_schedule_cancel", "multimap_schedule_cancel");
  report.compare("wheel_schedule_cancel_vs_heap", "heap_schedule_cancel");
  report.compare("wheel_fire", "multimap_fire");
  report.compare("wheel_fire_vs_heap", "heap_fire");
  const vend::bench::Metric& pair = report.at("wheel_schedule_cancel");
  report.target("wheel_schedule_cancel", "<= 300 ns/pair and >= 5x multimap",
                pair.median <= 300 && *pair.ratio >= 5);
  report.note(std::to_string(pending) + " pending deadlines uniform in [1 s, 1 h], " +
              std::to_string(pairs) +
              " schedule+cancel pairs (cancel a random pending timer, schedule a new one), "
              "then advance in 100 ms steps until all fired; wheel tick 10 ms; seed 42");
  report.note(
      "memory_latency: one dependent random load over 64 MiB, measured in each run; "
      "wheel_pair_in_memory_latencies = wheel ns/pair / memory_latency");
  report.note("heap = std::priority_queue with lazy cancel (flag + purge when garbage > live)");
}

}  // namespace

int main(int argc, char** argv) { return vend::bench::run_bench(argc, argv, "bench_wheel", run); }
