// DeviceBook: the agent's record of every machine it knows -- its keys, the
// seqs and acks of its event stream, presence, clock skew, ledgers and what
// it last reported -- by id (in id order, for deterministic walks), by hash
// (the request path's look-up) and by number (its timers' subject).
// Records are never erased and never move (a decommissioned machine keeps
// its record), so a pointer or reference to one stays valid for the book's
// life. Memory only, no clock reads. Single-threaded (the core's thread).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "deadlines/deadlines.hpp"
#include "devices/device_link.hpp"

namespace vend::agent {

struct DeviceRecord {
  std::string id;
  DeviceKeys keys;  // its key, and a rotation's next one
  int64_t created_ms = 0;
  bool online = false;
  std::string boot_id;  // the session that last said "online"
  int64_t last_seen_ms = 0;
  int64_t decommissioned_ms = 0;          // wall time; 0 = in service
  std::string ledger_id;                  // the device ledger the seqs below count
  std::set<std::string> retired_ledgers;  // replaced ledgers: their events are refused
  AckWindow acks;                         // the current ledger's seqs and batched acks
  int64_t check_requested_mono_ms = 0;    // the last full snapshot request
  int64_t resend_requested_mono_ms = 0;   // the last resend request; 0 = none pending
  int64_t status_requested_mono_ms = 0;   // the last status_request; 0 = none
  ClockSkew clock_skew;                   // from its stamped messages
  TimerSlot reconcile_timer;              // the periodic snapshot request
  TimerSlot restock_timer;                // its restocks sent again after a failed publish
  uint32_t restock_publish_failures = 0;  // in a row (the retry's backoff)
  int64_t restock_failed_mono_ms = 0;     // the last failed restock publish
  uint32_t index = 0;                     // its number in the book (its timers' subject)
  uint64_t outbox_depth = 0;              // from its last snapshot
  int64_t snapshot_at_ms = 0;             // wall time its last snapshot was processed
  std::string last_verdict;               // of its last reconciliation
  std::string last_report;                // JSON of that report ("" = none in memory)
  // The macs of the retired ledgers' late results judged already (bounded).
  std::deque<std::string> late_results_judged;
};

// Non-copyable (records are referred to by address).
class DeviceBook {
 public:
  using Records = std::map<std::string, DeviceRecord, std::less<>>;

  DeviceBook() = default;
  DeviceBook(const DeviceBook&) = delete;
  DeviceBook& operator=(const DeviceBook&) = delete;

  // nullptr if unknown.
  DeviceRecord* find(std::string_view id);
  const DeviceRecord* find(std::string_view id) const;
  bool contains(std::string_view id) const { return find(id) != nullptr; }
  // The record of `id`, created (its id set, numbered next) if new.
  DeviceRecord& add(const std::string& id);
  // The record numbered `index`; nullptr past the last.
  DeviceRecord* at_index(uint32_t index);

  size_t size() const { return records_.size(); }
  // In id order.
  Records::iterator begin() { return records_.begin(); }
  Records::iterator end() { return records_.end(); }
  Records::const_iterator begin() const { return records_.begin(); }
  Records::const_iterator end() const { return records_.end(); }

 private:
  Records records_;
  // The same by hash: a reservation's walk of a thousand-name tree was a
  // dozen cache misses. Map nodes never move, so the pointers stay valid.
  std::unordered_map<std::string_view, DeviceRecord*> by_id_;
  std::vector<DeviceRecord*> by_index_;
};

}  // namespace vend::agent
