#include "shell/cluster_node.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

#include "http/metrics.hpp"
#include "cluster/shard_map.hpp"
#include "vend/thread_name.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "cluster";

// The store, recording what each heartbeat saw (run_lease_round keeps the
// view to itself).
class RecordingStore final : public LeaseStore {
 public:
  RecordingStore(LeaseStore& inner, ClusterView& seen) : inner_(inner), seen_(seen) {}
  Status join(const std::string& i, const std::string& s, int n) override {
    return inner_.join(i, s, n);
  }
  Status advertise(const std::string& i, const std::string& url) override {
    return inner_.advertise(i, url);
  }
  Result<ClusterView> heartbeat(const std::string& i, const std::string& s, int64_t ttl) override {
    auto view = inner_.heartbeat(i, s, ttl);
    if (view) seen_ = *view;
    return view;
  }
  Result<std::vector<Grant>> acquire(const std::string& i, const std::vector<int>& shards,
                                     int64_t lease_ms) override {
    return inner_.acquire(i, shards, lease_ms);
  }
  Result<std::vector<int>> renew(const std::string& i, const std::vector<Grant>& held,
                                 int64_t lease_ms) override {
    return inner_.renew(i, held, lease_ms);
  }
  Status release(const std::string& i, const Grant& g) override { return inner_.release(i, g); }
  Status leave(const std::string& i) override { return inner_.leave(i); }

 private:
  LeaseStore& inner_;
  ClusterView& seen_;
};

std::string shard_list(const std::vector<int>& shards) {
  std::string out;
  for (int s : shards) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

}  // namespace

ClusterNode::ClusterNode(ClusterNodeOptions options, std::unique_ptr<LeaseStore> store,
                         Repository& repo, const Clock& clock, Random& random, Logger& log)
    : options_(std::move(options)),
      store_(std::move(store)),
      repo_(repo),
      clock_(clock),
      log_(log),
      session_(random.id128()),
      keeper_(options_.lease) {}

ClusterNode::~ClusterNode() { stop(); }

AgentCore::Ownership ClusterNode::ownership_of(std::set<int> shards, int shard_count) {
  auto held = std::make_shared<const std::set<int>>(std::move(shards));
  return [held, shard_count](const std::string& key) {
    return held->count(shard_of(key, shard_count)) != 0;
  };
}

AgentCore::Ownership ClusterNode::ownership() const {
  std::lock_guard lock(mu_);
  return ownership_of(held_, options_.lease.shard_count);
}

std::shared_ptr<const WriteFence> ClusterNode::fence_of_held() const {
  auto fence = std::make_shared<WriteFence>();
  fence->instance = options_.lease.instance_id;
  fence->shard_count = options_.lease.shard_count;
  for (const Grant& g : keeper_.held()) fence->epochs[g.shard] = g.epoch;
  return fence;
}

Status ClusterNode::join() {
  const std::string& id = options_.lease.instance_id;
  int64_t deadline = clock_.monotonic_ms() + options_.join_timeout_ms;
  for (bool logged = false;;) {
    Status joined = store_->join(id, session_, options_.lease.shard_count);
    if (joined.ok()) break;
    if (joined.error().code != "conflict" || clock_.monotonic_ms() >= deadline) {
      if (joined.error().code == "conflict") {
        return make_error("conflict", "instance id '" + id +
                                          "' is in use by another live agent (two instances "
                                          "given the same --instance-id?)");
      }
      return joined;
    }
    if (!logged) {
      log_.warn(kLog, "instance id " + id +
                          " still has a live member (a predecessor that died?); waiting for it "
                          "to expire");
      logged = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (Status s = store_->advertise(id, options_.advertise_url); !s.ok()) return s;
  // The first round: what is free and ours now is won at once.
  ClusterView seen;
  RecordingStore store(*store_, seen);
  RoundResult r = run_lease_round(keeper_, store, session_, clock_.monotonic_ms(),
                                  [](const std::vector<int>&) {});
  if (!r.status.ok()) return r.status;
  std::set<int> held;
  for (const Grant& g : keeper_.held()) held.insert(g.shard);
  {
    std::lock_guard lock(mu_);
    view_ = seen;
    held_ = held;
    counters_.shards_gained += static_cast<int64_t>(r.changes.gained.size());
  }
  if (Status s = repo_.set_fence(fence_of_held()); !s.ok()) return s;
  log_.info(kLog, "instance " + id + " joined: " + std::to_string(held.size()) + " of " +
                      std::to_string(options_.lease.shard_count) + " shards, " +
                      std::to_string(seen.members.size()) + " member(s)");
  return {};
}

void ClusterNode::start(AgentCore& core) {
  thread_ = std::thread([this, &core] { loop(core); });
}

void ClusterNode::loop(AgentCore& core) {
  name_this_thread("vend-cluster");
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    lock.unlock();
    round(core);
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.lease.renew_every_ms),
                      [this] { return stopping_; });
  }
}

void ClusterNode::round(AgentCore& core) {
  if (replaced_) return;
  // A failed log (a lost database connection) is fail-stop: holding leases
  // it cannot write under would leave its machines unserved. The process
  // stops (systemd restarts it) and its leases go to the others.
  if (Status h = core.health(); !h.ok() && h.error().message != "not started") {
    log_.error(kLog, "the repository failed (" + h.error().message +
                         "): stopping, so that other instances take the shards");
    core.restrict([](const std::string&) { return false; });
    replaced_ = true;
    return;
  }
  ClusterView seen;
  RecordingStore store(*store_, seen);
  auto stop_serving = [&](const std::vector<int>& leaving) {
    std::set<int> kept;
    {
      std::lock_guard lock(mu_);
      for (int s : leaving) held_.erase(s);
      kept = held_;
    }
    log_.info(kLog, "stopping shard(s) " + shard_list(leaving));
    core.restrict(ownership_of(kept, options_.lease.shard_count));
    rebuild_due_ = true;
  };
  RoundResult r = run_lease_round(keeper_, store, session_, clock_.monotonic_ms(), stop_serving);
  {
    std::lock_guard lock(mu_);
    if (!seen.members.empty()) view_ = seen;  // empty: the heartbeat failed
    if (!r.status.ok()) ++counters_.rounds_failed;
    counters_.shards_gained += static_cast<int64_t>(r.changes.gained.size());
    counters_.shards_lost += static_cast<int64_t>(r.changes.lost.size());
  }
  if (!r.status.ok()) {
    log_.warn(kLog, "lease round: " + r.status.error().to_string());
    if (r.status.error().code == "conflict") {
      log_.error(kLog, "this instance was replaced by another process with the same id: stopping");
      core.restrict([](const std::string&) { return false; });
      id_taken_ = true;
      replaced_ = true;
      return;
    }
  }
  if (!r.changes.gained.empty()) {
    std::vector<int> gained;
    for (const Grant& g : r.changes.gained) gained.push_back(g.shard);
    log_.info(kLog, "gained shard(s) " + shard_list(gained));
  }
  if (!r.changes.gained.empty() || !r.changes.lost.empty() || core.fenced()) rebuild_due_ = true;
  if (rebuild_due_) rebuild(core);
}

void ClusterNode::rebuild(AgentCore& core) {
  std::set<int> held;
  for (const Grant& g : keeper_.held()) held.insert(g.shard);
  auto fence = fence_of_held();
  int64_t t0 = clock_.monotonic_ms();
  Status s = core.rebuild(ownership_of(held, options_.lease.shard_count), [&] {
    if (Status f = repo_.set_fence(fence); !f.ok()) {
      log_.error(kLog, "fence: " + f.error().to_string());
    }
  });
  double took_s = static_cast<double>(clock_.monotonic_ms() - t0) / 1000.0;
  std::lock_guard lock(mu_);
  held_ = held;
  if (!s.ok()) {
    ++counters_.rebuild_failures;
    log_.error(kLog, "rebuild: " + s.error().to_string() + " (tried again next round)");
    return;
  }
  rebuild_due_ = false;
  ++counters_.rebuilds;
  counters_.last_rebuild_s = took_s;
  log_.info(kLog, "serving " + std::to_string(held.size()) + " shard(s); rebuilt in " +
                      std::to_string(static_cast<int64_t>(took_s * 1000)) + " ms");
}

void ClusterNode::stop() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (left_) return;
  left_ = true;
  if (id_taken_) return;  // the id is another process's now
  if (Status s = store_->leave(options_.lease.instance_id); !s.ok()) {
    log_.warn(kLog, "leave: " + s.error().to_string() + " (the leases expire on their own)");
  }
}

std::optional<std::string> ClusterNode::owner_url(const std::string& device) const {
  int shard = shard_of(device, options_.lease.shard_count);
  std::lock_guard lock(mu_);
  if (held_.count(shard) != 0) return options_.advertise_url;
  if (shard < 0 || static_cast<size_t>(shard) >= view_.leases.size()) return std::nullopt;
  const LeaseRow& lease = view_.leases[static_cast<size_t>(shard)];
  if (!lease.live || lease.owner == options_.lease.instance_id) return std::nullopt;
  auto url = view_.urls.find(lease.owner);
  if (url == view_.urls.end()) return std::nullopt;
  return url->second;
}

std::string ClusterNode::metrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  prometheus_scalar(out, "vend_cluster_shards_held", "gauge",
                    "Shards whose lease this instance holds", static_cast<int64_t>(held_.size()));
  prometheus_scalar(out, "vend_cluster_shards", "gauge", "Shards of the fleet",
                    options_.lease.shard_count);
  prometheus_scalar(out, "vend_cluster_members", "gauge", "Live agent instances",
                    static_cast<int64_t>(view_.members.size()));
  prometheus_scalar(out, "vend_cluster_shards_gained_total", "counter",
                    "Shards this instance took (at start, and from instances that left or died)",
                    counters_.shards_gained);
  prometheus_scalar(out, "vend_cluster_shards_lost_total", "counter",
                    "Shards this instance stopped serving (handed over, or its lease lapsed)",
                    counters_.shards_lost);
  prometheus_scalar(out, "vend_cluster_rebuilds_total", "counter",
                    "Rebuilds of the core from the database after an ownership change",
                    counters_.rebuilds);
  prometheus_scalar(out, "vend_cluster_rebuild_failures_total", "counter",
                    "Rebuilds that failed (tried again at the next round)",
                    counters_.rebuild_failures);
  prometheus_scalar(out, "vend_cluster_lease_rounds_failed_total", "counter",
                    "Lease rounds whose heartbeat, acquire or renew failed",
                    counters_.rounds_failed);
  out +=
      "# HELP vend_cluster_last_rebuild_seconds How long the last rebuild took\n"
      "# TYPE vend_cluster_last_rebuild_seconds gauge\nvend_cluster_last_rebuild_seconds " +
      format_double(counters_.last_rebuild_s) + "\n";
  WriterStats w = repo_.stats();
  prometheus_scalar(out, "vend_cluster_fenced_writes_total", "counter",
                    "Writes the database refused because their shard's lease had moved",
                    static_cast<int64_t>(w.fenced_writes));
  return out;
}

std::string ClusterNode::view_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : view_.members) {
    auto url = view_.urls.find(m);
    members.push_back({{"instance", m}, {"url", url == view_.urls.end() ? "" : url->second}});
  }
  nlohmann::json shards = nlohmann::json::array();
  for (const LeaseRow& l : view_.leases) {
    shards.push_back({{"shard", l.shard},
                      {"owner", l.live ? l.owner : ""},
                      {"epoch", l.epoch},
                      {"live", l.live},
                      {"served_here", held_.count(l.shard) != 0}});
  }
  nlohmann::json out = {{"instance", options_.lease.instance_id},
                        {"url", options_.advertise_url},
                        {"shard_count", options_.lease.shard_count},
                        {"shards_held", held_.size()},
                        {"members", members},
                        {"shards", shards}};
  return out.dump();
}

}  // namespace vend::agent
