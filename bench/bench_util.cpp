#include "bench_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace vend::bench {

namespace {

[[noreturn]] void usage(const std::string& bench, int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: %s [--runs N] [--out PATH] [--scale F] [--emulated NAME]\n"
               "  --runs N    measurements per metric, median reported (default 3)\n"
               "  --out PATH  also write the JSON result to PATH\n"
               "  --scale F   multiply work sizes by F (default 1)\n"
               "  --emulated NAME  running under emulator NAME (figures noted as emulated)\n",
               bench.c_str());
  std::exit(code);
}

// The value of a flag given as "--flag value" or "--flag=value".
bool take_value(const std::string& flag, int argc, char** argv, int& i, std::string& out) {
  std::string arg = argv[i];
  if (arg == flag) {
    if (i + 1 >= argc) return false;
    out = argv[++i];
    return true;
  }
  if (arg.rfind(flag + "=", 0) == 0) {
    out = arg.substr(flag.size() + 1);
    return true;
  }
  return false;
}

std::string format_value(double v) {
  std::ostringstream s;
  if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-2)) {
    s.precision(3);
    s << std::scientific << v;
  } else {
    s.precision(4);
    s << v;
  }
  return s.str();
}

}  // namespace

Options parse_options(int argc, char** argv, const std::string& bench_name) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    if (arg == "-h" || arg == "--help") usage(bench_name, 0);
    try {
      if (take_value("--runs", argc, argv, i, value)) {
        opt.runs = std::stoi(value);
        if (opt.runs < 1) usage(bench_name, 2);
      } else if (take_value("--out", argc, argv, i, value)) {
        opt.out_path = value;
      } else if (take_value("--scale", argc, argv, i, value)) {
        opt.scale = std::stod(value);
        if (!(opt.scale > 0)) usage(bench_name, 2);
      } else if (take_value("--emulated", argc, argv, i, value)) {
        opt.emulated = value;
      } else {
        std::fprintf(stderr, "%s: unknown argument '%s'\n", bench_name.c_str(), arg.c_str());
        usage(bench_name, 2);
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "%s: bad value for '%s'\n", bench_name.c_str(), arg.c_str());
      usage(bench_name, 2);
    }
  }
  return opt;
}

int64_t scaled(const Options& opt, int64_t n, int64_t min) {
  auto v = static_cast<int64_t>(std::llround(static_cast<double>(n) * opt.scale));
  return std::max(v, min);
}

double ns_per_call(int64_t iterations, const std::function<void()>& fn) {
  Stopwatch sw;
  for (int64_t i = 0; i < iterations; ++i) fn();
  return static_cast<double>(sw.elapsed_ns()) /
         static_cast<double>(std::max<int64_t>(iterations, 1));
}

double ops_per_second(std::chrono::milliseconds duration, const std::function<uint64_t()>& batch) {
  const int64_t budget_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  uint64_t ops = 0;
  Stopwatch sw;
  int64_t elapsed = 0;
  do {
    ops += batch();
    elapsed = sw.elapsed_ns();
  } while (elapsed < budget_ns);
  return static_cast<double>(ops) * 1e9 / static_cast<double>(elapsed);
}

double ops_per_second_threads(int threads, std::chrono::milliseconds duration,
                              const std::function<uint64_t(int thread)>& batch) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<uint64_t> ops(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n += batch(t);
      ops[static_cast<size_t>(t)] = n;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  Stopwatch sw;
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(duration);
  stop.store(true);
  for (std::thread& th : pool) th.join();
  // Elapsed includes each thread's last batch, which was counted.
  double elapsed_s = sw.elapsed_s();
  uint64_t total = 0;
  for (uint64_t n : ops) total += n;
  return static_cast<double>(total) / elapsed_s;
}

double median(std::vector<double> values) { return percentile(std::move(values), 50.0); }

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  auto lo = static_cast<size_t>(std::floor(rank));
  auto hi = static_cast<size_t>(std::ceil(rank));
  double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

std::vector<double> repeat(int runs, const std::function<double()>& measure) {
  std::vector<double> values;
  values.reserve(static_cast<size_t>(runs));
  for (int r = 0; r < runs; ++r) values.push_back(measure());
  return values;
}

int run_bench(int argc, char** argv, const std::string& bench_name,
              const std::function<void(const Options&, Report&)>& body) {
  Options opt = parse_options(argc, argv, bench_name);
  try {
    Report report(bench_name, opt);
    body(opt, report);
    return report.finish();
  } catch (const std::exception& e) {
    progress(bench_name, std::string("error: ") + e.what());
    return 1;
  }
}

void progress(const std::string& bench, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", bench.c_str(), message.c_str());
}

std::string project_binary(const std::string& relative) {
  const char* env = std::getenv("VEND_BINARY_DIR");
  std::string dir = env != nullptr && *env != '\0' ? env : VEND_BENCH_BINARY_DIR;
  setenv("VEND_BINARY_DIR", dir.c_str(), 0);
  return dir + "/" + relative;
}

std::optional<int64_t> rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      try {
        return std::stoll(line.substr(6));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

// ---- Report ----------------------------------------------------------------

Report::Report(std::string bench, const Options& options)
    : bench_(std::move(bench)), options_(options) {
  if (options_.scale != 1.0) note("work sizes scaled by " + format_value(options_.scale));
  if (!options_.emulated.empty()) {
    note("EMULATED: run under " + options_.emulated + "; absolute figures are not the hardware's");
  }
}

Metric& Report::add(const std::string& name, const std::string& unit, std::vector<double> runs,
                    Better better) {
  auto it = std::find_if(metrics_.begin(), metrics_.end(),
                         [&](const Metric& m) { return m.name == name; });
  if (it == metrics_.end()) it = metrics_.insert(metrics_.end(), Metric{});
  Metric& m = *it;
  m = Metric{};
  m.name = name;
  m.unit = unit;
  m.better = better;
  m.median = median(runs);
  m.runs = std::move(runs);
  return m;
}

Metric& Report::at(const std::string& name) {
  for (Metric& m : metrics_) {
    if (m.name == name) return m;
  }
  std::fprintf(stderr, "%s: bug: no metric '%s'\n", bench_.c_str(), name.c_str());
  std::abort();
}

void Report::compare(const std::string& name, const std::string& baseline, RatioKind kind) {
  Metric& m = at(name);
  const Metric& b = at(baseline);
  auto ratio_of = [&](double mv, double bv) {
    bool inverse = kind == RatioKind::kBetter && m.better == Better::kLower;
    double num = inverse ? bv : mv;
    double den = inverse ? mv : bv;
    return den == 0 ? 0.0 : num / den;
  };
  double ratio = 0;
  if (m.runs.size() == b.runs.size() && !m.runs.empty()) {
    std::vector<double> per_run;
    for (size_t i = 0; i < m.runs.size(); ++i) per_run.push_back(ratio_of(m.runs[i], b.runs[i]));
    ratio = median(per_run);
  } else {
    ratio = ratio_of(m.median, b.median);
  }
  m.baseline = baseline;
  m.ratio = ratio;
  m.ratio_kind = kind == RatioKind::kBetter ? "better" : "plain";
}

void Report::target(const std::string& name, const std::string& text, bool met) {
  Metric& m = at(name);
  m.target = text;
  m.met = met;
}

void Report::target_value(const std::string& name, double value) {
  Metric& m = at(name);
  bool higher = m.better == Better::kHigher;
  bool met = higher ? m.median >= value : m.median <= value;
  target(name, std::string(higher ? ">= " : "<= ") + format_value(value) + " " + m.unit, met);
}

void Report::target_ratio_at_least(const std::string& name, double value) {
  Metric& m = at(name);
  if (!m.ratio) {
    std::fprintf(stderr, "%s: bug: target on the ratio of '%s' before compare()\n", bench_.c_str(),
                 name.c_str());
    std::abort();
  }
  target(name, ">= " + format_value(value) + "x " + *m.baseline, *m.ratio >= value);
}

void Report::note(const std::string& text) { notes_.push_back(text); }

nlohmann::json Report::to_json() const {
  nlohmann::json metrics = nlohmann::json::array();
  for (const Metric& m : metrics_) {
    nlohmann::json j = {{"name", m.name},
                        {"unit", m.unit},
                        {"better", m.better == Better::kHigher ? "higher" : "lower"},
                        {"median", m.median},
                        {"runs", m.runs}};
    if (m.baseline) j["baseline"] = *m.baseline;
    if (m.ratio) {
      j["ratio"] = *m.ratio;
      j["ratio_kind"] = m.ratio_kind;
    }
    if (!m.target.empty()) j["target"] = m.target;
    if (m.met) j["met"] = *m.met;
    metrics.push_back(std::move(j));
  }
  nlohmann::json j = {{"bench", bench_},
                      {"runs", options_.runs},
                      {"scale", options_.scale},
                      {"metrics", std::move(metrics)},
                      {"notes", notes_}};
  if (!options_.emulated.empty()) j["emulated"] = options_.emulated;
  return j;
}

int Report::finish() const {
  nlohmann::json j = to_json();
  std::cout << j.dump() << std::endl;
  for (const Metric& m : metrics_) {
    std::string line = m.name + " = " + format_value(m.median) + " " + m.unit;
    if (m.ratio) line += "  (" + format_value(*m.ratio) + "x vs " + *m.baseline + ")";
    if (m.met) line += *m.met ? "  target met" : "  TARGET MISSED (" + m.target + ")";
    progress(bench_, line);
  }
  if (options_.out_path.empty()) return 0;
  std::ofstream out(options_.out_path);
  out << j.dump(2) << "\n";
  if (!out) {
    progress(bench_, "cannot write " + options_.out_path);
    return 1;
  }
  return 0;
}

}  // namespace vend::bench
