#include "sim_hal/sim_hal.hpp"

namespace vend::fw {

SimulatedMachine::SimulatedMachine(const Clock& clock, Random& random,
                                   SimulatedMachineOptions options)
    : clock_(clock), random_(random), options_(options) {}

int SimulatedMachine::items(int slot) const {
  auto it = items_.find(slot);
  return it == items_.end() ? 0 : it->second;
}

void SimulatedMachine::set_items(int slot, int count) { items_[slot] = count < 0 ? 0 : count; }

Status SimulatedMachine::start(int slot) {
  if (poll() == MotorState::kRunning) {
    return make_error("motor_busy", "slot " + std::to_string(running_slot_) +
                                        " is still rotating; cannot start slot " +
                                        std::to_string(slot));
  }
  // The jam is decided now, from the seeded source, so a run replays exactly
  // however often poll() is called.
  will_jam_ = random_.chance(options_.jam_probability);
  running_slot_ = slot;
  done_at_ms_ = clock_.monotonic_ms() + options_.motor_run_ms;
  state_ = MotorState::kRunning;
  ++rotations_;
  return {};
}

MotorState SimulatedMachine::poll() {
  if (state_ != MotorState::kRunning || clock_.monotonic_ms() < done_at_ms_) return state_;
  if (will_jam_) {
    // A stalled motor drops nothing; the item stays in the slot.
    state_ = MotorState::kJammed;
    return state_;
  }
  state_ = MotorState::kDone;
  // A full rotation of an empty slot turns the spiral but drops nothing.
  if (items(running_slot_) > 0) {
    --items_[running_slot_];
    dropped_ = true;
  }
  return state_;
}

void SimulatedMachine::power_cut(bool item_dropped) {
  if (state_ == MotorState::kRunning && item_dropped && items(running_slot_) > 0) {
    --items_[running_slot_];
  }
  state_ = MotorState::kIdle;
  dropped_ = false;
}

bool SimulatedMachine::dropped() {
  // The item falls when the rotation ends, whether or not anyone polled the
  // motor in between.
  poll();
  return dropped_;
}

}  // namespace vend::fw
