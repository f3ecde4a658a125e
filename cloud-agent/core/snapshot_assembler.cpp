// SnapshotAssembler. Parts are joined as they come (no list of parts is
// kept), so a part costs its tokens once and the whole snapshot is ready the
// moment the last part is joined.
#include "core/snapshot_assembler.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace vend::agent {

using Outcome = SnapshotAssembler::Outcome;

namespace {

size_t token_count(const proto::SlotSnapshot& s) { return s.tokens ? s.tokens->size() : 0; }

bool same_slot_state(const proto::SlotSnapshot& a, const proto::SlotSnapshot& b) {
  return a.slot == b.slot && a.physical_count == b.physical_count &&
         a.available_tokens == b.available_tokens && a.digest == b.digest;
}

}  // namespace

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kComplete: return "complete";
    case Outcome::kPending: return "pending";
    case Outcome::kDuplicate: return "duplicate";
    case Outcome::kOrphan: return "orphan";
    case Outcome::kInconsistent: return "inconsistent";
    case Outcome::kTooLarge: return "too_large";
  }
  return "?";
}

SnapshotAssembler::SnapshotAssembler(SnapshotAssemblerLimits limits) : limits_(limits) {
  limits_.max_tokens_total = std::max(limits_.max_tokens_total, limits_.max_tokens_per_snapshot);
}

size_t SnapshotAssembler::pending_tokens(const std::string& device) const {
  auto it = pending_.find(device);
  return it == pending_.end() ? 0 : it->second.tokens;
}

void SnapshotAssembler::forget(const std::string& device) {
  erase_pending(device, false);
  dropped_.erase(device);
}

void SnapshotAssembler::erase_pending(const std::string& device, bool report) {
  auto it = pending_.find(device);
  if (it == pending_.end()) return;
  tokens_ -= it->second.tokens;
  dropped_[device] = Dropped{it->second.id, report};
  pending_.erase(it);
}

SnapshotAssembler::Added SnapshotAssembler::add(const std::string& device,
                                                const std::string& boot_id, uint64_t seq,
                                                proto::Snapshot part) {
  auto it = pending_.find(device);
  if (part.parts <= 1) {  // a whole snapshot in one message: newer than anything held
    bool superseded = it != pending_.end();
    erase_pending(device, false);
    Added out{Outcome::kComplete, std::move(part), seq, "", false, superseded};
    return out;
  }
  if (seq < static_cast<uint64_t>(part.part)) {
    return drop(device,
                {Outcome::kInconsistent,
                 {},
                 0,
                 "part " + std::to_string(part.part) + " has seq " + std::to_string(seq)},
                true);
  }
  const Id id{boot_id, seq - static_cast<uint64_t>(part.part) + 1};
  if (it != pending_.end() && it->second.id == id) {
    return continue_pending(it->second, device, std::move(part));
  }
  auto gone = dropped_.find(device);
  if (gone != dropped_.end() && gone->second.id == id) {
    bool report = std::exchange(gone->second.report, false);
    return {Outcome::kOrphan, {}, id.first_seq, "its snapshot was dropped earlier", report, false};
  }
  if (part.part == 1) return start(device, id, std::move(part), it != pending_.end());
  dropped_[device] = Dropped{id, false};
  return {Outcome::kOrphan,
          {},
          id.first_seq,
          "part " + std::to_string(part.part) + " of " + std::to_string(part.parts) +
              " without the parts before it (held by an agent that restarted?)",
          true,
          false};
}

SnapshotAssembler::Added SnapshotAssembler::start(const std::string& device, const Id& id,
                                                  proto::Snapshot part, bool superseded) {
  erase_pending(device, false);
  Pending& p = pending_[device];
  p.id = id;
  p.whole.request_id = part.request_id;
  p.whole.outbox_depth = part.outbox_depth;
  p.whole.parts = part.parts;
  Added out = continue_pending(p, device, std::move(part));
  out.superseded = superseded;
  return out;
}

SnapshotAssembler::Added SnapshotAssembler::continue_pending(Pending& p, const std::string& device,
                                                             proto::Snapshot part) {
  const uint64_t first = p.id.first_seq;
  if (part.part <= p.received) {
    return {Outcome::kDuplicate,
            {},
            first,
            "part " + std::to_string(part.part) + " again",
            false,
            false};
  }
  std::string problem;
  if (part.part != p.received + 1) {
    problem = "part " + std::to_string(part.part) + " after part " + std::to_string(p.received) +
              ": a part is missing";
    return drop(device, {Outcome::kOrphan, {}, first, problem}, true);
  }
  if (part.parts != p.whole.parts || part.request_id != p.whole.request_id ||
      part.outbox_depth != p.whole.outbox_depth) {
    problem = "part " + std::to_string(part.part) +
              " disagrees with part 1 on parts, request_id or outbox_depth";
    return drop(device, {Outcome::kInconsistent, {}, first, problem}, true);
  }
  if (problem = join(p, part); !problem.empty()) {
    Outcome kind =
        p.tokens > limits_.max_tokens_per_snapshot ? Outcome::kTooLarge : Outcome::kInconsistent;
    return drop(device, {kind, {}, first, problem}, true);
  }
  p.received = part.part;
  p.fed = ++feeds_;
  if (p.received < p.whole.parts) {
    evict_for(device);
    return {Outcome::kPending, {}, first, "", false, false};
  }
  if (problem = check_complete(p); !problem.empty()) {
    return drop(device, {Outcome::kInconsistent, {}, first, problem}, true);
  }
  Added out{Outcome::kComplete, std::move(p.whole), first, "", false, false};
  out.snapshot.part = 1;
  out.snapshot.parts = 1;
  tokens_ -= p.tokens;
  pending_.erase(device);
  return out;
}

std::string SnapshotAssembler::join(Pending& p, proto::Snapshot& part) {
  for (size_t i = 0; i < part.slots.size(); ++i) {
    proto::SlotSnapshot& entry = part.slots[i];
    const size_t n = token_count(entry);
    p.tokens += n;
    tokens_ += n;
    if (p.tokens > limits_.max_tokens_per_snapshot) {
      return "more than " + std::to_string(limits_.max_tokens_per_snapshot) + " tokens";
    }
    const std::string where = "part " + std::to_string(part.part) + " slots[" + std::to_string(i) +
                              "] (slot " + std::to_string(entry.slot) + ")";
    if (!p.seen.test(static_cast<size_t>(entry.slot))) {
      p.seen.set(static_cast<size_t>(entry.slot));
      p.whole.slots.push_back(std::move(entry));
      continue;
    }
    proto::SlotSnapshot& last = p.whole.slots.back();
    if (i != 0 || last.slot != entry.slot) return where + " repeats an earlier slot";
    if (!same_slot_state(last, entry) || !last.tokens || !entry.tokens) {
      return where + " continues the slot with other counts, digest or no token list";
    }
    last.tokens->insert(last.tokens->end(), std::make_move_iterator(entry.tokens->begin()),
                        std::make_move_iterator(entry.tokens->end()));
  }
  return "";
}

std::string SnapshotAssembler::check_complete(const Pending& p) const {
  for (const proto::SlotSnapshot& s : p.whole.slots) {
    if (s.tokens && s.tokens->size() != static_cast<size_t>(s.available_tokens)) {
      return "slot " + std::to_string(s.slot) + " has " + std::to_string(s.tokens->size()) +
             " tokens in its parts, " + std::to_string(s.available_tokens) + " available";
    }
  }
  return "";
}

SnapshotAssembler::Added SnapshotAssembler::drop(const std::string& device, Added out,
                                                 bool first_drop) {
  erase_pending(device, false);  // its later parts are then orphans without first_drop
  out.first_drop = first_drop;
  return out;
}

// Over the total: the least recently fed unfinished snapshots of other
// devices give way (their devices are asked again on their next part).
void SnapshotAssembler::evict_for(const std::string& device) {
  while (tokens_ > limits_.max_tokens_total) {
    auto victim = pending_.end();
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->first == device) continue;
      if (victim == pending_.end() || it->second.fed < victim->second.fed) victim = it;
    }
    if (victim == pending_.end()) return;  // only this one: within max_tokens_per_snapshot
    erase_pending(victim->first, true);
  }
}

}  // namespace vend::agent
