// Deadlines (deadlines.hpp). Payload layout: the sequence number in bits
// 36..63, the kind in 32..35, the subject in 0..31. The wheel fires timers of
// one deadline in payload order, so the sequence number on top keeps them in the
// order they were scheduled (as the counter payloads before). It wraps past
// 2^28 - 1, skipping 0: a stale timer in the same advance() would have to be
// 2^28 schedules old to be mistaken for its slot's.
#include "deadlines/deadlines.hpp"

namespace vend::agent {

namespace {
constexpr uint32_t kSeqMask = (uint32_t{1} << 28) - 1;
}  // namespace

Deadlines::Deadlines(int64_t start_ms, int64_t tick_ms) : wheel_(start_ms, tick_ms) {}

uint64_t Deadlines::pack(TimerKind kind, uint32_t seq, uint32_t subject) {
  return (static_cast<uint64_t>(seq & kSeqMask) << 36) | (static_cast<uint64_t>(kind) << 32) |
         subject;
}

FiredTimer Deadlines::unpack(uint64_t payload) {
  return FiredTimer{static_cast<TimerKind>((payload >> 32) & 0xF), static_cast<uint32_t>(payload),
                    static_cast<uint32_t>(payload >> 36) & kSeqMask};
}

void Deadlines::schedule(TimerSlot& slot, TimerKind kind, uint32_t subject, int64_t at_ms) {
  cancel(slot);
  uint32_t seq = next_seq_;
  next_seq_ = next_seq_ == kSeqMask ? 1 : next_seq_ + 1;
  slot.seq = seq;
  slot.id = wheel_.schedule(at_ms, pack(kind, seq, subject));
}

void Deadlines::cancel(TimerSlot& slot) {
  if (!slot.pending()) return;
  wheel_.cancel(slot.id);  // false when it already fell due: take() then refuses it
  slot = TimerSlot{};
}

std::vector<FiredTimer> Deadlines::advance(int64_t now_ms) {
  due_.clear();
  wheel_.advance(now_ms, [this](uint64_t payload, int64_t) { due_.push_back(unpack(payload)); });
  return due_;
}

bool Deadlines::take(TimerSlot& slot, const FiredTimer& fired) {
  if (!slot.pending() || slot.seq != fired.seq) return false;
  slot = TimerSlot{};
  return true;
}

}  // namespace vend::agent
