// UpdateCore: accept or refuse an update, follow its download, install when
// idle.
#include "update/update_core.hpp"

#include <utility>

namespace vend::fw {

namespace {
constexpr const char* kType = "update";
}  // namespace

const char* to_string(UpdateCore::Phase phase) {
  switch (phase) {
    case UpdateCore::Phase::kIdle: return "idle";
    case UpdateCore::Phase::kDownloading: return "downloading";
    case UpdateCore::Phase::kWaitingRetry: return "waiting_retry";
    case UpdateCore::Phase::kVerified: return "verified";
    case UpdateCore::Phase::kInstalling: return "installing";
  }
  return "unknown";
}

UpdateCore::UpdateCore(const Clock& clock, crypto::UpdateVerifier verifier,
                       std::string running_version, bool can_roll_back, UpdateOptions options)
    : clock_(clock),
      verifier_(std::move(verifier)),
      running_version_(std::move(running_version)),
      can_roll_back_(can_roll_back),
      options_(options) {}

// The reason an authentic, unexpired command cannot be taken, if any. The
// order matters: a forged signature is named before anything it claims.
std::optional<std::string> UpdateCore::refusal(const proto::UpdateCommand& c) const {
  std::string manifest = crypto::update_manifest(c.version, c.size_bytes, c.sha256);
  if (!verifier_.verify(manifest, c.signature)) return "bad_signature";
  if (proto::compare_versions(c.version, running_version_) <= 0) return "not_newer";
  if (c.size_bytes > options_.max_bytes) return "too_big";
  if (!can_roll_back_) return "no_rollback_package";
  return std::nullopt;
}

CommandOutcome UpdateCore::on_command(const proto::UpdateCommand& c, UpdateEffects& effects) {
  if (past_deadline(clock_.wall_ms(), c.expires_at_ms, 0)) {
    return CommandOutcome{kType, "refused", proto::reason::kExpired};
  }
  if (phase_ != Phase::kIdle) {
    if (c.update_id == current_.update_id) return CommandOutcome{kType, "duplicate", c.update_id};
    return CommandOutcome{kType, "refused", "update_in_progress"};
  }
  if (auto reason = refusal(c)) {
    effects.emplace_back(
        ReportStatus{{c.update_id, proto::UpdateState::kFailed, c.version, *reason}});
    return CommandOutcome{kType, "refused", *reason};
  }
  current_ = c;
  phase_ = Phase::kDownloading;
  attempts_ = 1;
  report(proto::UpdateState::kDownloading, "", effects);
  effects.emplace_back(download());
  return CommandOutcome{kType, "accepted", c.update_id};
}

void UpdateCore::on_download_finished(const DownloadOutcome& outcome, UpdateEffects& effects) {
  if (phase_ != Phase::kDownloading) return;  // a late answer for an update already ended
  switch (outcome.kind) {
    case DownloadOutcome::Kind::kComplete:
      if (outcome.bytes != current_.size_bytes) {
        effects.emplace_back(DiscardArtifact{current_.sha256});
        return fail("size_mismatch", effects);
      }
      if (outcome.sha256 != current_.sha256) {
        effects.emplace_back(DiscardArtifact{current_.sha256});
        return fail("hash_mismatch", effects);
      }
      phase_ = Phase::kVerified;
      report(proto::UpdateState::kVerified, "", effects);
      return;
    case DownloadOutcome::Kind::kCut:
      if (attempts_ >= options_.download_attempts) {
        return fail("download_failed: " + outcome.detail, effects);  // the part is kept to resume
      }
      phase_ = Phase::kWaitingRetry;
      retry_at_ms_ = clock_.monotonic_ms() + options_.retry_delay_ms;
      return;
    case DownloadOutcome::Kind::kRefused:
      effects.emplace_back(DiscardArtifact{current_.sha256});
      return fail("download_refused: " + outcome.detail, effects);
  }
}

void UpdateCore::tick(bool idle, UpdateEffects& effects) {
  if (phase_ == Phase::kWaitingRetry && clock_.monotonic_ms() >= retry_at_ms_) {
    phase_ = Phase::kDownloading;
    ++attempts_;
    effects.emplace_back(download());
    return;
  }
  if (phase_ != Phase::kVerified || !idle) return;
  phase_ = Phase::kInstalling;
  report(proto::UpdateState::kInstalling, "", effects);
  effects.emplace_back(RequestInstall{current_.update_id, current_.version, current_.sha256});
}

void UpdateCore::on_install_refused(const std::string& detail, UpdateEffects& effects) {
  if (phase_ != Phase::kInstalling) return;
  fail("install_request: " + detail, effects);
}

void UpdateCore::report(proto::UpdateState state, const std::string& reason,
                        UpdateEffects& effects) const {
  effects.emplace_back(ReportStatus{{current_.update_id, state, current_.version, reason}});
}

void UpdateCore::fail(const std::string& reason, UpdateEffects& effects) {
  // The reason is free text on the wire: at most kMaxTextLength bytes.
  report(proto::UpdateState::kFailed, reason.substr(0, proto::kMaxTextLength), effects);
  phase_ = Phase::kIdle;
}

StartDownload UpdateCore::download() const {
  return StartDownload{current_.url, current_.size_bytes, current_.sha256};
}

}  // namespace vend::fw
