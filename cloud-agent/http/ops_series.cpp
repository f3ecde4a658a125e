// OpsSeries: per-minute buckets of the ops messages (ops_series.hpp).
#include "http/ops_series.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace vend::agent {

namespace {

constexpr int64_t kMinuteMs = 60'000;
constexpr double kBinGrowth = 1.25;

size_t latency_bin(int64_t ms) {
  if (ms <= 1) return 0;
  auto bin =
      static_cast<size_t>(std::ceil(std::log(static_cast<double>(ms)) / std::log(kBinGrowth)));
  return std::min(bin, OpsSeries::kLatencyBins - 1);
}

// The geometric middle of the bin holding the `q` quantile (bin i holds
// (1.25^(i-1), 1.25^i]: its middle is within 12% of any value in it); -1
// when empty.
int64_t quantile_ms(const std::array<uint32_t, OpsSeries::kLatencyBins>& bins, uint64_t count,
                    double q) {
  if (count == 0) return -1;
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count)));
  uint64_t seen = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    seen += bins[i];
    if (seen >= std::max<uint64_t>(rank, 1)) {
      return std::max<int64_t>(1, std::llround(std::pow(kBinGrowth, static_cast<double>(i) - 0.5)));
    }
  }
  return -1;
}

}  // namespace

OpsSeries::OpsSeries(OpsSeriesOptions options, const Clock& clock)
    : options_(options), clock_(clock), buckets_(std::max<size_t>(1, options.minutes)) {}

void OpsSeries::offer(const std::string& kind, const std::string& payload) {
  bool orders = kind == "orders";
  if (!orders && kind != "device") return;
  std::lock_guard lock(pending_mu_);
  if (pending_.size() >= options_.max_pending) {
    pending_.pop_front();
    ++dropped_;
  }
  pending_.emplace_back(orders, payload);
}

void OpsSeries::drain() {
  std::lock_guard lock(mu_);
  std::deque<std::pair<bool, std::string>> batch;
  {
    std::lock_guard pending_lock(pending_mu_);
    batch.swap(pending_);
  }
  for (const auto& [orders, payload] : batch) {
    if (orders) {
      auto events = ops::decode_order_events(payload);
      if (events.ok())
        on_orders(*events);
      else
        ++bad_messages_;
    } else {
      auto status = ops::decode_device(payload);
      if (status.ok())
        on_device(*status);
      else
        ++bad_messages_;
    }
  }
}

OpsSeries::Bucket& OpsSeries::bucket(int64_t ts_ms) {
  int64_t minute = ts_ms / kMinuteMs;
  Bucket& b = buckets_[static_cast<size_t>(minute) % buckets_.size()];
  if (b.minute != minute) b = Bucket{minute};
  return b;
}

void OpsSeries::on_orders(const ops::OrderEvents& events) {
  int64_t oldest_minute = clock_.wall_ms() / kMinuteMs - static_cast<int64_t>(buckets_.size()) + 1;
  for (const ops::OrderEvent& e : events.events) {
    if (e.to_state == "PAID") {
      if (paid_ms_.emplace(e.order_id, e.ts_ms).second) paid_order_.push_back(e.order_id);
      while (paid_ms_.size() > options_.max_tracked_orders && !paid_order_.empty()) {
        paid_ms_.erase(paid_order_.front());
        paid_order_.pop_front();
      }
    }
    bool result =
        e.from_state == "DISPATCHED" && (e.to_state == "COMPLETED" || e.to_state == "FAILED");
    int64_t latency = -1;
    if (result) {
      if (auto it = paid_ms_.find(e.order_id); it != paid_ms_.end()) {
        latency = std::max<int64_t>(0, e.ts_ms - it->second);
        paid_ms_.erase(it);  // its id stays in paid_order_ until evicted: harmless
      }
    }
    if (e.ts_ms / kMinuteMs < oldest_minute) continue;  // older than the window
    Bucket& b = bucket(e.ts_ms);
    if (e.from_state.empty()) ++b.orders;
    if (e.to_state == "COMPLETED") ++b.sales;
    if (e.to_state == "FAILED") ++b.failed;
    if (latency >= 0) ++b.latency[latency_bin(latency)];
  }
}

void OpsSeries::credit_online(Device& d, int64_t from_ms, int64_t to_ms) const {
  int64_t window_start =
      (clock_.wall_ms() / kMinuteMs - static_cast<int64_t>(buckets_.size()) + 1) * kMinuteMs;
  from_ms = std::max(from_ms, window_start);
  size_t n = buckets_.size();
  if (d.online_ms.size() != n) d.online_ms.assign(n, {-1, 0});
  while (from_ms < to_ms) {
    int64_t minute = from_ms / kMinuteMs;
    int64_t end = std::min(to_ms, (minute + 1) * kMinuteMs);
    auto& slot = d.online_ms[static_cast<size_t>(minute) % n];
    if (slot.first != minute) slot = {minute, 0};
    slot.second += end - from_ms;
    from_ms = end;
  }
}

void OpsSeries::on_device(const ops::DeviceStatus& status) {
  auto it = devices_.find(status.device);
  if (it == devices_.end()) {
    if (devices_.size() >= options_.max_devices) return;
    Device d;
    d.online = status.online;
    d.since_ms = d.first_seen_ms = status.ts_ms;
    devices_.emplace(status.device, std::move(d));
    return;
  }
  Device& d = it->second;
  if (status.ts_ms < d.since_ms || status.online == d.online) return;
  if (d.online) credit_online(d, d.since_ms, status.ts_ms);
  d.online = status.online;
  d.since_ms = status.ts_ms;
}

std::string OpsSeries::render() {
  drain();
  std::lock_guard lock(mu_);
  return render_locked(clock_.wall_ms());
}

std::string OpsSeries::render_locked(int64_t now_ms) const {
  using Json = nlohmann::json;
  int64_t now_minute = now_ms / kMinuteMs;
  auto n = static_cast<int64_t>(buckets_.size());
  Json minutes = Json::array();
  for (int64_t m = now_minute - n + 1; m <= now_minute; ++m) {
    const Bucket& b = buckets_[static_cast<size_t>(m) % buckets_.size()];
    bool here = b.minute == m;
    uint64_t count = 0;
    if (here)
      for (uint32_t c : b.latency) count += c;
    Json latency = nullptr;
    if (count > 0) {
      latency = {{"count", count},
                 {"p50", quantile_ms(b.latency, count, 0.50)},
                 {"p95", quantile_ms(b.latency, count, 0.95)},
                 {"p99", quantile_ms(b.latency, count, 0.99)}};
    }
    minutes.push_back({{"start_ms", m * kMinuteMs},
                       {"orders", here ? b.orders : 0},
                       {"sales", here ? b.sales : 0},
                       {"failed", here ? b.failed : 0},
                       {"latency_ms", latency}});
  }
  int64_t window_start = (now_minute - n + 1) * kMinuteMs;
  Json availability = Json::array();
  for (const auto& [id, d] : devices_) {
    // The buckets hold the closed online stretches; the open one is added.
    int64_t online = d.online ? now_ms - std::max(d.since_ms, window_start) : 0;
    for (const auto& [minute, ms] : d.online_ms) {
      if (minute * kMinuteMs >= window_start) online += ms;
    }
    int64_t observed = now_ms - std::max(window_start, d.first_seen_ms);
    double share = observed > 0 ? static_cast<double>(online) / static_cast<double>(observed)
                                : (d.online ? 1.0 : 0.0);
    availability.push_back({{"device", id},
                            {"online", d.online},
                            {"share", std::clamp(share, 0.0, 1.0)},
                            {"observed_ms", std::max<int64_t>(0, observed)}});
  }
  uint64_t dropped = 0;
  {
    std::lock_guard pending_lock(pending_mu_);
    dropped = dropped_;
  }
  return Json{{"v", 1},
              {"now_ms", now_ms},
              {"minute_ms", kMinuteMs},
              {"minutes", std::move(minutes)},
              {"availability", std::move(availability)},
              {"dropped_messages", dropped},
              {"bad_messages", bad_messages_}}
      .dump();
}

}  // namespace vend::agent
