// Benchmark 1: reservations through the agent core's one thread, in process.
//
// The shipped shape: AgentCore on a CoreThread (the vend-agent core thread,
// its inbox and 10 ms ticks) over a Repository with its shipped defaults
// (SQLite WAL, synchronous=FULL, group commit), on 1,000 machines x 4 slots.
//
//   async      what the HTTP front end does: create_order_async, answered
//              from the commit callback, nobody waiting; 2 producer threads
//              keep 2,000 reservations in flight. Reported: durable
//              reservations/s and reservations per second of the core
//              thread's own CPU time (CLOCK_THREAD_CPUTIME_ID, read by steps
//              on that thread): what one core carries. Target >= 200,000/s.
//   blocking   64 threads each reserve through create_order_async and wait
//              for its answer (call_order, core/order_calls.hpp: a thread
//              waits for every commit) and cancel (so the pool never runs
//              out); core CPU per reservation+cancel.
//   baseline   the same pair on one caller thread with CallerRunner (what
//              the tests and the deterministic simulation do), same run.
//   postgresql async again, the same core over the PostgreSQL repository
//              (vend-agent --db postgresql://..., shipped defaults: group
//              commit pipelined, synchronous_commit on) on a PostgreSQL 15
//              this bench starts on loopback (fsync on), against the SQLite
//              async figure of the same run: durable group-commit throughput
//              of the two logs, and the mean group size of each.
#include <time.h>

#include <atomic>
#include <memory>
#include <thread>

#include "bench_util.hpp"
#include "core/agent_core.hpp"
#include "core/order_calls.hpp"
#include "null_transport.hpp"
#include "postgres/postgres_repository.hpp"
#include "repository/repository.hpp"
#include "shell/core_thread.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/crypto.hpp"
#include "vend/log.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"
#include "vend/topics.hpp"

namespace {

using namespace vend;
using namespace vend::agent;

constexpr int kMachines = 1000;
constexpr int kSlots = 4;
constexpr int kTokensPerSlot = 250;  // 1 M tokens: the async runs never sell out
constexpr int kClients = 64;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Figures {
  double wall_per_s = 0;
  double core_cpu_per_s = 0;  // reservations per core-CPU second
  int64_t failed = 0;         // sold out: the run outlasted the pools
};

class Agent {
 public:
  // `threaded`: a CoreThread runner (vend-agent), else CallerRunner. With
  // `postgres_url`, the log is PostgreSQL's instead of SQLite's in `dir`.
  Agent(const std::string& dir, bool threaded, const std::string& postgres_url = "") {
    auto repo = postgres_url.empty()
                    ? Repository::open(dir + "/agent.db", RepositoryOptions{}, log_)
                    : open_postgres_repository(postgres_url, RepositoryOptions{}, log_);
    if (!repo.ok()) throw std::runtime_error(repo.error().to_string());
    repo_ = std::move(repo).value();
    seed();
    CoreRunner* runner = nullptr;
    if (threaded) {
      runner_ = std::make_unique<CoreThread>(CoreThread::Limits{}, ms(10), log_);
      runner = runner_.get();
    } else {
      caller_ = std::make_unique<CallerRunner>();
      runner = caller_.get();
    }
    core_ = std::make_unique<AgentCore>(*repo_, transport_, clock_, random_, log_, AgentOptions{},
                                        runner);
    if (auto s = core_->start(); !s.ok()) throw std::runtime_error(s.error().to_string());
    AgentCore& core = *core_;
    if (runner_) runner_->start(CoreThread::Handlers{nullptr, nullptr, [&core] { core.tick(); }});
    core.on_connection(true);
    for (const auto& m : machines_) {
      proto::PresenceStatus online{m.id, m.boot_id, true, 1};
      std::string mac = crypto::sign(m.key, proto::encode_canonical(online));
      core.on_message(Message{topics::device_status(m.id), proto::encode(online, mac), 1, true});
    }
  }
  ~Agent() {
    if (runner_) runner_->stop();
  }

  // Reservations through create_order_async with `in_flight` outstanding,
  // from 2 producers, for `duration`; the tokens are not returned (the
  // pools hold enough for the run).
  Figures run_async(int in_flight, std::chrono::milliseconds duration) {
    std::atomic<int64_t> outstanding{0}, done{0}, failed{0};
    std::atomic<bool> stop{false};
    double cpu0 = core_cpu();
    bench::Stopwatch watch;
    std::vector<std::thread> producers;
    for (int p = 0; p < 2; ++p) {
      producers.emplace_back([&, p] {
        size_t i = static_cast<size_t>(p);
        while (!stop.load(std::memory_order_relaxed)) {
          if (outstanding.load() >= in_flight) {
            std::this_thread::yield();
            continue;
          }
          const auto& m = machines_[i % machines_.size()];
          int slot = 1 + static_cast<int>((i / machines_.size()) % kSlots);
          i += 2;
          ++outstanding;
          core_->create_order_async(m.id, slot, "", "", [&](Result<Order> o) {
            ++(o.ok() ? done : failed);
            --outstanding;
          });
        }
      });
    }
    std::this_thread::sleep_for(duration);
    stop = true;
    for (auto& t : producers) t.join();
    while (outstanding.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    double wall = watch.elapsed_s();
    double cpu = core_cpu() - cpu0;
    Figures f;
    f.wall_per_s = static_cast<double>(done.load()) / wall;
    f.core_cpu_per_s = static_cast<double>(done.load()) / std::max(cpu, 1e-9);
    f.failed = failed.load();
    return f;
  }

  // Writes per group commit since the last call (the writer's stats).
  double mean_group() {
    WriterStats now = repo_->stats();
    double writes = static_cast<double>(now.writes - last_.writes);
    double batches = static_cast<double>(now.batches - last_.batches);
    last_ = now;
    return batches > 0 ? writes / batches : 0;
  }

  // `clients` threads reserve and cancel for `duration`.
  Figures run(int clients, std::chrono::milliseconds duration) {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> done{0}, failed{0};
    double cpu0 = core_cpu();
    bench::Stopwatch watch;
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        int i = c;
        while (!stop.load(std::memory_order_relaxed)) {
          const auto& m = machines_[static_cast<size_t>(i % kMachines)];
          int slot = 1 + (i / kMachines) % kSlots;
          i += clients;
          auto o = reserve(m.id, slot);
          if (!o.ok()) {
            ++failed;
            continue;
          }
          (void)core_->cancel(o->id);
          ++done;
        }
      });
    }
    if (clients == 0) {
      // Inline: this thread is the only caller.
      int i = 0;
      while (watch.elapsed_s() * 1000 < static_cast<double>(duration.count())) {
        const auto& m = machines_[static_cast<size_t>(i % kMachines)];
        int slot = 1 + (i / kMachines) % kSlots;
        ++i;
        auto o = reserve(m.id, slot);
        if (!o.ok()) {
          ++failed;
          continue;
        }
        (void)core_->cancel(o->id);
        ++done;
      }
    } else {
      std::this_thread::sleep_for(duration);
      stop = true;
      for (auto& t : threads) t.join();
    }
    double wall = watch.elapsed_s();
    double cpu = core_cpu() - cpu0;
    if (failed.load() > 0) {
      throw std::runtime_error(std::to_string(failed.load()) + " reservations failed");
    }
    Figures f;
    f.wall_per_s = static_cast<double>(done.load()) / wall;
    f.core_cpu_per_s = static_cast<double>(done.load()) / std::max(cpu, 1e-9);
    return f;
  }

 private:
  static std::chrono::milliseconds ms(int n) { return std::chrono::milliseconds(n); }

  // A reservation, waited for: on this thread's CallerRunner, or from a
  // producer thread of the CoreThread.
  Result<Order> reserve(const std::string& device, int slot) {
    auto start = [&](AgentCore::OrderCallback done) {
      core_->create_order_async(device, slot, "", "", std::move(done));
    };
    return caller_ ? call_order(*caller_, *repo_, start) : call_order(start);
  }

  // The core thread's CPU time so far (the caller's own with CallerRunner).
  double core_cpu() {
    double t = 0;
    if (runner_) {
      (void)runner_->run([&] { t = thread_cpu_s(); });
    } else {
      t = thread_cpu_s();
    }
    return t;
  }

  struct Machine {
    std::string id;
    crypto::Key key;
    std::string boot_id;
  };

  void seed() {
    Changeset changes;
    for (int i = 0; i < kMachines; ++i) {
      Machine m{"vm-" + std::to_string(i), crypto::Key::generate(), random_.id128()};
      changes.insert_device(m.id, m.key.to_hex(), clock_.wall_ms());
      for (int s = 1; s <= kSlots; ++s) {
        changes.upsert_slot(m.id, SlotSpec{s, "item", 100, kTokensPerSlot});
        std::vector<std::string> tokens;
        for (int k = 0; k < kTokensPerSlot; ++k) tokens.push_back(random_.id128());
        changes.insert_pool_tokens(m.id, s, "r-" + std::to_string(s), tokens);
      }
      machines_.push_back(std::move(m));
    }
    auto ticket = repo_->submit(std::move(changes));
    if (!ticket.ok()) throw std::runtime_error(ticket.error().to_string());
    if (auto s = repo_->wait(*ticket); !s.ok()) throw std::runtime_error(s.error().to_string());
  }

  NullLogger log_;
  SystemClock clock_;
  SecureRandom random_;
  bench::NullTransport transport_;
  std::unique_ptr<CallerRunner> caller_;  // outlives repo_: commit callbacks post to it
  std::unique_ptr<Repository> repo_;
  WriterStats last_;
  std::unique_ptr<CoreThread> runner_;
  std::unique_ptr<AgentCore> core_;
  std::vector<Machine> machines_;
};

void run(const bench::Options& opt, bench::Report& report) {
  const std::chrono::milliseconds d{bench::scaled(opt, 2000, 100)};
  test::TempDir dir_threaded, dir_inline;
  bench::progress("bench_core", "seeding " + std::to_string(kMachines * kSlots) + " slots");
  Agent threaded(dir_threaded.path(), true);
  Agent inline_agent(dir_inline.path(), false);
  bench::progress("bench_core", "starting PostgreSQL and seeding it");
  test::PostgresServer postgres;
  postgres.create_database("bench_core");
  Agent on_postgres(dir_threaded.path(), true, postgres.url("bench_core"));
  std::vector<double> core_cpu, wall, inline_wall, inline_cpu, async_cpu, async_wall;
  std::vector<double> pg_wall, pg_cpu, pg_group, sqlite_group;
  // The first pass after the seed touches every slot's pool, order-book
  // chunk and token B-tree page for the first time: about 5,000
  // reservations a second and a third of the core's speed (2026-12-05), a
  // start-up cost, not the steady state the targets are about. It is
  // measured once, reported apart, and the timed runs follow it.
  bench::progress("bench_core", "first pass over every slot (reported apart)");
  Figures cold = threaded.run_async(2000, d / 2);
  Figures cold_pg = on_postgres.run_async(2000, d / 2);
  if (cold.failed + cold_pg.failed > 0) {
    throw std::runtime_error(std::to_string(cold.failed + cold_pg.failed) +
                             " first-pass reservations failed");
  }
  for (int r = 0; r < opt.runs; ++r) {
    bench::progress("bench_core", "run " + std::to_string(r + 1));
    (void)threaded.mean_group();
    Figures a = threaded.run_async(2000, d / 2);
    if (a.failed > 0)
      throw std::runtime_error(std::to_string(a.failed) + " async reservations failed");
    async_cpu.push_back(a.core_cpu_per_s);
    async_wall.push_back(a.wall_per_s);
    sqlite_group.push_back(threaded.mean_group());
    (void)on_postgres.mean_group();
    Figures p = on_postgres.run_async(2000, d / 2);
    if (p.failed > 0)
      throw std::runtime_error(std::to_string(p.failed) + " PostgreSQL reservations failed");
    pg_wall.push_back(p.wall_per_s);
    pg_cpu.push_back(p.core_cpu_per_s);
    pg_group.push_back(on_postgres.mean_group());
    Figures t = threaded.run(kClients, d);
    Figures i = inline_agent.run(0, d);
    core_cpu.push_back(t.core_cpu_per_s);
    wall.push_back(t.wall_per_s);
    inline_wall.push_back(i.wall_per_s);
    inline_cpu.push_back(i.core_cpu_per_s);
  }
  report.add("async_core_thread_reservations_per_cpu_s", "reservations/s", async_cpu);
  report.add("async_durable_reservations_per_s", "reservations/s", async_wall);
  report.add("first_pass_async_core_thread_reservations_per_cpu_s", "reservations/s",
             std::vector<double>{cold.core_cpu_per_s});
  report.add("first_pass_async_durable_reservations_per_s", "reservations/s",
             std::vector<double>{cold.wall_per_s});
  report.add("postgresql_async_durable_reservations_per_s", "reservations/s", pg_wall);
  report.add("postgresql_async_core_thread_reservations_per_cpu_s", "reservations/s", pg_cpu);
  report.add("sqlite_async_writes_per_group_commit", "writes", sqlite_group);
  report.add("postgresql_async_writes_per_group_commit", "writes", pg_group);
  report.add("core_thread_reservations_per_cpu_s", "reservations/s", core_cpu);
  report.add("durable_reservations_64_clients", "reservations/s", wall);
  report.add("inline_one_caller_durable_reservations", "reservations/s", inline_wall);
  report.add("inline_one_caller_reservations_per_cpu_s", "reservations/s", inline_cpu);
  report.compare("durable_reservations_64_clients", "inline_one_caller_durable_reservations");
  report.compare("core_thread_reservations_per_cpu_s", "inline_one_caller_reservations_per_cpu_s");
  report.compare("async_durable_reservations_per_s", "durable_reservations_64_clients");
  report.compare("postgresql_async_durable_reservations_per_s", "async_durable_reservations_per_s");
  report.target_value("async_core_thread_reservations_per_cpu_s", 200'000);
  report.note(
      "each reservation: create_order (answered once durable) then cancel; 1,000 machines x 4 "
      "slots; shipped repository defaults (WAL, synchronous=FULL, group commit)");
  report.note(
      "postgresql: the same async run over open_postgres_repository (pipelined group commit, "
      "synchronous_commit on) on a PostgreSQL 15 started by the bench on loopback (fsync on, "
      "same 2 cores)");
  report.note(
      "first pass: one async run of the same length right after the seed, before the timed "
      "runs (cold pools, order book and SQLite pages); reported once, not a target");
  report.note(
      "core CPU: CLOCK_THREAD_CPUTIME_ID of the core thread (read by steps on it); inline: of "
      "the one caller thread, which also waits for each commit");
}

}  // namespace

int main(int argc, char** argv) { return vend::bench::run_bench(argc, argv, "bench_core", run); }
