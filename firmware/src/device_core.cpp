#include "vend/fw/device_core.hpp"

#include <algorithm>

#include "vend/crypto.hpp"
#include "vend/topics.hpp"

namespace vend::fw {

namespace {

constexpr const char* kLog = "core";

// FNV-1a: a stable per-device jitter, so a fleet reconnecting at once spreads
// its drains out, and the same device always waits the same.
uint64_t stable_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

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
      refusal_log_(clock, log, RateLimitedLog::Options{kRefusalLogIntervalMs, 64}) {}

Message DeviceCore::presence(const Identity& identity, bool online, int64_t now_ms) {
  proto::PresenceStatus status{identity.device_id, identity.boot_id, online, now_ms};
  std::string mac = crypto::sign(identity.key, proto::encode_canonical(status));
  return Message{topics::device_status(identity.device_id), proto::encode(status, mac), 1, true};
}

Status DeviceCore::boot() {
  auto rows = ledger_.slots();
  if (!rows.ok()) return rows.error();
  slots_.clear();
  for (const auto& r : *rows) slots_.push_back(r.slot);

  if (auto s = recover_interrupted(); !s.ok()) {
    // A full disk must not stop the boot (systemd would restart it forever):
    // the recovery is retried once there is room.
    if (!note_storage_error(s.error())) return s;
    recovery_pending_ = true;
  }
  auto accepted = ledger_.dispenses_in(DispenseState::kAccepted);
  if (!accepted.ok()) return accepted.error();
  for (const auto& d : *accepted) queue_.push_back(d.order_id);

  auto acked = ledger_.acked_seq();
  if (!acked.ok()) return acked.error();
  acked_ = sent_upto_ = *acked;
  last_snapshot_ms_ = clock_.monotonic_ms();
  outbox_dirty_ = true;
  return {};
}

void DeviceCore::on_connection(bool connected) {
  connected_ = connected;
  if (!connected) {
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
  auto acked = ledger_.acked_seq();
  if (acked.ok()) acked_ = sent_upto_ = *acked;  // resend what the cloud has not acknowledged
  int64_t jitter =
      options_.reconnect_jitter_max_ms > 0
          ? static_cast<int64_t>(stable_hash(id) %
                                 static_cast<uint64_t>(options_.reconnect_jitter_max_ms + 1))
          : 0;
  drain_after_ms_ = clock_.monotonic_ms() + jitter;
  send_budget_ = 0;
  budget_ms_ = drain_after_ms_;
  outbox_dirty_ = true;
  log_.info(kLog, "connected; draining the outbox in " + std::to_string(jitter) + " ms");
}

CommandOutcome DeviceCore::on_command(std::string_view payload) {
  auto decoded = proto::decode_command(payload);
  if (!decoded.ok()) return refuse("", proto::reason::kMalformed, decoded.error().to_string());
  const proto::Command& command = decoded->message;
  std::string type = proto::type_name(command);
  if (proto::command_device(command) != identity().device_id) {
    return refuse(type, proto::reason::kWrongDevice,
                  "addressed to '" + proto::command_device(command) + "'");
  }
  if (!crypto::verify(identity().key, decoded->canonical, decoded->mac)) {
    return refuse(type, proto::reason::kBadMac, "signature does not verify");
  }
  if (auto* c = std::get_if<proto::DispenseCommand>(&command)) return handle_dispense(*c);
  if (auto* c = std::get_if<proto::RestockCommand>(&command)) return handle_restock(*c);
  if (auto* c = std::get_if<proto::SnapshotRequest>(&command)) return handle_snapshot(*c);
  if (auto* c = std::get_if<proto::ResendRequest>(&command)) return handle_resend(*c);
  if (std::holds_alternative<proto::StatusRequest>(command)) return handle_status_request();
  return handle_ack(std::get<proto::Ack>(command));
}

CommandOutcome DeviceCore::refuse(const std::string& type, const std::string& reason,
                                  const std::string& detail) {
  ++stats_.refused;
  ++refused_unreported_;
  last_refusal_ = reason + ": " + detail;
  // Anyone on the broker can send these: counted always, logged at a bounded rate.
  refusal_log_.log(
      LogLevel::kWarn, kLog, type.empty() ? "command" : type, reason,
      "refused " + (type.empty() ? std::string("command") : type) + " (" + reason + "): " + detail);
  return CommandOutcome{type, "refused", reason};
}

bool DeviceCore::has_slot(int slot) const {
  return std::find(slots_.begin(), slots_.end(), slot) != slots_.end();
}

bool DeviceCore::outbox_full() {
  auto depth = ledger_.outbox_depth();
  return !depth.ok() || *depth >= options_.outbox_max;
}

}  // namespace vend::fw
