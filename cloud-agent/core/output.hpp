// Private to the agent core: what a step sends. Signed commands and
// rate-limited requests to devices, the ops topics (order events, alerts,
// the retained device and fleet views), subscriptions. Nothing is sent
// here: each message is queued as an effect that AgentCore carries out
// after the step (take_effects). Informational ops messages are dropped
// while the broker is down; a command then fails with not_connected, and
// its caller keeps what it needs to send it again.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "core/core_env.hpp"
#include "devices/device_book.hpp"
#include "ops/ops_feed.hpp"
#include "orders/order_book.hpp"
#include "stock/stock.hpp"
#include "vend/log_limiter.hpp"
#include "vend/ops.hpp"

namespace vend::agent {

class Writes;

class Output : public CoreEnv {
 public:
  Output(const CoreEnv& env, const DeviceBook& devices, const Stock& stock, const OrderBook& orders,
         const Writes& writes);
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // The step's messages, for AgentCore to carry out (and forget here).
  detail::Effects take_effects();

  // ---- to devices ----
  // Queues the signed command, stamped (protocol version, expiry: see
  // stamped()); not_connected while the broker connection is down (the
  // caller keeps what it needs to re-send). A dispense's expires_at_ms is
  // the order's dispatch_expires_at_ms.
  Status publish_command(const DeviceRecord& device, const proto::Command& command,
                         const std::string& order_id = "");
  // The command as sent: v = options.command_version; in v2 a dispense
  // expires at its order's expiry + expiry_skew_ms, any other command at
  // now + command_ttl_ms + expiry_skew_ms (wall clock).
  proto::Command stamped(const proto::Command& command) const;
  // A status_request, at most once per status_request_interval_ms; none
  // while the broker connection is down (the interval is not spent). To an
  // online device it opens a clock-skew round trip (ClockSkew::asked).
  void request_status(DeviceRecord& device);
  // A full snapshot request (at most one per device per second, only while
  // it is online); `prefix` names the reason in its request id ("chk-",
  // "full-", "gap-", "ledger-").
  void request_check_snapshot(DeviceRecord& device, const char* prefix = "chk-");
  // A resend command from the first missing seq, at most once per
  // options.resend_interval_ms per device.
  void request_resend(DeviceRecord& device);
  // Cluster mode: the device's event and status topics, once; and dropped.
  void subscribe_device(const std::string& device);
  void unsubscribe_device(const std::string& device);
  // Every device's topics (one agent serves the whole fleet).
  void subscribe_all();

  // ---- rejected input ----
  // Counts a rejected message; logs it at a bounded rate keyed by (device,
  // reason). `reason` is a short code, `detail` the full story.
  void reject_message(const std::string& device, std::string_view reason,
                      const std::string& detail);
  RateLimitedLog& reject_log() { return reject_log_; }

  // ---- the ops topics ----
  // `from` is "" for a new order.
  void ops_order_event(const OrderRec& rec, const std::string& from);
  void mark_device_dirty(const std::string& device_id);
  // The retained report of the device's last reconciliation.
  void publish_reconcile_report(const std::string& device_id, const std::string& report);
  // Raised once while active; cleared by clear_alert (both are published).
  void raise_alert(const std::string& device, int slot, const std::string& code,
                   const std::string& severity, const std::string& message);
  void clear_alert(const std::string& device, int slot, std::string_view code);
  bool alert_active(const std::string& device, int slot, std::string_view code) const;
  const AlertBook& alerts() const { return alerts_; }
  ops::DeviceStatus device_status(const DeviceRecord& device) const;
  // tick(): the queued order events, the dirty device statuses and the
  // fleet summary, rate-limited.
  void publish_ops_views();

  bool connected = false;                    // the broker connection, as on_connection said
  std::set<std::string> subscribed_devices;  // cluster mode

 private:
  ops::FleetSummary fleet_summary() const;
  void publish_ops(std::string topic, std::string payload, int qos, bool retained);
  void flush_order_events();

  const DeviceBook& devices_;
  const Stock& stock_;
  const OrderBook& orders_;
  const Writes& writes_;
  detail::Effects effects_;  // of the running step
  ViewSchedule views_;       // when each retained view is due (monotonic time)
  AlertBook alerts_;
  OrderEventBatch pending_order_events_;  // since the last tick
  // Lines an outsider can trigger (rejected messages): bounded rate.
  RateLimitedLog reject_log_;
};

}  // namespace vend::agent
