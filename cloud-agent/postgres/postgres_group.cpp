// PostgreSQL group commit. A group is ONE round trip when nothing fails:
//   BEGIN; <the statements of every changeset>; COMMIT; Sync
// all pipelined. Conditional statements fail inside the server
// (vend_expect_one), so nothing waits for a row count. Changesets fail only
// when the core's view and the log disagree (a fenced claim, a bug), so the
// first try has no savepoints: each would cost the server a subtransaction
// (and past 64 of them every snapshot in the cluster overflows its subxid
// cache). When a statement fails, that try is rolled back whole and the
// group is applied again with a savepoint per changeset:
//   BEGIN; (SAVEPOINT w; <its statements>; RELEASE SAVEPOINT w) per
//   changeset; COMMIT; Sync
// When changeset k fails there, the server skips the rest up to the Sync
// and the transaction waits, aborted, inside k's savepoint: the next round
// trip rolls k back and sends k+1.. and the COMMIT again. Either way a
// failed changeset changes nothing and the others are applied in order. A failing BEGIN or COMMIT
// retries each changeset in a transaction of its own, as the SQLite backend does. A lost connection
// fails every undecided ticket "unavailable" and every later write too, until Repository::recover()
// reconnects: the outcome of an unanswered COMMIT is unknown, so nothing is retried here (the core
// stops changing state; it is rebuilt from what committed, in process in cluster mode, by a restart
// otherwise).
//
// Fenced changesets (cluster mode) start with a check of their claim
// (vend_fence without lock) inside their savepoint, so a stale one fails
// "fenced" before its changes can fail on the new owner's rows. The group's
// COMMIT is then not pipelined: once every changeset is applied, ONE simple
// query message locks and checks all the claims and commits
// (hold_and_commit, postgres_fence.cpp). The lease rows are therefore
// locked only while the server runs that message, never while it waits for
// this process: a writer paused mid-pipeline (where no
// idle_in_transaction_session_timeout runs) cannot hold up a takeover. A
// refused claim rolls the group back; its changesets fail "fenced" and the
// rest is applied again (each round drops at least one changeset).
#include <utility>
#include <variant>

#include "postgres/pg_pipeline.hpp"
#include "postgres/postgres_backend.hpp"
#include "postgres/postgres_changes.hpp"
#include "postgres/postgres_fence.hpp"

namespace vend::agent::pg {

namespace {

constexpr const char* kLog = "repository";
// Owners of the commands that belong to no changeset.
constexpr int kBegin = -1;
constexpr int kCommit = -2;
constexpr int kControl = -3;

// Queues the commands of `changes`; a raw change (tests) runs now, before
// the queued commands reach the server. Returns the raw change's error.
Status queue_changes(Pipeline& p, std::vector<int>& owner, int index, const Changeset& changes,
                     int64_t faults_max, WriteContext& ctx) {
  if (const FenceClaim* claim = changes.fence_claim()) {
    FenceArrays a;
    a.add(*claim);
    p.send_prepared("fence_check", {a.instances(), a.shards(), a.epochs()});
    owner.push_back(index);
  }
  std::vector<Command> commands;
  for (const Change& change : changes.changes()) {
    if (const auto* raw = std::get_if<change::Raw>(&change)) {
      if (auto s = raw->write(ctx); !s.ok()) return s;
      continue;
    }
    commands.clear();
    commands_of(change, faults_max, commands);
    for (const auto& c : commands) {
      p.send_prepared(c.statement, c.params);
      owner.push_back(index);
    }
  }
  return {};
}

// Raw changes (tests) run on the connection as they are queued, and a
// failing one is rolled back to its changeset's savepoint.
bool has_raw(const std::vector<const Changeset*>& group) {
  for (const Changeset* changes : group) {
    for (const Change& change : changes->changes()) {
      if (std::holds_alternative<change::Raw>(change)) return true;
    }
  }
  return false;
}

// The fenced outcomes of `sub` (one per position of `todo`) are final: moved
// into `results`. Returns the positions to apply again.
std::vector<size_t> settle_fenced(const std::vector<size_t>& todo, std::vector<Status>& sub,
                                  std::vector<Status>& results) {
  std::vector<size_t> next;
  for (size_t j = 0; j < todo.size(); ++j) {
    bool final_fenced = !sub[j].ok() && sub[j].error().code == "fenced";
    if (final_fenced) {
      results[todo[j]] = std::move(sub[j]);
    } else {
      next.push_back(todo[j]);
    }
  }
  return next;
}

void queue_sql(Pipeline& p, std::vector<int>& owner, const char* sql, int who) {
  p.send_sql(sql);
  owner.push_back(who);
}

}  // namespace

Status PostgresBackend::lost_status() const {
  return make_error("unavailable", "the connection to PostgreSQL was lost (not reconnected yet)");
}

std::vector<Status> PostgresBackend::apply_group(const std::vector<const Changeset*>& group) {
  if (!write_lost_ && !write_.ok()) write_lost_ = true;
  if (write_lost_) return std::vector<Status>(group.size(), lost_status());
  std::vector<Status> results(group.size());
  std::vector<size_t> todo(group.size());  // positions still to apply
  for (size_t i = 0; i < group.size(); ++i) todo[i] = i;
  int deadlocks = 0;
  while (!todo.empty()) {
    std::vector<const Changeset*> subset;
    subset.reserve(todo.size());
    for (size_t i : todo) subset.push_back(group[i]);
    std::vector<Status> sub;
    Together together = apply_together(subset, sub, has_raw(subset));
    if (together == Together::kAborted) {
      // A changeset failed in the try without savepoints: nothing of it
      // stays; apply the group again, a savepoint per changeset.
      (void)write_.exec("ROLLBACK");
      together = apply_together(subset, sub, true);
    }
    if (together == Together::kRetryAlone) {
      (void)write_.exec("ROLLBACK");  // whatever is left of the group's transaction
      for (size_t i : todo) results[i] = write_lost_ ? lost_status() : apply_alone(*group[i]);
      return results;
    }
    Held held;
    if (together == Together::kHold) held = hold_and_commit(subset, sub);
    if (held.what == Held::kFailed) {
      log_.error(kLog, "COMMIT of a group of " + std::to_string(subset.size()) +
                           " writes failed: " + held.error.error().to_string() +
                           "; retrying each write alone");
      for (size_t i : todo) results[i] = write_lost_ ? lost_status() : apply_alone(*group[i]);
      return results;
    }
    if (held.what == Held::kLost) {
      for (auto& r : sub) {
        if (r.ok()) r = held.error;
      }
    }
    if (held.what == Held::kCommitted || held.what == Held::kLost) {
      for (size_t j = 0; j < todo.size(); ++j) results[todo[j]] = std::move(sub[j]);
      return results;
    }
    // Rolled back: refused changesets (and those fenced by their own check)
    // are final; the others are applied again.
    note_rollback(held, subset, sub, deadlocks);
    todo = settle_fenced(todo, sub, results);
  }
  return results;
}

void PostgresBackend::note_rollback(Held& held, const std::vector<const Changeset*>& subset,
                                    std::vector<Status>& sub, int& deadlocks) {
  if (held.what == Held::kDeadlock) {
    log_.warn(kLog, "the fence's lock met a deadlock (a lease change under way): " +
                        held.error.error().to_string());
    if (++deadlocks > 2) {  // give up: fenced, which the owner answers by rebuilding
      held.refused = claimed(subset);
      held.refusals.assign(held.refused.size(),
                           make_error("fenced", "write fenced: " + held.error.error().message));
    }
  }
  for (size_t k = 0; k < held.refused.size(); ++k) sub[held.refused[k]] = held.refusals[k];
}

PostgresBackend::Together PostgresBackend::apply_together(
    const std::vector<const Changeset*>& group, std::vector<Status>& results, bool savepoints) {
  const int n = static_cast<int>(group.size());
  const bool fenced = !claimed(group).empty();
  results.assign(group.size(), Status{});
  Pipeline p(write_.get());
  std::vector<int> owner;
  queue_sql(p, owner, "BEGIN", kBegin);
  int next = 0;
  while (true) {
    for (int i = next; i < n; ++i) {
      if (savepoints) queue_sql(p, owner, "SAVEPOINT w", i);
      results[i] = queue_changes(p, owner, i, *group[i], options_.faults_max, raw_ctx_);
      if (!results[i].ok()) queue_sql(p, owner, "ROLLBACK TO SAVEPOINT w", i);
      if (savepoints) queue_sql(p, owner, "RELEASE SAVEPOINT w", i);
    }
    if (!fenced) queue_sql(p, owner, "COMMIT", kCommit);
    PipelineOutcome out = p.run();
    if (out.lost) {
      write_lost_ = true;
      log_.error(kLog, "group of " + std::to_string(n) + " writes: " + out.error.to_string());
      for (auto& r : results) {
        if (r.ok()) r = out.error;
      }
      return Together::kDone;
    }
    if (!out.failed) return fenced ? Together::kHold : Together::kDone;
    int who = owner[*out.failed];
    owner.clear();
    if (who < 0) {
      log_.error(kLog, std::string(who == kBegin    ? "BEGIN"
                                   : who == kCommit ? "COMMIT"
                                                    : "ROLLBACK TO") +
                           " of a group of " + std::to_string(n) + " writes failed: " +
                           out.error.to_string() + "; retrying each write alone");
      return Together::kRetryAlone;
    }
    if (!savepoints) return Together::kAborted;
    // Changeset `who` failed: roll it back alone and send the rest again.
    results[who] = out.error;
    queue_sql(p, owner, "ROLLBACK TO SAVEPOINT w", kControl);
    queue_sql(p, owner, "RELEASE SAVEPOINT w", kControl);
    next = who + 1;
  }
}

Status PostgresBackend::apply_alone(const Changeset& changes) {
  const bool fenced = changes.fence_claim() != nullptr;
  PipelineOutcome out;
  Status raw;
  {
    Pipeline p(write_.get());
    std::vector<int> owner;
    queue_sql(p, owner, "BEGIN", kBegin);
    raw = queue_changes(p, owner, 0, changes, options_.faults_max, raw_ctx_);
    if (!raw.ok() || !fenced) queue_sql(p, owner, raw.ok() ? "COMMIT" : "ROLLBACK", kCommit);
    out = p.run();
  }
  if (out.lost) {
    write_lost_ = true;
    return out.error;
  }
  if (out.failed) {
    (void)write_.exec("ROLLBACK");
    return out.error;
  }
  if (!raw.ok() || !fenced) return raw;
  Held held = hold_and_commit({&changes}, {Status{}});
  switch (held.what) {
    case Held::kCommitted: return {};
    case Held::kRefused: return held.refusals.front();
    case Held::kDeadlock:  // alone: no second round; nothing committed
      return make_error("fenced", "write fenced: " + held.error.error().message);
    default: return held.error;
  }
}

}  // namespace vend::agent::pg
