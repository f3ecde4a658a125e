// The real vend-firmware binary with hal "gpio" against a real mosquitto, on
// fake GPIO lines: libgpiod's calls come from fake_gpiod (LD_PRELOAD), whose
// line levels live in a file this test maps too. A dispense drives the motor
// line and sees the drop; a kill -9 of the daemon mid-rotation leaves the
// motor line off within milliseconds (the motor guard holds it) and the
// restart reports the order UNCERTAIN; a killed guard makes the daemon exit.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "firmware_process_rig.hpp"
#include "gpio/timed_motor.hpp"
#include "test_support.hpp"

namespace vend::fw {
namespace {

using namespace process_rig;

constexpr int kMotorLine = 5;
constexpr int kSensorLine = 9;
constexpr size_t kChipLines = 1024;  // fake_gpiod's
// How late the motor line may go off after the daemon's SIGKILL (ARM test
// binaries run under qemu-user).
#if defined(__arm__) || defined(__aarch64__)
constexpr int64_t kLateNs = 500'000'000;
#else
constexpr int64_t kLateNs = 100'000'000;
#endif

// The fake chip's line levels, shared with the daemon and its guard.
class FakeChip {
 public:
  explicit FakeChip(const std::string& path) : path_(path) {
    test::write_file(path, std::string(kChipLines * sizeof(int32_t), '\0'));
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    void* p =
        mmap(nullptr, kChipLines * sizeof(int32_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    REQUIRE(p != MAP_FAILED);
    levels_ = static_cast<int32_t*>(p);
  }
  ~FakeChip() { munmap(levels_, kChipLines * sizeof(int32_t)); }
  FakeChip(const FakeChip&) = delete;
  FakeChip& operator=(const FakeChip&) = delete;

  const std::string& path() const { return path_; }
  int32_t level(int line) const { return __atomic_load_n(&levels_[line], __ATOMIC_SEQ_CST); }
  void set(int line, int32_t level) { __atomic_store_n(&levels_[line], level, __ATOMIC_SEQ_CST); }
  bool wait_level(int line, int32_t level, std::chrono::milliseconds limit) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (this->level(line) != level) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

 private:
  std::string path_;
  int32_t* levels_ = nullptr;
};

Json gpio_config(const std::string& broker_url, int motor_run_ms) {
  return Json{
      {"device_id", kDevice},
      {"key_file", "device.key"},
      {"broker_url", broker_url},
      {"ledger_path", "ledger.db"},
      {"hal", "gpio"},
      {"slots",
       Json::array(
           {{{"slot", 1}, {"capacity", 10}, {"product", "cola"}, {"motor_line", kMotorLine}}})},
      {"gpio",
       {{"chip", "fake"},
        {"drop_sensor_line", kSensorLine},
        {"drop_sensor_active_low", false},
        {"motor_run_ms", motor_run_ms},
        {"drop_window_ms", 100}}},
      {"core",
       {{"reconnect_jitter_max_ms", 0},
        {"retransmit_ms", 1000},
        {"snapshot_interval_ms", 0},
        {"motor_timeout_ms", 30000}}}};
}

// The pid of the last motor guard the daemon's log names.
pid_t last_guard_pid(const std::string& log) {
  static const std::regex re(R"(motor guard \(pid (\d+)\) holds)");
  pid_t pid = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    pid = static_cast<pid_t>(std::stol((*it)[1]));
  }
  return pid;
}

bool wait_ended(pid_t pid, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!::vend::test::process_ended(pid)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

struct GpioStory {
  test::MosquittoServer broker;
  Device device{broker.url()};
  Cloud cloud{broker.url(), device.key()};
  FakeChip chip{device.file("gpio-levels")};
  std::vector<std::string> tokens;
  std::string last_boot;

  void start(int motor_run_ms) {
    device.write_config(gpio_config(broker.url(), motor_run_ms));
    std::vector<std::pair<std::string, std::string>> env = {{"LD_PRELOAD", VEND_FAKE_GPIOD},
                                                            {"VEND_FAKE_GPIO_FILE", chip.path()}};
#if defined(__SANITIZE_ADDRESS__)
    // The fake comes before ASan's runtime in the preload order.
    const char* asan = getenv("ASAN_OPTIONS");
    env.emplace_back("ASAN_OPTIONS",
                     std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0");
#endif
    device.start_daemon(env);
    REQUIRE_MESSAGE(cloud.wait([&] {
      auto p = cloud.presence();
      return p && p->online && p->boot_id != last_boot;
    }),
                    device.daemon_log());
    last_boot = cloud.presence()->boot_id;
  }

  void dispense_with_a_drop() {
    Run r = device.run({"restock", "--config", device.config_path(), "--slot", "1", "--count", "3",
                        "--restock-id", "r1"});
    REQUIRE_MESSAGE(r.code == 0, r.output);
    start(/*motor_run_ms=*/300);
    REQUIRE_MESSAGE(cloud.wait([&] { return cloud.tokens("r1").has_value(); }),
                    device.daemon_log());
    tokens = cloud.tokens("r1")->tokens;
    cloud.send(dispense("o1", 1, tokens[0]));
    REQUIRE_MESSAGE(chip.wait_level(kMotorLine, 1, 10s), device.daemon_log());
    chip.set(kSensorLine, 1);  // the item falls through the beam
    std::this_thread::sleep_for(20ms);
    chip.set(kSensorLine, 0);
    REQUIRE_MESSAGE(cloud.wait([&] { return !cloud.results("o1").empty(); }), device.daemon_log());
    CHECK(cloud.results("o1")[0].status == DispenseStatus::kDispensed);
    CHECK(chip.level(kMotorLine) == 0);
  }

  // A clean stop: the guard switches off, exits, and is reaped by the daemon.
  void stop_cleanly() {
    pid_t guard = last_guard_pid(device.daemon_log());
    REQUIRE(guard > 0);
    device.daemon().signal(SIGTERM);
    CHECK(device.daemon().wait(15s) == 0);
    CHECK(::vend::test::process_ended(guard));
    CHECK(chip.level(kMotorLine) == 0);
  }

  // Fails on the code before the motor guard: the daemon held the line, and
  // the line kept its level after the SIGKILL (as most GPIO drivers keep it).
  void kill_mid_rotation() {
    start(/*motor_run_ms=*/20000);
    cloud.send(dispense("o2", 1, tokens[1]));
    REQUIRE_MESSAGE(chip.wait_level(kMotorLine, 1, 10s), device.daemon_log());
    std::this_thread::sleep_for(100ms);
    pid_t guard = last_guard_pid(device.daemon_log());
    int64_t killed_ns = monotonic_ns();
    device.daemon().signal(SIGKILL);
    REQUIRE(chip.wait_level(kMotorLine, 0, 5s));
    int64_t late_ns = monotonic_ns() - killed_ns;
    MESSAGE("motor line read 0 " << late_ns / 1000 << " us after the daemon's SIGKILL");
    CHECK(late_ns <= kLateNs);
    CHECK(device.daemon().wait(5s) == 128 + SIGKILL);
    CHECK(wait_ended(guard, 5s));

    start(/*motor_run_ms=*/300);
    REQUIRE_MESSAGE(cloud.wait([&] { return !cloud.results("o2").empty(); }), device.daemon_log());
    CHECK(cloud.results("o2")[0].status == DispenseStatus::kUncertain);
    CHECK(chip.level(kMotorLine) == 0);  // never re-run
  }

  // Without its guard no motor can run: the daemon exits 1 (systemd restarts it).
  void guard_killed() {
    pid_t guard = last_guard_pid(device.daemon_log());
    REQUIRE(guard > 0);
    REQUIRE(kill(guard, SIGKILL) == 0);
    CHECK(device.daemon().wait(10s) == 1);
    CHECK(device.daemon_log().find("motor_guard: motor guard (pid " + std::to_string(guard) +
                                   ") killed by signal 9") != std::string::npos);
  }
};

TEST_CASE("hal gpio: a dispense, a kill -9 mid-rotation stops the motor, a lost guard stops all") {
  GpioStory story;
  story.dispense_with_a_drop();
  story.stop_cleanly();
  story.kill_mid_rotation();
  story.guard_killed();
  CHECK(story.cloud.bad_macs() == 0);
}

}  // namespace
}  // namespace vend::fw
