// UpdateCore: the device's decisions about one firmware update, as a pure
// state machine on an injected clock. It takes inputs (an authenticated
// update command, a finished download, a tick with the machine's idleness, a
// failed install request) and answers with effects as values — start or
// retry a download, discard an artifact, ask for the install, report an
// update_status — which the shell carries out (firmware/update_shell/). It
// reads no file, opens no socket and never blocks.
//
// Promises kept here:
//   - an update starts only for a command that has not expired, whose
//     Ed25519 signature by the update key covers its version, size and hash,
//     whose version is newer than the running one, whose size is within
//     the bound, and only when the running version can be rolled back to;
//   - an artifact is installed only once the downloaded bytes have exactly
//     the command's size and SHA-256;
//   - the install is asked for only while the machine is idle (no dispense
//     queued or running, the ledger's work committed: `idle` of tick());
//   - one update at a time: another update id is refused while one runs, a
//     repeat of the running one is answered `duplicate`.
//
// Thread-safety: none (single-threaded, like DeviceCore). Non-copyable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "vend/clock.hpp"
#include "vend/fw/core_types.hpp"
#include "vend/protocol.hpp"
#include "vend/update_signature.hpp"

namespace vend::fw {

struct UpdateOptions {
  uint64_t max_bytes = 64ull * 1024 * 1024;  // largest artifact accepted (config update.max_bytes)
  int download_attempts = 5;                 // tries of one download, resumed each time
  int64_t retry_delay_ms = 10'000;           // between two tries
};

// ---- Effects: what the shell is to do, in order -------------------------

// Download `size_bytes` from `url` into the artifact of `sha256` (resuming
// what a previous try left), hashing as it goes; then call
// UpdateCore::on_download_finished.
struct StartDownload {
  std::string url;
  uint64_t size_bytes = 0;
  std::string sha256;
  bool operator==(const StartDownload&) const = default;
};
// Delete the artifact of `sha256` (partial or complete).
struct DiscardArtifact {
  std::string sha256;
  bool operator==(const DiscardArtifact&) const = default;
};
// Hand the verified artifact to the installer (the root helper); the daemon
// is restarted by it.
struct RequestInstall {
  std::string update_id;
  std::string version;
  std::string sha256;
  bool operator==(const RequestInstall&) const = default;
};
// Append an update_status event to the ledger's outbox.
struct ReportStatus {
  proto::UpdateStatus status;
  bool operator==(const ReportStatus&) const = default;
};
using UpdateEffect = std::variant<StartDownload, DiscardArtifact, RequestInstall, ReportStatus>;
using UpdateEffects = std::vector<UpdateEffect>;

// What the shell learnt from one download try.
struct DownloadOutcome {
  enum class Kind {
    kComplete,  // every byte arrived; `sha256` is their hash
    kCut,       // the transfer stopped early (connection, server error): worth a retry
    kRefused,   // no retry helps (404, an answer larger than the size, no room)
  };
  Kind kind = Kind::kCut;
  uint64_t bytes = 0;  // bytes of the artifact held after this try
  std::string sha256;  // kComplete: the hash of the whole artifact
  std::string detail;  // why, for kCut and kRefused
};

class UpdateCore {
 public:
  enum class Phase { kIdle, kDownloading, kWaitingRetry, kVerified, kInstalling };

  // `running_version` is this firmware's; `can_roll_back` whether the
  // package of that version is kept for a rollback. References outlive this.
  UpdateCore(const Clock& clock, crypto::UpdateVerifier verifier, std::string running_version,
             bool can_roll_back, UpdateOptions options);
  UpdateCore(const UpdateCore&) = delete;
  UpdateCore& operator=(const UpdateCore&) = delete;

  // An update command that passed the device's MAC and freshness checks.
  // Refusals are outcomes ("refused", reason) with a `failed` report when
  // the command is authentic but cannot be taken.
  CommandOutcome on_command(const proto::UpdateCommand& command, UpdateEffects& effects);

  // The result of the StartDownload last asked for.
  void on_download_finished(const DownloadOutcome& outcome, UpdateEffects& effects);

  // Advances retries and, once the artifact is verified and `idle`, asks
  // for the install. Call every tick.
  void tick(bool idle, UpdateEffects& effects);

  // The installer could not be asked (the request could not be written):
  // the update failed, nothing changed.
  void on_install_refused(const std::string& detail, UpdateEffects& effects);

  Phase phase() const { return phase_; }
  const std::string& running_version() const { return running_version_; }

 private:
  std::optional<std::string> refusal(const proto::UpdateCommand& command) const;
  void report(proto::UpdateState state, const std::string& reason, UpdateEffects& effects) const;
  void fail(const std::string& reason, UpdateEffects& effects);
  StartDownload download() const;

  const Clock& clock_;
  crypto::UpdateVerifier verifier_;
  std::string running_version_;
  bool can_roll_back_;
  UpdateOptions options_;
  Phase phase_ = Phase::kIdle;
  proto::UpdateCommand current_;  // valid unless phase_ == kIdle
  int attempts_ = 0;
  int64_t retry_at_ms_ = 0;
};

const char* to_string(UpdateCore::Phase phase);

}  // namespace vend::fw
