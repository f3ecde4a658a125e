#include "world/world_agent.hpp"

#include "cluster/shard_map.hpp"
#include "vend/protocol.hpp"
#include "vend/topics.hpp"

namespace vend::sim {

namespace {
constexpr int64_t kRestartDelayMs = 1000;  // systemd's RestartSec
constexpr size_t kPausedInboxMax = 10'000;
}  // namespace

std::string describe_device_message(const Message& m) {
  auto topic = topics::parse_device_topic(m.topic);
  if (!topic.ok()) return "bad topic " + m.topic;
  if (topic->kind == topics::DeviceTopic::Kind::kStatus) {
    auto status = proto::decode_status(m.payload);
    if (!status.ok()) return topic->device + " status undecodable";
    return topic->device + " status " + (status->message.online ? "online " : "offline ") +
           status->message.boot_id.substr(0, 8) + (m.retained ? " (retained)" : "");
  }
  auto event = proto::decode_event(m.payload);
  if (!event.ok()) return topic->device + " evt undecodable";
  std::string what = topic->device + " evt " + std::to_string(event->message.seq) + " " +
                     proto::type_name(event->message.body);
  if (auto* r = std::get_if<proto::DispenseResult>(&event->message.body)) {
    what += std::string(" ") + proto::to_string(r->status) + " " + r->order_id;
  }
  return what;
}

WorldAgent::WorldAgent(std::string db_path, agent::AgentOptions options, InMemoryBus& bus,
                       const Clock& clock, Random& random, Logger& log, Trace& trace,
                       std::optional<InstanceSetup> instance)
    : db_path_(std::move(db_path)),
      options_(std::move(options)),
      bus_(bus),
      clock_(instance ? *instance->clock : clock),
      random_(random),
      log_(log),
      trace_(trace),
      instance_(std::move(instance)) {
  if (instance_) options_.instance_id = instance_->lease.instance_id;
}

WorldAgent::~WorldAgent() {
  flush();
  core_.reset();
  client_.reset();
  repo_.reset();
}

std::string WorldAgent::client_id() const {
  return instance_ ? "vend-agent-" + instance_id() : kAgentClientId;
}

Status WorldAgent::start() { return instance_ ? start_instance() : start_single(); }

Status WorldAgent::start_single() {
  agent::RepositoryOptions ro;
  ro.synchronous = sql::Sync::kOff;  // durability against process death only
  // Writes commit only when the core waits for them or the world flushes:
  // what a crash loses depends on the seed alone.
  ro.manual_commit = true;
  auto repo = agent::Repository::open(db_path_, ro, log_);
  if (!repo.ok()) return repo.error();
  repo_ = std::move(repo).value();
  client_ = bus_.make_client(kAgentClientId);
  runner_ = std::make_unique<agent::CallerRunner>();
  core_ = std::make_unique<agent::AgentCore>(*repo_, *client_, clock_, random_, log_, options_,
                                             runner_.get());
  if (Status s = core_->start(); !s.ok()) return s;
  for (const std::string& filter : {topics::all_device_evt(), topics::all_device_status()}) {
    if (Status s = client_->subscribe(filter, 1); !s.ok()) return s;
  }
  connect_client();
  return {};
}

void WorldAgent::connect_client() {
  client_->on_message([this](const Message& m) {
    if (!core_) return;
    if (paused_) {
      if (inbox_.size() < kPausedInboxMax) inbox_.push_back(m);
      return;
    }
    trace_.add(instance_ ? "agent " + instance_id() + " <- " + describe_device_message(m)
                         : "agent <- " + describe_device_message(m));
    core_->on_message(m);
  });
  client_->on_connection([this](bool up) {
    if (core_) core_->on_connection(up);
  });
  Status connected = client_->connect();
  trace_.add("agent" + (instance_ ? " " + instance_id() : std::string()) + " start" +
             (connected.ok() ? "" : " (offline: " + connected.error().code + ")"));
  flush();
}

// ---- cluster mode: the process, joining ---------------------------------------

void WorldAgent::begin_process() {
  starting_ = true;
  loaded_.clear();
  rebuild_failed_ = false;
  session_ = random_.id128();  // a new process
  keeper_ = std::make_unique<agent::LeaseKeeper>(instance_->lease);
  store_ = std::make_unique<PartitionedLeaseStore>(*instance_->db, instance_id());
}

Status WorldAgent::start_instance() {
  begin_process();
  (void)try_join();
  return {};
}

Status WorldAgent::open_instance_repository() {
  agent::RepositoryOptions ro;
  ro.synchronous = sql::Sync::kOff;
  ro.manual_commit = true;
  auto sqlite = agent::Repository::open_sqlite_backend(instance_->db->path(), ro, log_);
  if (!sqlite.ok()) return sqlite.error();
  auto backend =
      std::make_unique<FencedBackend>(std::move(sqlite).value(), *instance_->db, instance_id());
  repo_ = std::make_unique<agent::Repository>(std::move(backend), ro, log_);
  return {};
}

bool WorldAgent::try_join() {
  const agent::LeaseOptions& lease = instance_->lease;
  next_try_mono_ms_ = clock_.monotonic_ms() + lease.renew_every_ms;
  Status joined = store_->join(instance_id(), session_, lease.shard_count);
  if (joined.ok()) joined = store_->advertise(instance_id(), "sim://" + instance_id());
  if (!joined.ok()) {
    trace_.add("agent " + instance_id() + " join: " + joined.error().code);
    return false;
  }
  agent::RoundResult r = run_lease_round(*keeper_, *store_, session_, clock_.monotonic_ms(),
                                         [](const std::vector<int>&) {});
  Status s = r.status;
  if (s.ok() && !repo_) s = open_instance_repository();
  if (s.ok()) s = repo_->set_fence(fence_of_held());
  std::set<int> held;
  for (const agent::Grant& g : keeper_->held()) held.insert(g.shard);
  if (s.ok()) {
    client_ = bus_.make_client(client_id(), std::nullopt, true);  // clean session
    runner_ = std::make_unique<agent::CallerRunner>();
    core_ = std::make_unique<agent::AgentCore>(*repo_, *client_, clock_, random_, log_, options_,
                                               runner_.get());
    s = core_->start(ownership(held));
    if (s.ok()) loaded_ = held_leases();
  }
  if (!s.ok()) {
    trace_.add("agent " + instance_id() + " start failed: " + s.error().code);
    core_.reset();
    client_.reset();
    return false;
  }
  starting_ = false;
  next_round_mono_ms_ = clock_.monotonic_ms() + lease.renew_every_ms;
  trace_.add("agent " + instance_id() + " joined with " + std::to_string(held.size()) + " shards");
  connect_client();
  return true;
}

// ---- cluster mode: rounds, as ClusterNode::round ------------------------------

agent::AgentCore::Ownership WorldAgent::ownership(std::set<int> shards) const {
  auto held = std::make_shared<const std::set<int>>(std::move(shards));
  int count = instance_->lease.shard_count;
  return [held, count](const std::string& key) {
    return held->count(agent::shard_of(key, count)) != 0;
  };
}

agent::AgentCore::Ownership WorldAgent::ownership(const agent::ShardEpochs& leases) const {
  std::set<int> shards;
  for (const auto& [shard, epoch] : leases) shards.insert(shard);
  return ownership(std::move(shards));
}

agent::ShardEpochs WorldAgent::held_leases() const {
  agent::ShardEpochs held;
  for (const agent::Grant& g : keeper_->held()) held[g.shard] = g.epoch;
  return held;
}

std::shared_ptr<const agent::WriteFence> WorldAgent::fence_of_held() const {
  auto fence = std::make_shared<agent::WriteFence>();
  fence->instance = instance_id();
  fence->shard_count = instance_->lease.shard_count;
  for (const agent::Grant& g : keeper_->held()) fence->epochs[g.shard] = g.epoch;
  return fence;
}

void WorldAgent::lease_round() {
  if (Status h = core_->health(); !h.ok() && h.error().message != "not started") {
    core_->restrict([](const std::string&) { return false; });
    return stop_process("the repository failed (" + h.error().message + ")", true);
  }
  auto stop_serving = [this](const std::vector<int>& leaving) {
    std::set<int> kept;
    for (const agent::Grant& g : keeper_->held()) kept.insert(g.shard);
    for (int s : leaving) kept.erase(s);
    trace_.add("agent " + instance_id() + " stops " + std::to_string(leaving.size()) + " shards");
    core_->restrict(ownership(kept));
    rebuild_due_ = true;
  };
  agent::RoundResult r =
      run_lease_round(*keeper_, *store_, session_, clock_.monotonic_ms(), stop_serving);
  if (!r.status.ok()) {
    trace_.add("agent " + instance_id() + " lease round: " + r.status.error().code);
    if (r.status.error().code == "conflict") {
      core_->restrict([](const std::string&) { return false; });
      return stop_process("replaced by another process with its id", false);
    }
  }
  if (!r.changes.gained.empty()) {
    trace_.add("agent " + instance_id() + " gained " + std::to_string(r.changes.gained.size()) +
               " shards");
  }
  if (!r.changes.gained.empty() || !r.changes.lost.empty() || core_->fenced()) rebuild_due_ = true;
  if (rebuild_due_) start_rebuild();
}

std::optional<agent::ShardEpochs> WorldAgent::gained_only(const agent::ShardEpochs& held) const {
  if (rebuild_failed_ || core_->fenced()) return std::nullopt;
  return agent::gained_only(loaded_, held);
}

void WorldAgent::start_rebuild() {
  if (rebuild_done_mono_ms_ >= 0) return;  // one under way takes the leases held when it ends
  if (instance_->rebuild_ms_per_machine == 0) return rebuild();
  int64_t machines = machines_to_load();
  rebuild_done_mono_ms_ = clock_.monotonic_ms() + machines * instance_->rebuild_ms_per_machine;
  trace_.add("agent " + instance_id() + " rebuilding: " + std::to_string(machines) +
             " machines to load");
}

int64_t WorldAgent::machines_to_load() const {
  agent::ShardEpochs held = held_leases();
  std::optional<agent::ShardEpochs> gained = gained_only(held);
  int64_t machines = 0;
  for (const auto& [shard, epoch] : gained ? *gained : held) {
    auto i = static_cast<size_t>(shard);
    if (i < instance_->machines_per_shard.size()) machines += instance_->machines_per_shard[i];
  }
  return machines;
}

// As ClusterNode::rebuild: shards only gained are read and added (gain),
// anything else rebuilds the core.
void WorldAgent::rebuild() {
  agent::ShardEpochs held = held_leases();
  auto fence = fence_of_held();
  auto set_fence = [&] { (void)repo_->set_fence(fence); };
  std::optional<agent::ShardEpochs> gained = gained_only(held);
  Status s = gained ? core_->gain(ownership(held), ownership(*gained), set_fence)
                    : core_->rebuild(ownership(held), set_fence);
  trace_.add("agent " + instance_id() +
             (gained ? " gained " + std::to_string(gained->size()) + " shards, serving "
                     : std::string(" rebuilt with ")) +
             std::to_string(held.size()) + " shards" + (s.ok() ? "" : ": " + s.error().code));
  rebuild_failed_ = !s.ok();
  if (!s.ok()) return;
  ++rebuilds_;
  rebuild_due_ = false;
  loaded_ = std::move(held);
}

void WorldAgent::stop_process(const std::string& why, bool leave) {
  trace_.add("agent " + instance_id() + " stops: " + why);
  if (leave) (void)store_->leave(instance_id());
  flush();  // the repository's destructor commits what is queued
  bus_.kill_client(client_id());
  core_.reset();
  client_.reset();
  repo_.reset();
  runner_.reset();
  rebuild_due_ = false;
  rebuild_done_mono_ms_ = -1;
  begin_process();  // systemd starts it again
  next_try_mono_ms_ = clock_.monotonic_ms() + kRestartDelayMs;
}

// ---- faults and steps ----------------------------------------------------------

void WorldAgent::crash() {
  if (repo_) repo_->abandon();  // kill -9: what was queued and not committed is lost
  bus_.kill_client(client_id());
  core_.reset();
  client_.reset();
  repo_.reset();
  runner_.reset();  // with the steps the dying core had queued
  starting_ = paused_ = rebuild_due_ = false;
  rebuild_done_mono_ms_ = -1;
  inbox_.clear();
  keeper_.reset();
  trace_.add("agent" + (instance_ ? " " + instance_id() : std::string()) + " crash");
}

void WorldAgent::pause() {
  paused_ = true;
  trace_.add("agent " + instance_id() + " paused");
}

void WorldAgent::resume() {
  paused_ = false;
  trace_.add("agent " + instance_id() + " resumed with " + std::to_string(inbox_.size()) +
             " messages waiting");
  while (!inbox_.empty() && core_) {
    Message m = std::move(inbox_.front());
    inbox_.pop_front();
    trace_.add("agent " + instance_id() + " <- " + describe_device_message(m));
    core_->on_message(m);
  }
  inbox_.clear();
}

void WorldAgent::tick() {
  if (paused_) return;
  if (starting_) {
    if (clock_.monotonic_ms() >= next_try_mono_ms_) (void)try_join();
    return;
  }
  if (!core_) return;
  if (instance_ && clock_.monotonic_ms() >= next_round_mono_ms_) {
    next_round_mono_ms_ = clock_.monotonic_ms() + instance_->lease.renew_every_ms;
    lease_round();
    if (!core_) return;
  }
  if (rebuild_done_mono_ms_ >= 0 && clock_.monotonic_ms() >= rebuild_done_mono_ms_) {
    rebuild_done_mono_ms_ = -1;
    if (rebuild_due_) rebuild();  // a failure is started again by the next round
  }
  core_->tick();
}

Result<agent::Order> WorldAgent::call_order(const agent::OrderCall& start,
                                            const agent::CrashAt& crash_at) {
  return agent::call_order(*runner_, *repo_, start, crash_at);
}

void WorldAgent::flush() {
  if (repo_) repo_->flush();
}

std::optional<uint64_t> WorldAgent::believed_epoch(int shard) const {
  if (!keeper_) return std::nullopt;
  return keeper_->epoch_of(shard, clock_.monotonic_ms());
}

std::string WorldAgent::redirect_for(const std::string& device) const {
  if (!store_ || !store_->last_view()) return "";
  const agent::ClusterView& view = *store_->last_view();
  auto shard = static_cast<size_t>(agent::shard_of(device, instance_->lease.shard_count));
  if (shard >= view.leases.size()) return "";
  const agent::LeaseRow& row = view.leases[shard];
  return row.live && row.owner != instance_id() ? row.owner : "";
}

}  // namespace vend::sim
