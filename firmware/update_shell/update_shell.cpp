#include "update_shell/update_shell.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vend::fw {

namespace {

constexpr const char* kLog = "update";
namespace fs = std::filesystem;

Status write_durably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Error{"update_io", "cannot write " + tmp};
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Error{"update_io", "cannot write " + path};
  }
  int dir = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);  // the rename itself survives a power cut
    ::close(dir);
  }
  return {};
}

Result<BootMarker> read_marker(const std::string& path) {
  std::ifstream in(path);
  if (!in) return BootMarker{};  // no marker: no update ever ran
  std::stringstream text;
  text << in.rdbuf();
  auto marker = parse_boot_marker(text.str());
  if (!marker.ok()) return Error{"bad_marker", path + ": " + marker.error().message};
  return marker;
}

}  // namespace

Result<bool> ledger_integrity_ok(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::string answer;
  if (rc == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr);
    if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
      answer = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  if (rc != SQLITE_OK) return Error{"ledger_integrity", path + ": cannot open read-only"};
  return answer == "ok";
}

Result<std::unique_ptr<UpdateShell>> UpdateShell::create(const UpdateConfig& config,
                                                         const std::string& running_version,
                                                         const std::string& ledger_path,
                                                         const Clock& clock, Logger& log) {
  auto verifier = crypto::UpdateVerifier::load_file(config.public_key_file);
  if (!verifier.ok()) return verifier.error();
  std::error_code ec;
  for (const char* sub : {"artifacts", "debs"}) {
    fs::create_directories(fs::path(config.dir) / sub, ec);
    if (ec) return Error{"update_io", config.dir + "/" + sub + ": " + ec.message()};
  }
  auto marker = read_marker(config.dir + "/marker");
  if (!marker.ok()) return marker.error();
  bool ledger_ok = true;
  if (marker->state == BootMarker::State::kPending && marker->version == running_version) {
    auto checked = ledger_integrity_ok(ledger_path);
    ledger_ok = checked.ok() && *checked;
    if (!ledger_ok) log.error(kLog, "ledger integrity_check failed: " + ledger_path);
  }
  return std::unique_ptr<UpdateShell>(new UpdateShell(config, std::move(verifier).value(),
                                                      running_version, std::move(marker).value(),
                                                      ledger_ok, clock, log));
}

UpdateShell::UpdateShell(const UpdateConfig& config, crypto::UpdateVerifier verifier,
                         const std::string& running_version, BootMarker marker, bool ledger_ok,
                         const Clock& clock, Logger& log)
    : config_(config),
      clock_(clock),
      log_(log),
      core_(clock, std::move(verifier), running_version,
            fs::exists(config.dir + "/debs/" + running_version + ".deb"),
            UpdateOptions{static_cast<uint64_t>(config.max_bytes)}),
      watch_(clock, std::move(marker), running_version, config.health_bound_ms),
      ledger_ok_(ledger_ok) {
  watch_.start(boot_effects_);
}

UpdateShell::~UpdateShell() {
  if (download_thread_.joinable()) download_thread_.join();
}

CommandOutcome UpdateShell::on_command(const proto::UpdateCommand& command) {
  UpdateEffects effects;
  CommandOutcome outcome = core_.on_command(command, effects);
  log_.info(kLog, "update " + command.update_id + " to " + command.version + ": " + outcome.result +
                      (outcome.reason.empty() ? "" : " (" + outcome.reason + ")"));
  run(effects);
  return outcome;
}

void UpdateShell::tick(bool idle, bool online, bool self_test_ok) {
  UpdateEffects effects;
  if (auto finished = take_finished()) core_.on_download_finished(*finished, effects);
  core_.tick(idle, effects);
  run(effects);
  watch_.tick(HealthInputs{online, ledger_ok_, self_test_ok}, boot_effects_);
  run_boot_effects();
}

void UpdateShell::run(UpdateEffects& effects) {
  for (UpdateEffect& effect : effects) {
    if (auto* report = std::get_if<ReportStatus>(&effect)) {
      if (auto s = reporter_(report->status); !s.ok()) {
        log_.warn(kLog, "update_status not recorded: " + s.error().to_string());
      }
    } else if (auto* download = std::get_if<StartDownload>(&effect)) {
      start_download(*download);
    } else if (auto* discard = std::get_if<DiscardArtifact>(&effect)) {
      std::error_code ec;
      fs::remove(artifact_path(discard->sha256), ec);
    } else if (auto* install = std::get_if<RequestInstall>(&effect)) {
      std::string text =
          "update_id=" + install->update_id + "\nversion=" + install->version +
          "\nsha256=" + install->sha256 + "\nartifact=" + artifact_path(install->sha256) +
          "\nhealth_bound_s=" + std::to_string(config_.health_bound_ms / 1000) + "\n";
      if (auto s = write_request("install.request", text); !s.ok()) {
        UpdateEffects more;
        core_.on_install_refused(s.error().message, more);
        run(more);
      }
    }
  }
}

// In order; a report that cannot be recorded yet (a full disk) is tried
// again next tick, and nothing after it runs before it: the marker says
// good only once the outcome is in the outbox.
void UpdateShell::run_boot_effects() {
  while (!boot_effects_.empty()) {
    BootEffect& effect = boot_effects_.front();
    if (auto* report = std::get_if<ReportStatus>(&effect)) {
      if (!reporter_(report->status).ok()) return;
    } else if (std::holds_alternative<MarkGood>(effect)) {
      if (!write_durably(config_.dir + "/marker", "state=good\n").ok()) return;
    } else if (auto* rollback = std::get_if<RequestRollback>(&effect)) {
      log_.error(kLog, "rolling back: " + rollback->reason);
      if (!write_request("rollback.request", "reason=" + rollback->reason + "\n").ok()) return;
    }
    boot_effects_.erase(boot_effects_.begin());
  }
}

void UpdateShell::start_download(const StartDownload& what) {
  if (download_thread_.joinable()) download_thread_.join();  // the last one has finished
  DownloadLimits limits;
  limits.ca_file = config_.ca_file;
  std::string path = artifact_path(what.sha256);
  log_.info(kLog, "downloading " + what.url + " (" + std::to_string(what.size_bytes) + " bytes)");
  download_thread_ = std::thread([this, what, path, limits] {
    DownloadOutcome outcome = download_artifact(what, path, limits);
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = std::move(outcome);
  });
}

std::optional<DownloadOutcome> UpdateShell::take_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<DownloadOutcome> out = std::move(finished_);
  finished_.reset();
  return out;
}

Status UpdateShell::write_request(const std::string& name, const std::string& text) {
  return write_durably(config_.dir + "/" + name, text);
}

std::string UpdateShell::artifact_path(const std::string& sha256) const {
  return config_.dir + "/artifacts/" + sha256 + ".part";
}

}  // namespace vend::fw
