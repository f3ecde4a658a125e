// Splitting a snapshot into parts that each fit in one message (protocol.hpp,
// Snapshot: part / parts). The device splits; the agent's SnapshotAssembler
// joins. Pure functions, no I/O.
#pragma once

#include <cstddef>
#include <vector>

#include "vend/protocol.hpp"
#include "vend/result.hpp"

namespace vend::proto {

// Upper bounds on the JSON bytes a snapshot's `slots` array spends: one slot
// entry with an empty token list and its comma (the largest numbers a
// decoder accepts), and one more token in a list.
inline constexpr size_t kSlotEntryMaxBytes = 160;
inline constexpr size_t kTokenEntryBytes = 35;  // "<32 hex>",
// Room left in a part for everything but `slots` (the envelope, ids, mac,
// part / parts, keys): about 450 bytes at most, with a margin.
inline constexpr size_t kSnapshotEnvelopeReserve = 4096;
// What the slot entries of one part may spend.
inline constexpr size_t kSnapshotPartBudget = kMaxPayloadBytes - kSnapshotEnvelopeReserve;

// Splits `whole` (a snapshot of one message, parts == 1) into parts of at
// most `budget_bytes` of slot entries each, so every part encodes under
// kMaxPayloadBytes with the default budget. The slots keep their order; a
// slot whose token list does not fit in what is left of a part (or has more
// than kMaxTokensPerMessage tokens) is continued as the first entry of the
// next part, with the same slot, counts and digest. A snapshot that fits
// comes back as the one part 1 of 1, unchanged.
// REQUIRES: budget_bytes >= kSlotEntryMaxBytes + kTokenEntryBytes.
// Error `snapshot_too_large` when more than kMaxSnapshotParts parts would be
// needed.
Result<std::vector<Snapshot>> split_snapshot(Snapshot whole,
                                             size_t budget_bytes = kSnapshotPartBudget);

}  // namespace vend::proto
