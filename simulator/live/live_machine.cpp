#include "live/live_machine.hpp"

#include "vend/topics.hpp"

namespace vend::sim {

namespace {

constexpr size_t kInboundMax = 1024;  // as the firmware daemon
constexpr int64_t kDepthEveryMs = 500;

// Publishes every message once more with probability p (a duplicated
// delivery the cloud must deduplicate). Owner thread only.
class DuplicatingTransport final : public Transport {
 public:
  DuplicatingTransport(Transport& inner, Random& random, double p)
      : inner_(inner), random_(random), p_(p) {}
  void on_message(MessageHandler h) override { inner_.on_message(std::move(h)); }
  void on_connection(ConnectionHandler h) override { inner_.on_connection(std::move(h)); }
  Status connect() override { return inner_.connect(); }
  void disconnect() override { inner_.disconnect(); }
  bool connected() const override { return inner_.connected(); }
  Status publish(const Message& m) override {
    Status s = inner_.publish(m);
    if (s.ok() && p_ > 0 && random_.chance(p_)) (void)inner_.publish(m);
    return s;
  }
  Status subscribe(const std::string& f, int qos) override { return inner_.subscribe(f, qos); }

 private:
  Transport& inner_;
  Random& random_;
  double p_;
};

}  // namespace

LiveMachine::LiveMachine(LiveMachineSetup setup, Logger& log)
    : setup_(std::move(setup)),
      log_(log),
      random_(setup_.seed),
      mechanics_(clock_, random_, setup_.mechanics),
      dup_random_(setup_.seed ^ 0x5eed) {}

LiveMachine::~LiveMachine() {
  if (reconnect_.valid()) reconnect_.wait();
  core_.reset();
  transport_.reset();
  paho_.reset();
}

void LiveMachine::make_transport() {
  PahoOptions po;
  po.server_uri = setup_.broker_url;
  po.client_id = setup_.id;
  if (setup_.mqtt_password) {
    po.username = setup_.id;
    po.password = setup_.mqtt_password;
  }
  if (!setup_.mqtt_ca_file.empty()) po.tls = PahoTlsOptions{setup_.mqtt_ca_file, "", ""};
  po.clean_session = false;
  po.tcp_nodelay = setup_.tcp_nodelay;
  Message will = fw::DeviceCore::presence(ledger_->identity(), false, clock_.wall_ms());
  po.will = Will{will.topic, will.payload, 1, true};
  po.reconnect_min = std::chrono::milliseconds(200);
  po.reconnect_max = std::chrono::milliseconds(3000);
  paho_ = std::make_unique<PahoTransport>(po, log_);
  transport_ = std::make_unique<DuplicatingTransport>(*paho_, random_, setup_.duplicate);
  paho_->on_message([this](const Message& m) { enqueue(m.payload); });
  paho_->on_connection([this](bool up) { enqueue(up); });
}

Status LiveMachine::boot() {
  fw::Identity identity{setup_.id, setup_.key, random_.id128()};
  auto ledger = fw::Ledger::open(setup_.ledger_path, identity, sql::Sync::kNormal);
  if (!ledger.ok()) return ledger.error();
  ledger_.emplace(std::move(ledger).value());
  if (Status s = ledger_->sync_slots(setup_.slots); !s.ok()) return s;
  make_transport();
  core_ = std::make_unique<fw::DeviceCore>(*ledger_, mechanics_.hal(), *transport_, clock_, random_,
                                           log_, setup_.core);
  return core_->boot();
}

Status LiveMachine::load_restock(const std::string& restock_id, int slot, int count) {
  if (!ledger_) return make_error("not_booted", setup_.id + ": load_restock before boot");
  auto minted = ledger_->confirm_restock(restock_id, slot, count, clock_.wall_ms(), random_);
  if (!minted.ok()) return minted.error();
  if (fw::RestockLoader* loader = mechanics_.hal().loader) loader->load_items(slot, count);
  return {};
}

Status LiveMachine::connect_blocking() { return paho_->connect(); }

void LiveMachine::enqueue(const Inbound& item) {
  std::lock_guard lock(mu_);
  int copies = 1;
  if (std::holds_alternative<std::string>(item) && setup_.duplicate > 0 &&
      dup_random_.chance(setup_.duplicate)) {
    copies = 2;
  }
  for (int i = 0; i < copies; ++i) {
    if (inbound_.size() >= kInboundMax) {
      ++dropped_;  // the cloud re-sends; the core dedups by order id
      return;
    }
    inbound_.push_back(item);
  }
}

void LiveMachine::step() {
  int64_t now = clock_.monotonic_ms();
  if (fault_until_ms_ != 0 && now >= fault_until_ms_) heal_fault();
  if (reconnect_.valid() &&
      reconnect_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    Status s = reconnect_.get();
    if (!s.ok()) reconnect_ = std::async(std::launch::async, [this] { return paho_->connect(); });
  }
  if (!core_) return;
  std::deque<Inbound> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(inbound_);
  }
  for (auto& item : batch) {
    if (auto* up = std::get_if<bool>(&item)) {
      online_ = *up;
      core_->on_connection(*up);
    } else {
      core_->on_command(std::get<std::string>(item));
    }
  }
  core_->tick();
  if (now - last_depth_ms_ >= kDepthEveryMs) {
    last_depth_ms_ = now;
    auto depth = ledger_->outbox_depth();
    outbox_depth_ = depth.ok() ? *depth : -1;
  }
}

void LiveMachine::go_offline(int64_t ms) {
  if (!core_ || faulted()) return;
  (void)transport_->publish(fw::DeviceCore::presence(ledger_->identity(), false, clock_.wall_ms()));
  paho_->disconnect();
  online_ = false;
  core_->on_connection(false);
  fault_until_ms_ = clock_.monotonic_ms() + ms;
}

void LiveMachine::crash(int64_t ms) {
  if (!core_ || faulted()) return;
  core_.reset();
  if (reconnect_.valid()) reconnect_.wait();
  transport_.reset();
  paho_.reset();
  ledger_.reset();
  mechanics_.power_cut(random_.chance(0.5));
  online_ = false;
  crashed_ = true;
  {
    std::lock_guard lock(mu_);
    inbound_.clear();
  }
  fault_until_ms_ = clock_.monotonic_ms() + ms;
}

void LiveMachine::heal_fault() {
  fault_until_ms_ = 0;
  if (crashed_) {
    crashed_ = false;
    if (Status s = boot(); !s.ok()) {
      log_.error("sim", setup_.id + ": reboot failed: " + s.error().to_string());
      return;
    }
  }
  reconnect_ = std::async(std::launch::async, [this] { return paho_->connect(); });
}

void LiveMachine::stop() {
  if (reconnect_.valid()) reconnect_.wait();
  if (fault_until_ms_ != 0 && crashed_) return;  // dead machines say nothing
  if (core_ && transport_) {
    (void)transport_->publish(
        fw::DeviceCore::presence(ledger_->identity(), false, clock_.wall_ms()));
  }
  if (paho_) paho_->disconnect();
  online_ = false;
}

}  // namespace vend::sim
