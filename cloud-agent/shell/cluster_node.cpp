#include "shell/cluster_node.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

#include "cluster/shard_map.hpp"
#include "vend/prometheus_text.hpp"
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

// A device is served when its shard was loaded at an epoch whose lease is
// still held and valid now (the gate): no step of the core is needed to
// stop serving a shard.
AgentCore::Ownership ClusterNode::ownership_of(Epochs loaded) const {
  auto epochs = std::make_shared<const Epochs>(std::move(loaded));
  return [epochs, gate = gate_, &clock = clock_,
          shard_count = options_.lease.shard_count](const std::string& key) {
    int shard = shard_of(key, shard_count);
    auto it = epochs->find(shard);
    return it != epochs->end() && gate->allows(shard, it->second, clock.monotonic_ms());
  };
}

AgentCore::Ownership ClusterNode::ownership() const {
  std::lock_guard lock(mu_);
  return ownership_of(loaded_);
}

std::shared_ptr<const WriteFence> ClusterNode::fence_of(const Epochs& epochs) const {
  auto fence = std::make_shared<WriteFence>();
  fence->instance = options_.lease.instance_id;
  fence->shard_count = options_.lease.shard_count;
  fence->epochs = epochs;
  return fence;
}

bool ClusterNode::served_here_locked(int shard) const {
  auto loaded = loaded_.find(shard);
  auto granted = granted_.find(shard);
  return loaded != loaded_.end() && granted != granted_.end() && loaded->second == granted->second;
}

size_t ClusterNode::served_count_locked() const {
  size_t n = 0;
  for (const auto& [shard, epoch] : loaded_) n += served_here_locked(shard) ? 1 : 0;
  return n;
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
  record_round(seen, r);
  publish_leases();
  Epochs won;
  {
    std::lock_guard lock(mu_);
    loaded_ = granted_;
    leases_changed_ = false;
    won = loaded_;
  }
  if (Status s = repo_.set_fence(fence_of(won)); !s.ok()) return s;
  log_.info(kLog, "instance " + id + " joined: " + std::to_string(won.size()) + " of " +
                      std::to_string(options_.lease.shard_count) + " shards, " +
                      std::to_string(seen.members.size()) + " member(s)");
  // Renewed from now on, also while the core loads them.
  lease_thread_ = std::thread([this] { lease_loop(); });
  return {};
}

void ClusterNode::start(AgentCore& core) {
  rebuild_thread_ = std::thread([this, &core] { rebuild_loop(core); });
}

// ---- the lease thread: rounds only ----

void ClusterNode::lease_loop() {
  name_this_thread("vend-lease");
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    lease_round();
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(options_.lease.renew_every_ms),
                   [this] { return stopping_; });
  }
}

void ClusterNode::lease_round() {
  if (replaced_) return;
  ClusterView seen;
  RecordingStore store(*store_, seen);
  RoundResult r =
      run_lease_round(keeper_, store, session_, clock_.monotonic_ms(),
                      [this](const std::vector<int>& leaving) { close_shards(leaving); });
  record_round(seen, r);
  if (!r.status.ok()) {
    log_.warn(kLog, "lease round: " + r.status.error().to_string());
    if (r.status.error().code == "conflict") {
      return fail_stop("this instance was replaced by another process with the same id", true);
    }
  }
  if (!r.changes.gained.empty()) {
    std::vector<int> gained;
    for (const Grant& g : r.changes.gained) gained.push_back(g.shard);
    log_.info(kLog, "gained shard(s) " + shard_list(gained));
  }
  publish_leases();
}

void ClusterNode::record_round(const ClusterView& seen, const RoundResult& r) {
  std::lock_guard lock(mu_);
  if (!seen.members.empty()) view_ = seen;  // empty: the heartbeat failed
  if (!r.status.ok()) ++counters_.rounds_failed;
  counters_.shards_gained += static_cast<int64_t>(r.changes.gained.size());
  counters_.shards_lost += static_cast<int64_t>(r.changes.lost.size());
}

// Before a lease is released (or once it is lost): the core stops serving
// it now, without a step; the rebuild thread drops its state later.
void ClusterNode::close_shards(const std::vector<int>& leaving) {
  for (int shard : leaving) gate_->close(shard);
  log_.info(kLog, "stopping shard(s) " + shard_list(leaving));
  std::lock_guard lock(mu_);
  for (int shard : leaving) granted_.erase(shard);
  leases_changed_ = true;
  wake_.notify_all();
}

void ClusterNode::publish_leases() {
  Epochs held;
  for (const Grant& g : keeper_.held()) {
    gate_->open(g.shard, g.epoch, keeper_.valid_until(g.shard).value_or(0));
    held[g.shard] = g.epoch;
  }
  std::lock_guard lock(mu_);
  if (held == granted_) return;
  granted_ = std::move(held);
  leases_changed_ = true;
  wake_.notify_all();
}

void ClusterNode::fail_stop(const std::string& why, bool id_taken) {
  log_.error(kLog, why + ": stopping, so that other instances take the shards");
  gate_->close_all();
  id_taken_ = id_taken;
  replaced_ = true;
}

// ---- the rebuild thread ----

void ClusterNode::rebuild_loop(AgentCore& core) {
  name_this_thread("vend-cluster");
  while (wait_for_work()) {
    if (replaced_) continue;
    if (repo_.has_failed_writes() && !recover_storage(core)) continue;
    if (rebuild_wanted(core)) rebuild(core);
  }
}

// A failed write (a lost connection, a lock or statement timeout): memory
// may hold changes the log lacks, so the core stops changing state (it
// answers "unavailable") until it is rebuilt from what committed, once the
// writer is connected again. Nothing answered was lost: answers wait for
// their commits. False: not yet (the core's queue is full, or the database
// is still away); tried again at the next wake-up.
bool ClusterNode::recover_storage(AgentCore& core) {
  std::optional<bool> failed = core.storage_failed();  // latched before recover()
  if (!failed) return false;
  if (Status s = repo_.recover(); !s.ok()) {
    if (!recovering_) log_.warn(kLog, "storage failed; waiting for it: " + s.error().to_string());
    recovering_ = true;
    return false;
  }
  log_.warn(kLog, "storage is back: rebuilding the core from the database");
  recovering_ = false;
  std::lock_guard lock(mu_);
  ++counters_.storage_recoveries;
  retry_rebuild_ = true;
  return true;
}

// Wakes when the leases change, else once per renew interval (a fenced
// write, a failed rebuild to try again).
bool ClusterNode::wait_for_work() {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, std::chrono::milliseconds(options_.lease.renew_every_ms),
                 [this] { return stopping_ || leases_changed_; });
  leases_changed_ = false;
  return !stopping_;
}

bool ClusterNode::rebuild_wanted(AgentCore& core) {
  {
    std::lock_guard lock(mu_);
    if (granted_ != loaded_ || retry_rebuild_) return true;
  }
  return core.fenced();  // refused (a full queue): false, asked again later
}

// Shards only gained (every loaded shard still held at its epoch, the last
// rebuild good, no write fenced): the gained shards' machines are read and
// added; otherwise the core is rebuilt from the log.
void ClusterNode::rebuild(AgentCore& core) {
  Epochs target;
  std::optional<Epochs> gained;
  {
    std::lock_guard lock(mu_);
    target = granted_;
    if (!retry_rebuild_) gained = gained_only(loaded_, target);
  }
  if (gained && core.fenced()) gained.reset();
  const bool only_gains = gained.has_value();
  auto fence = fence_of(target);
  auto set_fence = [&] {
    if (Status f = repo_.set_fence(fence); !f.ok()) {
      log_.error(kLog, "fence: " + f.error().to_string());
    }
  };
  int64_t t0 = clock_.monotonic_ms();
  Status s = only_gains ? core.gain(ownership_of(target), ownership_of(*gained), set_fence)
                        : core.rebuild(ownership_of(target), set_fence);
  double took_s = static_cast<double>(clock_.monotonic_ms() - t0) / 1000.0;
  std::lock_guard lock(mu_);
  retry_rebuild_ = !s.ok();
  if (!s.ok()) {
    ++counters_.rebuild_failures;
    log_.error(kLog, "rebuild: " + s.error().to_string() + " (tried again in a round)");
    return;
  }
  loaded_ = target;
  ++counters_.rebuilds;
  counters_.last_rebuild_s = took_s;
  log_.info(kLog, "serving " + std::to_string(target.size()) + " shard(s); " +
                      (only_gains ? "gained " + std::to_string(gained->size()) + " loaded in "
                                  : std::string("rebuilt in ")) +
                      std::to_string(static_cast<int64_t>(took_s * 1000)) + " ms");
}

void ClusterNode::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (lease_thread_.joinable()) lease_thread_.join();
  if (rebuild_thread_.joinable()) rebuild_thread_.join();
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
  if (served_here_locked(shard)) return options_.advertise_url;
  if (shard < 0 || static_cast<size_t>(shard) >= view_.leases.size()) return std::nullopt;
  const LeaseRow& lease = view_.leases[static_cast<size_t>(shard)];
  if (!lease.live || lease.owner == options_.lease.instance_id) return std::nullopt;
  auto url = view_.urls.find(lease.owner);
  if (url == view_.urls.end()) return std::nullopt;
  return url->second;
}

std::string ClusterNode::metrics() const {
  constexpr MetricType kCounter = MetricType::kCounter;
  constexpr MetricType kGauge = MetricType::kGauge;
  std::lock_guard lock(mu_);
  PrometheusText text;
  text.scalar("vend_cluster_shards_held", kGauge,
              "Shards this instance serves (lease held, state loaded)", served_count_locked());
  text.scalar("vend_cluster_leases_held", kGauge,
              "Shard leases this instance holds (served once rebuilt)", granted_.size());
  text.scalar("vend_cluster_shards", kGauge, "Shards of the fleet", options_.lease.shard_count);
  text.scalar("vend_cluster_members", kGauge, "Live agent instances", view_.members.size());
  text.scalar("vend_cluster_shards_gained_total", kCounter,
              "Shards this instance took (at start, and from instances that left or died)",
              counters_.shards_gained);
  text.scalar("vend_cluster_shards_lost_total", kCounter,
              "Shards this instance stopped serving (handed over, or its lease lapsed)",
              counters_.shards_lost);
  text.scalar("vend_cluster_rebuilds_total", kCounter,
              "Ownership changes brought into the core: shards gained added, or a full rebuild",
              counters_.rebuilds);
  text.scalar("vend_cluster_rebuild_failures_total", kCounter,
              "Rebuilds that failed (tried again at the next round)", counters_.rebuild_failures);
  text.scalar("vend_cluster_storage_recoveries_total", kCounter,
              "Rebuilds of the core after failed writes (the database came back)",
              counters_.storage_recoveries);
  text.scalar("vend_cluster_lease_rounds_failed_total", kCounter,
              "Lease rounds whose heartbeat, acquire or renew failed", counters_.rounds_failed);
  text.scalar("vend_cluster_last_rebuild_seconds", kGauge, "How long the last rebuild or gain took",
              counters_.last_rebuild_s);
  text.scalar("vend_cluster_fenced_writes_total", kCounter,
              "Writes the database refused because their shard's lease had moved",
              repo_.stats().fenced_writes);
  return text.take();
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
                      {"served_here", served_here_locked(l.shard)}});
  }
  nlohmann::json out = {{"instance", options_.lease.instance_id},
                        {"url", options_.advertise_url},
                        {"shard_count", options_.lease.shard_count},
                        {"shards_held", served_count_locked()},
                        {"members", members},
                        {"shards", shards}};
  return out.dump();
}

}  // namespace vend::agent
