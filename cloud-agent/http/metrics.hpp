// Prometheus text exposition (format 0.0.4) of the agent's counters,
// written with vend::PrometheusText.
//
// AgentCore::take_metrics() hands out dispatch-latency samples only once
// ("since the last take"), so the histogram is accumulated here, for the
// life of the process. Exactly one MetricsExporter should call
// take_metrics() on a core, or samples are split between consumers.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/agent_core.hpp"
#include "vend/prometheus_text.hpp"

namespace vend::agent {

// A cumulative Prometheus histogram with fixed buckets. Not thread-safe.
class Histogram {
 public:
  // Upper bounds in seconds, ascending (+Inf is implicit).
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,  5,     10,   20,  30,   60};

  void observe(double seconds);
  // Writes the _bucket, _sum and _count lines of the histogram family
  // `text` has started.
  void render(PrometheusText& text) const;
  uint64_t count() const { return count_; }

 private:
  std::array<uint64_t, kBounds.size()> buckets_{};  // non-cumulative
  uint64_t count_ = 0;
  double sum_ = 0;
};

// The agent's health as /healthz judges it and /metrics shows it: the
// core's storage, the broker connection, the inbound queue.
struct AgentHealth {
  bool storage_failed = false;  // the repository fail-stopped (AgentCore::health)
  bool mqtt_connected = false;
  int64_t mqtt_down_ms = 0;                    // how long the broker has been down; 0 while up
  bool broker_down = false;                    // down longer than the grace
  size_t inbound_messages = 0;                 // waiting in the inbound queue
  size_t inbound_max_messages = 0;             // its bound (0: unknown)
  bool inbound_saturated = false;              // at >= 90% of its message or byte bound
  uint64_t inbound_dropped = 0;                // messages dropped since start, all reasons
  uint64_t inbound_dropped_machine_share = 0;  // of those: past their machine's share
  // "storage_failed", "broker_down", "inbound_saturated": why it is not ok.
  std::vector<std::string> reasons() const;
};

// Thread-safe: render() may run on many HTTP threads at once.
class MetricsExporter {
 public:
  // Renders `metrics` and `health`, folding latency samples into the histogram.
  std::string render(const AgentMetrics& metrics, const AgentHealth& health);
  // take_metrics() and render() under one lock, so concurrent scrapes never
  // publish a histogram that misses samples another scrape already took.
  std::string scrape(AgentCore& core, const AgentHealth& health);

 private:
  std::mutex scrape_mu_;     // serialises scrape(); taken before histogram_mu_
  std::mutex histogram_mu_;  // guards dispatch_latency_
  Histogram dispatch_latency_;
};

}  // namespace vend::agent
