// DeviceCore: authentication, routing to the parts, presence, restocks and
// snapshots, and the tick that drives the parts in a fixed order.
#include "vend/fw/device_core.hpp"

#include <algorithm>

#include "vend/crypto.hpp"
#include "vend/topics.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
constexpr int64_t kStatusAnswerMs = 1000;  // at most one status_request answered a second
}  // namespace

DeviceCore::DeviceCore(Ledger& ledger, Hal hal, Transport& transport, const Clock& clock,
                       Random& random, Logger& log, CoreOptions options)
    : ledger_(ledger),
      hal_(hal),
      transport_(transport),
      clock_(clock),
      random_(random),
      log_(log),
      options_(options),
      refusals_(ledger, clock, log, stats_),
      storage_(ledger, clock, log),
      sender_(ledger, transport, clock, random, log, options_, refusals_, stats_),
      dispenser_(ledger, hal, clock, log, options_, storage_, sender_, refusals_, stats_) {}

Message DeviceCore::presence(const Identity& identity, bool online, int64_t now_ms) {
  proto::PresenceStatus status{identity.device_id, identity.boot_id, online, now_ms};
  std::string mac = crypto::sign(identity.key, proto::encode_canonical(status));
  return Message{topics::device_status(identity.device_id), proto::encode(status, mac), 1, true};
}

Status DeviceCore::boot() {
  if (auto s = dispenser_.boot(); !s.ok()) return s;
  if (auto s = sender_.boot(); !s.ok()) return s;
  last_snapshot_ms_ = clock_.monotonic_ms();
  return {};
}

void DeviceCore::on_connection(bool connected) {
  if (!connected) {
    sender_.on_connection(false);
    log_.info(kLog, "disconnected; events wait in the outbox");
    return;
  }
  const std::string& id = identity().device_id;
  if (auto s = transport_.subscribe(topics::device_cmd(id), 1); !s.ok()) {
    log_.error(kLog, "subscribe failed: " + s.error().to_string());
  }
  if (auto s = transport_.publish(presence(identity(), true, clock_.wall_ms())); !s.ok()) {
    log_.warn(kLog, "online status not published: " + s.error().to_string());
  } else {
    last_presence_ms_ = clock_.monotonic_ms();
  }
  int64_t jitter = sender_.on_connection(true);
  log_.info(kLog, "connected; draining the outbox in " + std::to_string(jitter) + " ms");
}

CommandOutcome DeviceCore::on_command(std::string_view payload) {
  auto decoded = proto::decode_command(payload);
  if (!decoded.ok()) {
    return refusals_.refuse("", proto::reason::kMalformed, decoded.error().to_string());
  }
  const proto::Command& command = decoded->message;
  std::string type = proto::type_name(command);
  if (proto::command_device(command) != identity().device_id) {
    return refusals_.refuse(type, proto::reason::kWrongDevice,
                            "addressed to '" + proto::command_device(command) + "'");
  }
  if (!crypto::verify(identity().key, decoded->canonical, decoded->mac)) {
    return refusals_.refuse(type, proto::reason::kBadMac, "signature does not verify");
  }
  if (auto refused = check_fresh(command, type)) return *refused;
  return route(command);
}

// After the signature: a signed command is only as good as it is fresh. A
// v1 one carries no expiry (but a dispense), so a captured one could be
// replayed forever: refused unless configured for an old agent. A v2
// dispense's expiry is the Dispenser's (it answers REJECTED expired).
std::optional<CommandOutcome> DeviceCore::check_fresh(const proto::Command& command,
                                                      const std::string& type) {
  if (proto::command_version(command) < 2) {
    if (options_.accept_v1_commands) return std::nullopt;
    return refusals_.refuse(type, "old_version",
                            "v1 command (set core.accept_v1_commands for an agent before v2)");
  }
  if (std::holds_alternative<proto::DispenseCommand>(command)) return std::nullopt;
  int64_t expires_at_ms = proto::command_expires_at_ms(command);
  if (past_deadline(clock_.wall_ms(), expires_at_ms, 0)) {
    return refusals_.refuse(type, proto::reason::kExpired,
                            "expired at " + std::to_string(expires_at_ms) + ", now " +
                                std::to_string(clock_.wall_ms()));
  }
  return std::nullopt;
}

CommandOutcome DeviceCore::route(const proto::Command& command) {
  if (auto* c = std::get_if<proto::DispenseCommand>(&command)) return dispenser_.on_dispense(*c);
  if (auto* c = std::get_if<proto::RestockCommand>(&command)) return handle_restock(*c);
  if (auto* c = std::get_if<proto::SnapshotRequest>(&command)) return handle_snapshot(*c);
  if (auto* c = std::get_if<proto::ResendRequest>(&command)) return sender_.on_resend(*c);
  if (std::holds_alternative<proto::StatusRequest>(command)) return handle_status_request();
  if (auto* c = std::get_if<proto::UpdateCommand>(&command)) {
    if (update_handler_) return update_handler_(*c);
    return refusals_.refuse("update", "unsupported", "this device takes no updates");
  }
  return sender_.on_ack(std::get<proto::Ack>(command));
}

Status DeviceCore::report_event(const proto::EventBody& body) {
  auto seq = ledger_.append_event(body, clock_.wall_ms());
  if (!seq.ok()) {
    storage_.note_error(seq.error());
    return seq.error();
  }
  sender_.mark_dirty();
  return {};
}

void DeviceCore::tick() {
  check_storage();
  dispenser_.tick();
  maybe_periodic_snapshot();
  sender_.check_pressure();
  if (refusals_.report(sender_.under_pressure())) sender_.mark_dirty();
  maybe_republish_presence();
  sender_.drain();
}

void DeviceCore::check_storage() {
  if (!storage_.probe()) return;
  sender_.mark_dirty();
  dispenser_.on_storage_room();
}

void DeviceCore::maybe_republish_presence() {
  if (!sender_.connected() || options_.presence_interval_ms <= 0) return;
  int64_t now = clock_.monotonic_ms();
  if (now - last_presence_ms_ < options_.presence_interval_ms) return;
  if (transport_.publish(presence(identity(), true, clock_.wall_ms())).ok()) {
    last_presence_ms_ = now;
  }
}

CommandOutcome DeviceCore::handle_status_request() {
  int64_t now = clock_.monotonic_ms();
  if (status_answered_ms_ >= 0 && now - status_answered_ms_ < kStatusAnswerMs) {
    return CommandOutcome{"status_request", "duplicate", ""};
  }
  if (auto s = transport_.publish(presence(identity(), true, clock_.wall_ms())); !s.ok()) {
    return CommandOutcome{"status_request", "ignored", s.error().to_string()};
  }
  status_answered_ms_ = now;
  last_presence_ms_ = now;
  return CommandOutcome{"status_request", "done", ""};
}

CommandOutcome DeviceCore::handle_snapshot(const proto::SnapshotRequest& request) {
  int64_t now = clock_.wall_ms();
  while (!recent_requests_.empty() &&
         (recent_requests_.size() >= kRecentRequests || recent_requests_.front().second < now)) {
    recent_requests_.pop_front();
  }
  for (const auto& [id, expires_at_ms] : recent_requests_) {
    if (id == request.request_id) return CommandOutcome{"snapshot_request", "duplicate", id};
  }
  if (sender_.outbox_full()) {
    return refusals_.refuse("snapshot_request", "outbox_full", request.request_id);
  }
  auto seq =
      ledger_.append_snapshot(request.request_id, request.full, hal_.inventory, clock_.wall_ms());
  if (!seq.ok()) {
    storage_.note_error(seq.error());
    return refusals_.refuse("snapshot_request", "storage", seq.error().to_string());
  }
  sender_.mark_dirty();
  if (request.v >= 2) recent_requests_.emplace_back(request.request_id, request.expires_at_ms);
  return CommandOutcome{"snapshot_request", "done", request.request_id};
}

void DeviceCore::maybe_periodic_snapshot() {
  if (options_.snapshot_interval_ms <= 0) return;
  int64_t now = clock_.monotonic_ms();
  if (now - last_snapshot_ms_ < options_.snapshot_interval_ms) return;
  last_snapshot_ms_ = now;
  if (sender_.under_pressure()) return;  // snapshots are the first thing to give way
  if (ledger_.append_snapshot("", false, hal_.inventory, clock_.wall_ms()).ok()) {
    sender_.mark_dirty();
  }
}

CommandOutcome DeviceCore::handle_restock(const proto::RestockCommand& c) {
  if (!dispenser_.has_slot(c.slot)) {
    return refusals_.refuse("restock", proto::reason::kUnknownSlot, c.restock_id);
  }
  int64_t now = clock_.wall_ms();
  if (auto s = ledger_.record_pending_restock(c.restock_id, c.slot, c.count, now); !s.ok()) {
    return refusals_.refuse("restock", "storage", s.error().to_string());
  }
  if (!options_.auto_confirm_restock || hal_.loader == nullptr) {
    log_.info(kLog, "restock " + c.restock_id + " waits for the operator");
    return CommandOutcome{"restock", "pending", ""};
  }
  auto slot = ledger_.slot(c.slot);
  if (!slot.ok() || !slot->has_value()) return refusals_.refuse("restock", "storage", c.restock_id);
  int room = (*slot)->capacity - (*slot)->physical_count;
  int count = std::min(c.count, room);
  if (count <= 0) return CommandOutcome{"restock", "ignored", "slot full"};
  auto minted = ledger_.confirm_restock(c.restock_id, c.slot, count, now, random_);
  if (!minted.ok()) {
    if (minted.error().code == "already_confirmed") {
      return CommandOutcome{"restock", "duplicate", ""};
    }
    return refusals_.refuse("restock", "storage", minted.error().to_string());
  }
  hal_.loader->load_items(c.slot, count);
  sender_.mark_dirty();
  return CommandOutcome{"restock", "done", std::to_string(count)};
}

}  // namespace vend::fw
