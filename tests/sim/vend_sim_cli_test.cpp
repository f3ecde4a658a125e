// The vend-sim binary: its exit status is the verdict. A deterministic run
// exits 0, and `vend-sim check` over its files exits 1 with the evidence once
// a ledger is corrupted (the live mode runs the same checker at its end).
// Its command line: --version, and --broker, the spelling of before --mqtt.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include "checker/invariant_checker.hpp"
#include "test_support.hpp"
#include "vend/sqlite.hpp"

namespace vend::sim {
namespace {

int run_sim(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {test::binary_path("simulator/vend-sim")};
  argv.insert(argv.end(), args.begin(), args.end());
  test::Child child(argv, log);
  return child.wait(std::chrono::seconds(60));
}

TEST_CASE("vend-sim check exits non-zero on a corrupted ledger, naming the invariant") {
  test::TempDir dir;
  std::string world = dir.file("world");
  REQUIRE(run_sim({"--deterministic", "--seed", "4", "--steps", "1200", "--work-dir", world},
                  dir.file("run.log")) == 0);
  CHECK(run_sim({"check", "--work-dir", world}, dir.file("clean.log")) == 0);

  // Plant: a second dispense of an already dispensed order's token, on
  // another order id (the partial unique index would refuse it: drop it).
  auto db = sql::Database::open(world + "/" + ledger_file_name("vm-002"));
  REQUIRE(db.ok());
  REQUIRE(db->exec("DROP INDEX dispenses_token_spent").ok());
  REQUIRE(db->exec("INSERT INTO dispenses(order_id, slot, token, state, reason, expires_at_ms, "
                   "token_consumed, accepted_ms, updated_ms) SELECT 'planted-' || order_id, slot, "
                   "token, 'DISPENSED', '', 1, 1, 1, 1 FROM dispenses WHERE state = 'DISPENSED' "
                   "LIMIT 1")
              .ok());
  REQUIRE(db->changes() == 1);

  std::string log = dir.file("planted.log");
  CHECK(run_sim({"check", "--work-dir", world}, log) == 1);
  std::string output = test::read_file(log);
  CHECK(output.find("token_spent_twice") != std::string::npos);
  CHECK(output.find("dispense_order_mismatch") != std::string::npos);  // the agent never sold it
}

TEST_CASE("a failing deterministic run prints seed, step, invariant and trace, and exits 1") {
  test::TempDir dir;
  test::write_file(dir.file("plant.json"), R"({"name": "plant", "plant_violation_at_step": 600})");
  std::string log = dir.file("fail.log");
  CHECK(run_sim({"--deterministic", "--seed", "2", "--scenario", dir.file("plant.json")}, log) ==
        1);
  std::string output = test::read_file(log);
  CHECK(output.find("INVARIANT BROKEN, seed 2, step ") != std::string::npos);
  CHECK(output.find("dispense_without_token: vm-001 order ") != std::string::npos);
  CHECK(output.find("last trace lines:") != std::string::npos);
  CHECK(output.find("planted: a consumed token made available again") != std::string::npos);
  CHECK(output.find("reproduce: vend-sim --deterministic --seed 2 --scenario") !=
        std::string::npos);
  CHECK(output.find("seed 2: FAILED after") != std::string::npos);
}

TEST_CASE("vend-sim --version; the broker is --mqtt, --broker works with a one-line warning") {
  test::TempDir dir;
  CHECK(run_sim({"--version"}, dir.file("version.log")) == 0);
  std::string version = test::read_file(dir.file("version.log"));
  CHECK(version.rfind("vend-sim ", 0) == 0);
  CHECK(version.find('\n') == version.size() - 1);

  CHECK(run_sim({"--broker", "tcp://127.0.0.1:1883", "--help"}, dir.file("old.log")) == 0);
  std::string old = test::read_file(dir.file("old.log"));
  CHECK(old.rfind("vend-sim: warning: --broker is deprecated; use --mqtt\n", 0) == 0);
  CHECK(run_sim({"--mqtt", "tcp://127.0.0.1:1883", "--help"}, dir.file("new.log")) == 0);
  CHECK(test::read_file(dir.file("new.log")).find("vend-sim: warning") == std::string::npos);
  // Attaching without a broker names the one spelling.
  CHECK(run_sim({"--agent", "http://127.0.0.1:1"}, dir.file("missing.log")) == 2);
  CHECK(test::read_file(dir.file("missing.log")).find("--mqtt, --agent") != std::string::npos);
}

TEST_CASE("vend-sim on a broker with credentials: the options are checked before anything runs") {
  test::TempDir dir;
  const std::vector<std::string> attach = {"--agent", "http://127.0.0.1:1", "--operator-token",
                                           "t",       "--gateway-secret",   "s"};
  auto run = [&](std::vector<std::string> extra, const std::string& log) {
    extra.insert(extra.end(), attach.begin(), attach.end());
    return run_sim(extra, dir.file(log));
  };
  CHECK(run({"--mqtt", "ssl://127.0.0.1:8883"}, "ssl.log") == 2);
  CHECK(test::read_file(dir.file("ssl.log")).find("ssl:// needs --mqtt-ca-file") !=
        std::string::npos);
  CHECK(run({"--mqtt", "tcp://127.0.0.1:1", "--id-prefix", "vm/+"}, "prefix.log") == 2);
  CHECK(test::read_file(dir.file("prefix.log")).find("--id-prefix 'vm/+'") != std::string::npos);
  CHECK(run({"--launch", "--mqtt-password-dir", dir.path()}, "launch.log") == 2);
  CHECK(test::read_file(dir.file("launch.log")).find("not --launch") != std::string::npos);
  // Secrets on the command line work, with a warning; with their file too is an error.
  CHECK(run_sim({"--operator-token", "t", "--help"}, dir.file("warned.log")) == 0);
  std::string warned = test::read_file(dir.file("warned.log"));
  CHECK(warned.find("--operator-token on the command line is visible in ps; use "
                    "--operator-token-file") != std::string::npos);
  CHECK(run({"--mqtt", "tcp://127.0.0.1:1", "--operator-token-file", "x"}, "both.log") == 2);
  CHECK(test::read_file(dir.file("both.log")).find("exclude each other") != std::string::npos);
}

TEST_CASE("vend-sim reads its secrets from files that only their owner can read") {
  test::TempDir dir;
  test::write_file(dir.file("token"), "operator-token-for-tests-0123456789\n");
  ::chmod(dir.file("token").c_str(), 0644);
  test::write_private_file(dir.file("secret"), "gateway-secret-for-tests-012345\n");
  std::vector<std::string> args = {"--mqtt",
                                   "tcp://127.0.0.1:1",
                                   "--agent",
                                   "http://127.0.0.1:1",
                                   "--operator-token-file",
                                   dir.file("token"),
                                   "--gateway-secret-file",
                                   dir.file("secret"),
                                   "--no-progress"};
  CHECK(run_sim(args, dir.file("mode.log")) == 2);
  std::string log = test::read_file(dir.file("mode.log"));
  CHECK(log.find("--operator-token-file " + dir.file("token") + " has mode 0644") !=
        std::string::npos);
}

}  // namespace
}  // namespace vend::sim
