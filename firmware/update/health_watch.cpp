#include "update/health_watch.hpp"

#include <utility>

namespace vend::fw {

namespace {

// Names what failed, for the rollback's reason.
std::string unhealthy(const HealthInputs& h) {
  std::string out;
  auto add = [&out](const char* what) { out += (out.empty() ? "" : ", ") + std::string(what); };
  if (!h.online) add("offline");
  if (!h.ledger_ok) add("ledger integrity_check failed");
  if (!h.self_test_ok) add("self-test failed");
  return out;
}

}  // namespace

HealthWatch::HealthWatch(const Clock& clock, BootMarker marker, std::string running_version,
                         int64_t bound_ms)
    : clock_(clock),
      marker_(std::move(marker)),
      running_version_(std::move(running_version)),
      bound_ms_(bound_ms) {}

void HealthWatch::start(BootEffects& effects) {
  using State = BootMarker::State;
  switch (marker_.state) {
    case State::kPending:
      if (marker_.version != running_version_) return;  // the helper's watchdog owns it
      watching_ = true;
      deadline_ms_ = clock_.monotonic_ms() + bound_ms_;
      return;
    case State::kFailed:
    case State::kRolledBack: {
      auto state = marker_.state == State::kFailed ? proto::UpdateState::kFailed
                                                   : proto::UpdateState::kRolledBack;
      effects.emplace_back(ReportStatus{{marker_.update_id, state, marker_.version,
                                         marker_.reason.substr(0, proto::kMaxTextLength)}});
      effects.emplace_back(MarkGood{});
      return;
    }
    case State::kGood:
    case State::kNone: return;
  }
}

void HealthWatch::tick(const HealthInputs& health, BootEffects& effects) {
  if (!watching_) return;
  if (health.online && health.ledger_ok && health.self_test_ok) {
    watching_ = false;
    effects.emplace_back(
        ReportStatus{{marker_.update_id, proto::UpdateState::kInstalled, marker_.version, ""}});
    effects.emplace_back(MarkGood{});
    return;
  }
  if (clock_.monotonic_ms() < deadline_ms_) return;
  watching_ = false;
  effects.emplace_back(RequestRollback{"not healthy within " + std::to_string(bound_ms_ / 1000) +
                                       " s: " + unhealthy(health)});
}

}  // namespace vend::fw
