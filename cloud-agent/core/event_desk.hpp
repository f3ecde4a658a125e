// Private to the agent core: what machines send. Each message is
// authenticated (its device's key, or the new key of a rotation, which then
// replaces the old one), placed in its device's event stream
// (device_rules::decide_intake: its ledger, its seq — next, a duplicate to
// re-ack, beyond a gap to be resent, or a gap the device says it cannot
// fill, or a ledger that went back in time) and applied with its seq in one
// changeset; the device's batched ack never runs ahead of the commits and
// names the mac of the event it covers up to. A retired ledger's late
// dispense result is judged, never dropped unseen. Presence statuses
// (device_rules::decide_presence), minted tokens, faults, snapshots (whole
// or in parts) and their reconciliation (the pure reconcile::reconcile,
// applied here); dispense results go to the OrderDesk.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/core_env.hpp"
#include "core/snapshot_assembler.hpp"
#include "devices/device_book.hpp"
#include "devices/device_rules.hpp"
#include "orders/order_book.hpp"
#include "reconcile/reconcile.hpp"
#include "stock/restocks.hpp"
#include "stock/stock.hpp"

namespace vend::agent {

class DeviceDesk;
class OrderDesk;
class Output;
class Writes;

class EventDesk : public CoreEnv {
 public:
  EventDesk(const CoreEnv& env, DeviceBook& devices, Stock& stock, Restocks& restocks,
            OrderBook& orders, Writes& writes, Output& out, OrderDesk& order_desk,
            DeviceDesk& device_desk)
      : CoreEnv(env),
        devices_(devices),
        stock_(stock),
        restocks_(restocks),
        orders_(orders),
        writes_(writes),
        out_(out),
        order_desk_(order_desk),
        device_desk_(device_desk) {}
  EventDesk(const EventDesk&) = delete;
  EventDesk& operator=(const EventDesk&) = delete;

  // ---- event_desk.cpp ----
  // A message on a device's event or status topic.
  void on_message(const Message& message);
  // After a connect: every device not online is asked for its status
  // `delay_ms` from now, and the unminted restocks are sent again; while
  // some device is still not online, it is asked again every
  // status_request_interval_ms, kPresenceProbeRounds rounds in all (a
  // request refused by its interval, or whose answer was lost).
  void probe_presence_after(int64_t delay_ms);
  // tick(): the probe above, when due.
  void probe_presence();
  // Tickets the due acks wait for (an inline caller waits, between steps).
  std::vector<Ticket> due_ack_tickets() const;
  // The due acks whose events are committed go out; the rest stay due.
  void flush_acks();

 private:
  void on_event(const std::string& topic_device, const std::string& payload);
  // `live`: not a retained copy (its ts_ms is then a clock sample).
  void on_status(const std::string& topic_device, const std::string& payload, bool live);
  // A status the core cannot use: rejected, and the device (if known)
  // asked for its status again.
  void reject_status(const std::string& device, std::string_view reason, const std::string& detail);
  void reject_decommissioned(const DeviceRecord& device, const char* what);
  // True when `mac` is the device's signature of `canonical` under its key,
  // or under its pending new key (which then replaces the old one, durably).
  bool verify_signed(DeviceRecord& device, const std::string& canonical, const std::string& mac);
  // A verified message stamped `device_ts_ms` by the device (`status`: a
  // live online status): a skew sample; asks the device for its status
  // when only a round trip can tell (ClockSkew::wants_round_trip); raises
  // or clears the clock_skew alert.
  void observe_clock(DeviceRecord& device, int64_t device_ts_ms, bool status = false);
  // ---- event_ledgers.cpp ----
  // Where the event (signed `mac`) falls in its stream
  // (device_rules::decide_intake), carried out; true when it is processed
  // now. `what`: its name in logs.
  bool admit_event(DeviceRecord& device, const proto::DeviceEvent& event, const std::string& mac,
                   const std::string& what);
  // Another event under a processed seq (device_rules kDiverged): refused,
  // counted; the device's ledger is marked diverged (nothing more of it is
  // processed) and an ack of what was processed, with its mac, goes out.
  void ledger_diverged(DeviceRecord& device, const proto::DeviceEvent& event,
                       const std::string& what);
  // An event of a retired ledger: a dispense result is judged by the
  // OrderDesk like any (settled, or a dispense contradiction raised), once
  // per mac among the device's last ones; others are refused. Nothing is
  // acknowledged.
  void on_retired_event(DeviceRecord& device, const proto::DeviceEvent& event,
                        const std::string& mac, const std::string& what);
  // `canonical`: the event's signed canonical JSON (kept for snapshots).
  // A snapshot's body is moved out of `event` (its token lists are not copied).
  Status apply_event(DeviceRecord& device, proto::DeviceEvent& event, const std::string& canonical,
                     Changeset& changes);
  // A gap the device's signed word (events_unavailable) says is gone: the
  // seq skips to `gap.skip_to` durably, the seq_gap alert is raised and a
  // full snapshot requested; a resend from its oldest held event when this
  // event is not the next one.
  void skip_seq_gap(DeviceRecord& device, const device_rules::Intake& gap);
  // Retires the device's ledger for `ledger_id` (seq from 1), durably;
  // `replaced` (not the device's first ledger) raises ledger_replaced and
  // asks for a full snapshot.
  void switch_ledger(DeviceRecord& device, const std::string& ledger_id, bool replaced);

  // ---- event_desk.cpp ----
  void want_ack(DeviceRecord& device);
  // The device's batched ack goes out ack_interval_ms from now (if not
  // already due); it joins acks_due_, which flush_acks() walks.
  void schedule_ack(DeviceRecord& device);

  // ---- event_tokens.cpp ----
  Status on_tokens(DeviceRecord& device, const proto::TokensMinted& minted, Changeset& changes);
  // The tokens neither memory nor the log knows.
  Result<std::vector<std::string>> fresh_tokens(const std::vector<std::string>& tokens);
  void on_fault(DeviceRecord& device, const proto::Fault& fault, Changeset& changes);

  // ---- event_snapshots.cpp: snapshots, whole or in parts, reconciled ----
  // A part is held in snapshot_parts_; the whole snapshot (one message, or
  // its last part) is stored, settles overdue dispatches and is reconciled.
  void on_snapshot(DeviceRecord& device, const proto::DeviceEvent& event,
                   const std::string& canonical, proto::Snapshot snapshot, Changeset& changes);
  // A part the assembler dropped: logged (counted when inconsistent) and,
  // the first time for its snapshot, a new full snapshot is asked for.
  void snapshot_part_dropped(DeviceRecord& device, const proto::DeviceEvent& event,
                             const SnapshotAssembler::Added& added);
  void reconcile(DeviceRecord& device, const proto::DeviceEvent& event, proto::Snapshot snapshot,
                 Changeset& changes);
  std::map<int, reconcile::CloudSlot> cloud_view(const DeviceRecord& device,
                                                 const proto::Snapshot& snapshot);
  void apply_reconcile(DeviceRecord& device, const reconcile::SlotChanges& c, Changeset& changes);
  void burn_lost_tokens(const std::string& device, const reconcile::SlotChanges& c,
                        Changeset& changes);
  void apply_alert(const std::string& device, const reconcile::AlertChange& alert);

  DeviceBook& devices_;
  Stock& stock_;
  Restocks& restocks_;
  OrderBook& orders_;
  Writes& writes_;
  Output& out_;
  OrderDesk& order_desk_;
  DeviceDesk& device_desk_;
  std::set<std::string> acks_due_;          // devices with an ack scheduled (DeviceRecord::acks)
  int64_t presence_probe_due_mono_ms_ = 0;  // 0 = none pending (set on connect)
  int presence_probe_round_ = 0;            // rounds done since the connect
  // Snapshots in parts, joined per device (bounded; lost on a restart).
  SnapshotAssembler snapshot_parts_;
};

}  // namespace vend::agent
