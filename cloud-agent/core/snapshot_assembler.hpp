// SnapshotAssembler: joins the parts of a device snapshot (protocol.hpp,
// Snapshot::part / parts) into the whole one that reconciliation reads.
// Pure and single-threaded: no I/O, no clock, no locks; the agent core owns
// one and feeds it the verified snapshot events of each device in seq order.
// Not copyable.
//
// A snapshot is identified by (boot_id, first seq), its first seq being
// seq - part + 1: the device writes all parts in one transaction with
// consecutive seqs, so nothing else falls between them and parts of one
// snapshot agree on boot_id, parts, request_id and outbox_depth.
//
// Memory is bounded: at most one unfinished snapshot per device (a newer
// one supersedes it), at most limits.max_tokens_per_snapshot tokens in one
// (255 slot entries at most besides), and at most limits.max_tokens_total
// tokens over all devices: past that, the least recently fed other
// unfinished snapshots are dropped (their next part then comes back as an
// orphan with first_drop, so the caller asks that device again).
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "vend/protocol.hpp"

namespace vend::agent {

struct SnapshotAssemblerLimits {
  size_t max_tokens_per_snapshot = 262'144;  // above 255 slots x 1000 tokens
  size_t max_tokens_total = 1'048'576;       // raised to max_tokens_per_snapshot if below
};

class SnapshotAssembler {
 public:
  enum class Outcome {
    kComplete,      // `snapshot` is whole: a one-message snapshot or the last part, in order
    kPending,       // the part is held; more are to come
    kDuplicate,     // a part already held: ignored, nothing changes
    kOrphan,        // its earlier parts are not held (lost in a restart, superseded, evicted,
                    // or one is missing): dropped with the snapshot's other held parts
    kInconsistent,  // it does not fit its snapshot (ids, counts, slot order, seq): dropped
    kTooLarge,      // the snapshot passes max_tokens_per_snapshot: dropped
  };

  struct Added {
    Outcome outcome = Outcome::kPending;
    proto::Snapshot snapshot;  // kComplete: the whole snapshot, part = parts = 1
    uint64_t first_seq = 0;    // of the snapshot this part belongs to
    std::string problem;       // why, for every outcome that drops something
    // The first part of this snapshot to be dropped (kOrphan, kInconsistent,
    // kTooLarge): the caller reports it and, if it wants, asks again. Later
    // parts of a dropped snapshot are kOrphan without it.
    bool first_drop = false;
    bool superseded = false;  // an unfinished snapshot of the device gave way to this one
  };

  explicit SnapshotAssembler(SnapshotAssemblerLimits limits = {});
  SnapshotAssembler(const SnapshotAssembler&) = delete;
  SnapshotAssembler& operator=(const SnapshotAssembler&) = delete;

  // One verified snapshot event of `device` (boot_id and seq from its
  // envelope). REQUIRES: `part` passed decode_event (1 <= part <= parts).
  Added add(const std::string& device, const std::string& boot_id, uint64_t seq,
            proto::Snapshot part);
  // Drops what is held for `device` (e.g. its seq was reset).
  void forget(const std::string& device);

  size_t pending_snapshots() const { return pending_.size(); }
  size_t pending_tokens() const { return tokens_; }
  size_t pending_tokens(const std::string& device) const;

 private:
  struct Id {
    std::string boot_id;
    uint64_t first_seq = 0;
    bool operator==(const Id&) const = default;
  };
  struct Pending {
    Id id;
    proto::Snapshot whole;  // the parts so far, joined
    int received = 0;       // parts 1..received are in `whole`
    size_t tokens = 0;
    std::bitset<proto::kMaxSlot + 1> seen;
    uint64_t fed = 0;  // when it was last fed (for eviction)
  };
  struct Dropped {
    Id id;
    bool report = false;  // its next part is the first the caller hears of the drop
  };

  Added continue_pending(Pending& p, const std::string& device, proto::Snapshot part);
  Added start(const std::string& device, const Id& id, proto::Snapshot part, bool superseded);
  // Joins `part`'s slots into `p`; "" or the problem.
  std::string join(Pending& p, proto::Snapshot& part);
  std::string check_complete(const Pending& p) const;
  Added drop(const std::string& device, Added out, bool first_drop);
  void evict_for(const std::string& device);
  void erase_pending(const std::string& device, bool report);

  SnapshotAssemblerLimits limits_;
  std::map<std::string, Pending> pending_;  // device -> its unfinished snapshot
  std::map<std::string, Dropped> dropped_;  // device -> its last dropped snapshot
  size_t tokens_ = 0;
  uint64_t feeds_ = 0;
};

const char* to_string(SnapshotAssembler::Outcome outcome);

}  // namespace vend::agent
