// Greedy packing: slot entries in order, each token list cut where the part
// is full. Sizes are upper bounds (no encoding while packing), so a part is
// never over budget whatever the numbers in it.
#include "vend/snapshot_parts.hpp"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace vend::proto {

namespace {

class Packer {
 public:
  Packer(const Snapshot& whole, size_t budget) : whole_(whole), budget_(budget) { open_part(); }

  void add(SlotSnapshot slot) {
    if (!slot.tokens) return add_entry(std::move(slot), 0);
    std::vector<std::string> tokens = std::move(*slot.tokens);
    size_t offset = 0;
    while (true) {
      size_t fit = room_for_tokens();
      if (fit == 0) {  // not even the entry: continue in a new part
        open_part();
        continue;
      }
      size_t n = std::min({tokens.size() - offset, fit, kMaxTokensPerMessage});
      auto first = tokens.begin() + static_cast<ptrdiff_t>(offset);
      SlotSnapshot piece = slot;
      piece.tokens.emplace(std::make_move_iterator(first),
                           std::make_move_iterator(first + static_cast<ptrdiff_t>(n)));
      add_entry(std::move(piece), n);
      offset += n;
      if (offset == tokens.size()) return;
      open_part();  // the part is full (or the list at its limit): the rest goes on
    }
  }

  std::vector<Snapshot> finish() && { return std::move(parts_); }

 private:
  // Tokens that fit beside one more entry in the open part (0: none, or
  // not even the entry).
  size_t room_for_tokens() const {
    if (used_ + kSlotEntryMaxBytes > budget_) return 0;
    return (budget_ - used_ - kSlotEntryMaxBytes) / kTokenEntryBytes;
  }

  void add_entry(SlotSnapshot entry, size_t tokens) {
    if (used_ + kSlotEntryMaxBytes > budget_) open_part();
    used_ += kSlotEntryMaxBytes + tokens * kTokenEntryBytes;
    parts_.back().slots.push_back(std::move(entry));
  }

  void open_part() {
    assert(parts_.empty() || !parts_.back().slots.empty());  // progress: budget fits an entry
    Snapshot part;
    part.request_id = whole_.request_id;
    part.outbox_depth = whole_.outbox_depth;
    parts_.push_back(std::move(part));
    used_ = 0;
  }

  const Snapshot& whole_;
  size_t budget_;
  size_t used_ = 0;
  std::vector<Snapshot> parts_;
};

}  // namespace

Result<std::vector<Snapshot>> split_snapshot(Snapshot whole, size_t budget_bytes) {
  budget_bytes = std::max(budget_bytes, kSlotEntryMaxBytes + kTokenEntryBytes);
  std::vector<SlotSnapshot> slots = std::move(whole.slots);
  Packer packer(whole, budget_bytes);
  for (SlotSnapshot& slot : slots) packer.add(std::move(slot));
  std::vector<Snapshot> parts = std::move(packer).finish();
  if (parts.size() > static_cast<size_t>(kMaxSnapshotParts)) {
    return Error{"snapshot_too_large", "snapshot needs " + std::to_string(parts.size()) +
                                           " parts, more than " +
                                           std::to_string(kMaxSnapshotParts)};
  }
  const int n = static_cast<int>(parts.size());
  for (int i = 0; i < n; ++i) {
    parts[static_cast<size_t>(i)].part = i + 1;
    parts[static_cast<size_t>(i)].parts = n;
  }
  return parts;
}

}  // namespace vend::proto
