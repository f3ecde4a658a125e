// UpdateShell: the imperative shell around UpdateCore and HealthWatch
// (firmware/update/) in the daemon. It carries out their effects: downloads
// on a thread of its own (downloader.hpp), appends update_status reports to
// the ledger's outbox through a Reporter, writes the requests the root
// helper acts on, and the boot marker. Files, all under UpdateConfig::dir:
//
//   artifacts/<sha256>.part   a download, kept across tries and restarts
//   debs/<version>.deb        the packages the helper keeps (the running one
//                             and the one before it: the rollback target)
//   marker                    the boot marker (boot_marker.hpp)
//   install.request           asks the helper to install an artifact
//   rollback.request          asks the helper to reinstall the previous package
//
// A request is written to a temporary name, fsync'd and renamed, so the
// helper (started by a systemd path unit when it appears) sees all of it or
// nothing. The ledger file is opened read-only, once, for its integrity
// check; the update never writes it but through the Reporter (events).
//
// Thread-safety: everything but the download thread runs on the daemon's
// core thread; they meet at one mutex (finished_). Non-copyable.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "update/health_watch.hpp"
#include "update/update_core.hpp"
#include "update_shell/downloader.hpp"
#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/log.hpp"
#include "vend/protocol.hpp"
#include "vend/result.hpp"

namespace vend::fw {

class UpdateShell {
 public:
  // Appends an event to the outbox; ok once it is durable.
  using Reporter = std::function<Status(const proto::EventBody&)>;

  // Reads the update key and the boot marker, creates the directories,
  // checks the ledger's integrity when this boot must prove itself.
  // Errors name the file.
  static Result<std::unique_ptr<UpdateShell>> create(const UpdateConfig& config,
                                                     const std::string& running_version,
                                                     const std::string& ledger_path,
                                                     const Clock& clock, Logger& log);
  ~UpdateShell();
  UpdateShell(const UpdateShell&) = delete;
  UpdateShell& operator=(const UpdateShell&) = delete;

  // Where reports go; set before the first on_command or tick.
  void set_reporter(Reporter reporter) { reporter_ = std::move(reporter); }

  // An authenticated, fresh update command (DeviceCore's update handler).
  CommandOutcome on_command(const proto::UpdateCommand& command);

  // Every tick: `idle` is the machine's (no dispense queued or running, the
  // ledger's work committed); `online` and `self_test_ok` feed the health
  // watch of a new version.
  void tick(bool idle, bool online, bool self_test_ok);

  const UpdateCore& core() const { return core_; }
  bool watching_health() const { return watch_.watching(); }

 private:
  UpdateShell(const UpdateConfig& config, crypto::UpdateVerifier verifier,
              const std::string& running_version, BootMarker marker, bool ledger_ok,
              const Clock& clock, Logger& log);
  void run(UpdateEffects& effects);
  void run_boot_effects();
  void start_download(const StartDownload& what);
  std::optional<DownloadOutcome> take_finished();
  Status write_request(const std::string& name, const std::string& text);
  std::string artifact_path(const std::string& sha256) const;

  UpdateConfig config_;
  const Clock& clock_;
  Logger& log_;
  UpdateCore core_;
  HealthWatch watch_;
  bool ledger_ok_;
  Reporter reporter_;
  BootEffects boot_effects_;  // the watch's, run in order; a failed one is retried next tick
  std::thread download_thread_;
  std::mutex mutex_;
  std::optional<DownloadOutcome> finished_;  // guarded by mutex_
};

// Does `path` (a SQLite ledger) pass PRAGMA integrity_check? Opens it
// read-only; the detail says what failed.
Result<bool> ledger_integrity_ok(const std::string& path);

}  // namespace vend::fw
