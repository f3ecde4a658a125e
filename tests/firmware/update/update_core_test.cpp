// UpdateCore's decisions: which update commands start a download, what a
// download's outcome leads to, and that the install waits for an idle
// machine.
#include "update/update_core.hpp"

#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "vend/crypto.hpp"
#include "vend/update_signature.hpp"

namespace vend::fw {
namespace {

using proto::UpdateState;

struct Rig {
  crypto::UpdateKeyPair key = crypto::generate_update_key();
  ManualClock clock;
  UpdateOptions options;
  UpdateCore core{clock, crypto::UpdateVerifier::from_hex(key.public_hex).value(), "0.1.0",
                  /*can_roll_back=*/true, options};
  UpdateEffects effects;

  proto::UpdateCommand command(const std::string& version = "0.2.0", uint64_t size = 1000,
                               const std::string& sha = std::string(64, 'a')) {
    proto::UpdateCommand c;
    c.device = "vm-1";
    c.update_id = "upd-" + version;
    c.version = version;
    c.url = "http://127.0.0.1:8000/fw.deb";
    c.size_bytes = size;
    c.sha256 = sha;
    c.signature =
        crypto::sign_update(key.private_hex, crypto::update_manifest(version, size, sha)).value();
    c.expires_at_ms = clock.wall_ms() + 30'000;
    return c;
  }

  CommandOutcome send(const proto::UpdateCommand& c) {
    effects.clear();
    return core.on_command(c, effects);
  }
};

// The update states reported in `effects`, in order.
std::vector<UpdateState> reported(const UpdateEffects& effects) {
  std::vector<UpdateState> out;
  for (const UpdateEffect& e : effects) {
    if (const auto* r = std::get_if<ReportStatus>(&e)) out.push_back(r->status.state);
  }
  return out;
}

std::string failure_reason(const UpdateEffects& effects) {
  for (const UpdateEffect& e : effects) {
    if (const auto* r = std::get_if<ReportStatus>(&e)) {
      if (r->status.state == UpdateState::kFailed) return r->status.reason;
    }
  }
  return "";
}

template <typename T>
int count(const UpdateEffects& effects) {
  int n = 0;
  for (const UpdateEffect& e : effects) n += std::holds_alternative<T>(e) ? 1 : 0;
  return n;
}

DownloadOutcome complete(uint64_t bytes, const std::string& sha) {
  return DownloadOutcome{DownloadOutcome::Kind::kComplete, bytes, sha, ""};
}

TEST_CASE("a signed, newer, fresh update starts a download and reports downloading") {
  Rig rig;
  CommandOutcome o = rig.send(rig.command());
  CHECK(o.result == "accepted");
  CHECK(reported(rig.effects) == std::vector{UpdateState::kDownloading});
  REQUIRE(count<StartDownload>(rig.effects) == 1);
  CHECK(std::get<StartDownload>(rig.effects.back()) ==
        StartDownload{"http://127.0.0.1:8000/fw.deb", 1000, std::string(64, 'a')});
  CHECK(rig.core.phase() == UpdateCore::Phase::kDownloading);
}

TEST_CASE("a bad signature is refused and reported, nothing downloaded") {
  Rig rig;
  proto::UpdateCommand c = rig.command();
  c.size_bytes = 999;  // the signature covered 1000
  CommandOutcome o = rig.send(c);
  CHECK(o.result == "refused");
  CHECK(o.reason == "bad_signature");
  CHECK(failure_reason(rig.effects) == "bad_signature");
  CHECK(count<StartDownload>(rig.effects) == 0);
  // Signed by a device-like key that is not the update key.
  Rig other;
  proto::UpdateCommand forged = other.command();
  CHECK(rig.send(forged).reason == "bad_signature");
  CHECK(rig.core.phase() == UpdateCore::Phase::kIdle);
}

TEST_CASE("a downgrade or the running version is refused") {
  Rig rig;
  CHECK(rig.send(rig.command("0.1.0")).reason == "not_newer");
  CHECK(rig.send(rig.command("0.0.9")).reason == "not_newer");
  CHECK(failure_reason(rig.effects) == "not_newer");
  CHECK(rig.send(rig.command("0.1.1")).result == "accepted");
}

TEST_CASE("an artifact larger than the device's bound is refused") {
  Rig rig;
  CommandOutcome o = rig.send(rig.command("0.2.0", rig.options.max_bytes + 1));
  CHECK(o.reason == "too_big");
  CHECK(count<StartDownload>(rig.effects) == 0);
}

TEST_CASE("an expired update command is refused without a report") {
  Rig rig;
  proto::UpdateCommand c = rig.command();
  rig.clock.advance(30'001);
  CommandOutcome o = rig.send(c);
  CHECK(o.reason == proto::reason::kExpired);
  CHECK(rig.effects.empty());
}

TEST_CASE("without the running version's package to roll back to, no update starts") {
  Rig rig;
  UpdateCore core{rig.clock, crypto::UpdateVerifier::from_hex(rig.key.public_hex).value(), "0.1.0",
                  /*can_roll_back=*/false, rig.options};
  UpdateEffects effects;
  CHECK(core.on_command(rig.command(), effects).reason == "no_rollback_package");
}

TEST_CASE("one update at a time: a repeat is a duplicate, another is refused") {
  Rig rig;
  proto::UpdateCommand c = rig.command();
  REQUIRE(rig.send(c).result == "accepted");
  CHECK(rig.send(c).result == "duplicate");
  CHECK(rig.effects.empty());
  CHECK(rig.send(rig.command("0.3.0")).reason == "update_in_progress");
}

TEST_CASE("a wrong hash or size discards the artifact and fails the update") {
  Rig rig;
  rig.send(rig.command());
  UpdateEffects effects;
  rig.core.on_download_finished(complete(1000, std::string(64, 'b')), effects);
  CHECK(failure_reason(effects) == "hash_mismatch");
  CHECK(count<DiscardArtifact>(effects) == 1);
  CHECK(rig.core.phase() == UpdateCore::Phase::kIdle);

  rig.send(rig.command());
  effects.clear();
  rig.core.on_download_finished(complete(999, std::string(64, 'a')), effects);
  CHECK(failure_reason(effects) == "size_mismatch");
}

TEST_CASE("a verified artifact waits for an idle machine, then is installed once") {
  Rig rig;
  rig.send(rig.command());
  UpdateEffects effects;
  rig.core.on_download_finished(complete(1000, std::string(64, 'a')), effects);
  CHECK(reported(effects) == std::vector{UpdateState::kVerified});
  effects.clear();
  for (int i = 0; i < 10; ++i) rig.core.tick(/*idle=*/false, effects);  // a dispense runs
  CHECK(effects.empty());
  CHECK(rig.core.phase() == UpdateCore::Phase::kVerified);
  rig.core.tick(/*idle=*/true, effects);
  CHECK(reported(effects) == std::vector{UpdateState::kInstalling});
  REQUIRE(count<RequestInstall>(effects) == 1);
  CHECK(std::get<RequestInstall>(effects.back()) ==
        RequestInstall{"upd-0.2.0", "0.2.0", std::string(64, 'a')});
  effects.clear();
  rig.core.tick(/*idle=*/true, effects);
  CHECK(effects.empty());
}

TEST_CASE("a cut download is resumed after a delay, up to the attempts bound") {
  Rig rig;
  rig.send(rig.command());
  UpdateEffects effects;
  for (int attempt = 1; attempt < rig.options.download_attempts; ++attempt) {
    effects.clear();
    rig.core.on_download_finished({DownloadOutcome::Kind::kCut, 400, "", "connection reset"},
                                  effects);
    CHECK(effects.empty());
    rig.core.tick(true, effects);
    CHECK(effects.empty());  // not before the delay
    rig.clock.advance(rig.options.retry_delay_ms);
    rig.core.tick(true, effects);
    CHECK(count<StartDownload>(effects) == 1);
  }
  effects.clear();
  rig.core.on_download_finished({DownloadOutcome::Kind::kCut, 800, "", "connection reset"},
                                effects);
  CHECK(failure_reason(effects) == "download_failed: connection reset");
  CHECK(count<DiscardArtifact>(effects) == 0);  // kept: a later update of it resumes
}

TEST_CASE("a refused download (404, too large) discards and fails at once") {
  Rig rig;
  rig.send(rig.command());
  UpdateEffects effects;
  rig.core.on_download_finished({DownloadOutcome::Kind::kRefused, 0, "", "HTTP 404"}, effects);
  CHECK(failure_reason(effects) == "download_refused: HTTP 404");
  CHECK(count<DiscardArtifact>(effects) == 1);
}

TEST_CASE("an install request that cannot be written fails the update") {
  Rig rig;
  rig.send(rig.command());
  UpdateEffects effects;
  rig.core.on_download_finished(complete(1000, std::string(64, 'a')), effects);
  rig.core.tick(true, effects);
  effects.clear();
  rig.core.on_install_refused("disk full", effects);
  CHECK(failure_reason(effects) == "install_request: disk full");
  CHECK(rig.core.phase() == UpdateCore::Phase::kIdle);
}

}  // namespace
}  // namespace vend::fw
