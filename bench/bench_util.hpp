// The benchmark framework (docs/benchmarks.md): command line, timing,
// statistics, and the one JSON object every bench binary prints.
//
// A bench binary:
//   void run(const vend::bench::Options& opt, vend::bench::Report& report) {
//     std::vector<double> fast, slow;
//     for (int r = 0; r < opt.runs; ++r) {      // interleave candidate and baseline
//       fast.push_back(measure_fast());          // so both see the same noise
//       slow.push_back(measure_slow());
//     }
//     report.add("fast_ops", "ops/s", fast);
//     report.add("slow_ops", "ops/s", slow);
//     report.compare("fast_ops", "slow_ops");     // ratio = fast / slow
//     report.target_ratio_at_least("fast_ops", 5.0);
//   }
//   int main(int argc, char** argv) {            // prints the JSON, writes --out
//     return vend::bench::run_bench(argc, argv, "bench_x", run);
//   }
// (or by hand: parse_options, a Report, report.finish()).
//
// Real servers (mosquitto, redis-server, child processes, temp dirs) come
// from tests/support/test_support.hpp (vend::test::MosquittoServer,
// RedisServer, Child, TempDir), compiled into vend_bench_util; a missing
// server throws, and the bench fails rather than reporting nothing.
//
// Nothing here is thread-safe unless it says so; a bench drives its Report
// from main().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace vend::bench {

// ---- command line ----------------------------------------------------------

// Every bench binary takes:
//   --runs N     measurements per metric (default 3; the median is reported)
//   --out PATH   also write the JSON object to PATH (stdout always gets it)
//   --scale F    multiply work sizes by F (default 1; < 1 for slow machines
//                or emulators; the bench notes a non-1 scale)
//   --emulated E this binary runs under emulator E (e.g. "qemu-aarch64"):
//                the report says so, and benches skip parts that would
//                measure the emulator rather than the code (e.g. RSS)
//   --help
// Progress and human-readable lines go to stderr; stdout carries only JSON.
struct Options {
  int runs = 3;
  std::string out_path;
  double scale = 1.0;
  std::string emulated;  // empty: native
};

// Parses argv; prints usage and exits (0 for --help, 2 for a bad argument).
Options parse_options(int argc, char** argv, const std::string& bench_name);

// n * scale, at least `min`.
int64_t scaled(const Options& opt, int64_t n, int64_t min = 1);

// ---- timing ----------------------------------------------------------------

using SteadyClock = std::chrono::steady_clock;

// Nanoseconds on the monotonic clock.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

// Started at construction (or restart()).
class Stopwatch {
 public:
  Stopwatch() : start_(now_ns()) {}
  void restart() { start_ = now_ns(); }
  int64_t elapsed_ns() const { return now_ns() - start_; }
  double elapsed_s() const { return static_cast<double>(elapsed_ns()) * 1e-9; }

 private:
  int64_t start_;
};

// Keeps `value` alive so the optimizer cannot drop the work producing it.
template <typename T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

// Calls fn() `iterations` times; returns mean nanoseconds per call.
double ns_per_call(int64_t iterations, const std::function<void()>& fn);

// Runs `batch` (which performs some operations and returns how many) until
// `duration` has passed; returns operations per second. Checks the clock
// once per batch, so make a batch cost microseconds, not nanoseconds.
double ops_per_second(std::chrono::milliseconds duration, const std::function<uint64_t()>& batch);

// `threads` threads each run `batch(thread_index)` repeatedly until
// `duration` has passed (all start together); returns the total operations
// per second. `batch` must be safe to call concurrently from those threads.
double ops_per_second_threads(int threads, std::chrono::milliseconds duration,
                              const std::function<uint64_t(int thread)>& batch);

// ---- statistics ------------------------------------------------------------

// Median of `values` (mean of the middle two for an even count); 0 if empty.
double median(std::vector<double> values);

// p-th percentile, p in [0, 100], linear interpolation between closest
// ranks; 0 if empty.
double percentile(std::vector<double> values, double p);

// Calls measure() `runs` times; returns the values in call order.
std::vector<double> repeat(int runs, const std::function<double()>& measure);

// ---- results ---------------------------------------------------------------

// Which way is good: throughput is kHigher, a latency or cost kLower.
enum class Better { kHigher, kLower };

// One measured figure. `runs` holds one value per run; `median` their median.
// `ratio` (set by Report::compare) says how many times BETTER the metric is
// than its baseline: metric/baseline for kHigher, baseline/metric for kLower
// -- except when compared with RatioKind::kPlain (metric/baseline, e.g. a
// cost factor). `met` is set by a target; unset means "no target".
struct Metric {
  std::string name;
  std::string unit;
  Better better = Better::kHigher;
  std::vector<double> runs;
  double median = 0;
  std::optional<std::string> baseline;
  std::optional<double> ratio;
  std::string ratio_kind;  // "better" or "plain" when ratio is set
  std::string target;
  std::optional<bool> met;
};

enum class RatioKind {
  kBetter,  // times better than the baseline (see Metric)
  kPlain,   // metric / baseline, whatever the direction
};

// The result of one bench binary, printed as one JSON object:
//   {"bench": name, "runs": n, "scale": f, "emulated"?: "qemu-aarch64",
//    "metrics": [{"name", "unit", "better": "higher"|"lower", "median",
//                 "runs": [...], "baseline"?, "ratio"?, "ratio_kind"?,
//                 "target"?, "met"?}],
//    "notes": [...]}
// Metric names are unique within a report. Non-copyable.
class Report {
 public:
  Report(std::string bench, const Options& options);
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  // Adds a metric (replacing one of the same name); median computed here.
  Metric& add(const std::string& name, const std::string& unit, std::vector<double> runs,
              Better better = Better::kHigher);

  // The metric called `name`; aborts with a message if there is none (a bug
  // in the bench).
  Metric& at(const std::string& name);

  // Sets name's baseline and ratio. With equal run counts the ratio is the
  // median of the per-run ratios (run i of both was measured side by side,
  // so each pair shares the machine's noise); otherwise the ratio of medians.
  void compare(const std::string& name, const std::string& baseline,
               RatioKind kind = RatioKind::kBetter);

  // Records a target and whether it was met.
  void target(const std::string& name, const std::string& text, bool met);
  // Target on the median: >= value (kHigher) or <= value (kLower), in the
  // metric's unit.
  void target_value(const std::string& name, double value);
  // Target on the ratio: ratio >= value. REQUIRES: compare() was called.
  void target_ratio_at_least(const std::string& name, double value);

  // A free-text line: what was measured, caveats, the machine.
  void note(const std::string& text);

  nlohmann::json to_json() const;

  // Prints the JSON to stdout and a short human summary to stderr, writes
  // --out if given. Returns the process exit code: 0 (a missed target is a
  // result, not a failure), 1 if --out could not be written.
  int finish() const;

 private:
  std::string bench_;
  Options options_;
  std::vector<Metric> metrics_;
  std::vector<std::string> notes_;
};

// The whole main() of a bench: parses options, makes the Report, calls
// body(options, report), then report.finish(). An exception from body (a
// server that would not start, a store error) is printed as
// "bench: error: ..." and gives exit code 1: a bench fails, it never
// reports half a result.
int run_bench(int argc, char** argv, const std::string& bench_name,
              const std::function<void(const Options&, Report&)>& body);

// Prints "bench: message" to stderr (progress of long benches).
void progress(const std::string& bench, const std::string& message);

// Absolute path of a project executable in the build tree, e.g.
// project_binary("firmware/vend-firmware"): $VEND_BINARY_DIR if set, else
// the build directory this bench was configured in. Also exports
// VEND_BINARY_DIR so vend::test::binary_path() agrees.
std::string project_binary(const std::string& relative);

// VmRSS of a process in KiB (from /proc/<pid>/status); nullopt if unreadable.
std::optional<int64_t> rss_kib(int pid);

}  // namespace vend::bench
