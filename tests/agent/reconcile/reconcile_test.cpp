// reconcile::reconcile alone: table cases over one slot (match, in flight,
// missing, resurrected and fresh tokens, held tokens, count mismatches),
// then what spans slots (unknown slots, a token offered to two slots, the
// report's verdict and trigger). No rig, no repository, no clock.
#include "reconcile/reconcile.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "vend/crypto.hpp"

using vend::agent::reconcile::AlertChange;
using vend::agent::reconcile::CloudSlot;
using vend::agent::reconcile::FreshLookup;
using vend::agent::reconcile::HeldToken;
using vend::agent::reconcile::Input;
using vend::agent::reconcile::Outcome;
using vend::agent::reconcile::reconcile;
using vend::agent::reconcile::SlotChanges;
using vend::agent::reconcile::trigger_of;
using vend::proto::SlotSnapshot;

namespace {

std::string tok(int n) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%032x", n);
  return buf;
}

std::vector<std::string> toks(std::initializer_list<int> ns) {
  std::vector<std::string> out;
  for (int n : ns) out.push_back(tok(n));
  return out;
}

// What the device says about slot 1: its available tokens and items; the
// list itself only when `full`.
SlotSnapshot seen(const std::vector<std::string>& tokens, int physical, bool full, int slot = 1) {
  SlotSnapshot s;
  s.slot = slot;
  s.physical_count = physical;
  s.available_tokens = static_cast<int>(tokens.size());
  s.digest = vend::crypto::token_digest(tokens);
  if (full) s.tokens = tokens;
  return s;
}

// Slot 1 as the cloud sees it, and what its fresh look-up answers: the
// tokens of `fresh` it is asked about, or `fresh_error`.
struct Cloud {
  CloudSlot slot;
  std::set<std::string> fresh;
  std::string fresh_error;
};

// The look-up answering from `fresh`/`error`; each question is kept in `asked`.
FreshLookup lookup(std::set<std::string> fresh, std::string error = "",
                   std::vector<std::vector<std::string>>* asked = nullptr) {
  return
      [=](int, const std::vector<std::string>& candidates) -> vend::Result<std::set<std::string>> {
        if (asked != nullptr) asked->push_back(candidates);
        if (!error.empty()) return vend::make_error("io", error);
        std::set<std::string> out;
        for (const auto& t : candidates) {
          if (fresh.count(t) != 0) out.insert(t);
        }
        return out;
      };
}

// Pool 1,2; RESERVED order o3 holds 3, PAID order o4 holds 4; DISPATCHED 5.
Cloud cloud() {
  static const std::vector<std::string> pool = toks({1, 2});  // outlives every view of it
  Cloud c;
  c.slot.pool.assign(pool.begin(), pool.end());
  c.slot.reserved = {{tok(3), "o3", true}, {tok(4), "o4", false}};
  c.slot.dispatched = toks({5});
  c.slot.reserved_count = 2;
  c.slot.dispatched_count = 1;
  return c;
}

Outcome run(const Cloud& c, std::vector<SlotSnapshot> slots,
            const std::string& request_id = "rec-1",
            std::vector<std::vector<std::string>>* asked = nullptr) {
  Input in;
  in.device = "vm-1";
  in.report_id = "rpt-1";
  in.now_ms = 1'000;
  in.snapshot_seq = 7;
  in.snapshot.request_id = request_id;
  in.snapshot.slots = std::move(slots);
  in.cloud[1] = c.slot;
  in.fresh = lookup(c.fresh, c.fresh_error, asked);
  return reconcile(in);
}

bool has_alert(const SlotChanges& c, const std::string& code, bool raise) {
  for (const AlertChange& a : c.alerts) {
    if (a.code == code && a.raise == raise) return true;
  }
  return false;
}

std::vector<std::string> cancelled_orders(const SlotChanges& c) {
  std::vector<std::string> out;
  for (const HeldToken& h : c.cancel) out.push_back(h.order_id);
  return out;
}

struct Case {
  std::string name;
  Cloud cloud;
  SlotSnapshot seen;
  std::string verdict;
  std::vector<std::string> burned;
  std::vector<std::string> cancelled;
  std::vector<std::string> added;
  int64_t pool;      // reported after the changes
  int64_t reserved;  // reported after the changes
};

Cloud with_fresh(Cloud c, std::vector<std::string> fresh) {
  c.fresh.insert(fresh.begin(), fresh.end());
  return c;
}

Cloud with_alerts(Cloud c, bool physical, bool resurrected) {
  c.slot.physical_mismatch_alert = physical;
  c.slot.token_resurrected_alert = resurrected;
  return c;
}

}  // namespace

TEST_CASE("one slot: each difference class gets its verdict and its changes") {
  const std::vector<Case> cases = {
      {"match by digest",
       cloud(),
       seen(toks({1, 2, 3, 4, 5}), 5, false),
       "match",
       {},
       {},
       {},
       2,
       2},
      {"match by full list",
       cloud(),
       seen(toks({5, 4, 3, 2, 1}), 5, true),
       "match",
       {},
       {},
       {},
       2,
       2},
      {"dispatched token consumed, digest only: in flight",
       cloud(),
       seen(toks({1, 2, 3, 4}), 5, false),
       "in_flight",
       {},
       {},
       {},
       2,
       2},
      {"dispatched token consumed, full list: in flight, not lost",
       cloud(),
       seen(toks({1, 2, 3, 4}), 4, true),
       "in_flight",
       {},
       {},
       {},
       2,
       2},
      {"unexplained digest: full list asked for",
       cloud(),
       seen(toks({1, 2, 3, 4, 9}), 5, false),
       "pending",
       {},
       {},
       {},
       2,
       2},
      {"pool tokens missing on the device are burned",
       cloud(),
       seen(toks({2, 3, 4, 5}), 4, true),
       "repaired",
       toks({1}),
       {},
       {},
       1,
       2},
      {"a RESERVED order's lost token cancels it, a PAID one's does not",
       cloud(),
       seen(toks({1, 2, 5}), 3, true),
       "repaired",
       {},
       {"o3"},
       {},
       2,
       1},
      {"fresh tokens join the pool",
       with_fresh(cloud(), toks({8, 9})),
       seen(toks({1, 2, 3, 4, 5, 8, 9}), 7, true),
       "repaired",
       {},
       {},
       toks({8, 9}),
       4,
       2},
      {"spent tokens are resurrected: alert, not sold",
       cloud(),
       seen(toks({1, 2, 3, 4, 5, 8}), 6, true),
       "alert",
       {},
       {},
       {},
       2,
       2},
      {"a malformed token is never added",
       with_fresh(cloud(), {"XYZ"}),
       seen({tok(1), tok(2), tok(3), tok(4), tok(5), "XYZ"}, 6, true),
       "alert",
       {},
       {},
       {},
       2,
       2},
      {"more items than tokens: alert",
       cloud(),
       seen(toks({1, 2, 3, 4, 5}), 7, false),
       "alert",
       {},
       {},
       {},
       2,
       2},
      {"fewer items than tokens: alert",
       cloud(),
       seen(toks({1, 2, 3, 4, 5}), 3, false),
       "alert",
       {},
       {},
       {},
       2,
       2},
      {"a resurrected alert stays while the digest matches",
       with_alerts(cloud(), false, true),
       seen(toks({1, 2, 3, 4, 5}), 5, false),
       "alert",
       {},
       {},
       {},
       2,
       2},
      {"a full list that matches exactly keeps it too (only a difference is compared)",
       with_alerts(cloud(), false, true),
       seen(toks({1, 2, 3, 4, 5}), 5, true),
       "alert",
       {},
       {},
       {},
       2,
       2},
      {"a full list whose only difference is fresh tokens clears it",
       with_alerts(with_fresh(cloud(), toks({8})), false, true),
       seen(toks({1, 2, 3, 4, 5, 8}), 6, true),
       "repaired",
       {},
       {},
       toks({8}),
       3,
       2},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Outcome out = run(c.cloud, {c.seen});
    REQUIRE(out.slots.size() == 1);
    REQUIRE(out.report.slots.size() == 1);
    const SlotChanges& ch = out.slots[0];
    const auto& r = out.report.slots[0];
    CHECK(ch.known);
    CHECK(r.verdict == c.verdict);
    CHECK(ch.burn_from_pool == c.burned);
    CHECK(cancelled_orders(ch) == c.cancelled);
    CHECK(ch.add_to_pool == c.added);
    CHECK(r.pool == c.pool);
    CHECK(r.reserved == c.reserved);
    CHECK(r.dispatched == 1);
    CHECK(r.tokens_removed == static_cast<int64_t>(c.burned.size() + c.cancelled.size()));
    CHECK(r.tokens_added == static_cast<int64_t>(c.added.size()));
    CHECK(ch.request_full_snapshot == (c.verdict == "pending"));
    CHECK(r.physical_count == c.seen.physical_count);
    CHECK(r.device_tokens == c.seen.available_tokens);
  }
}

TEST_CASE("the alerts of one slot: raised with a message, said once, cleared") {
  Outcome more = run(cloud(), {seen(toks({1, 2, 3, 4, 5}), 7, false)});
  REQUIRE(more.slots[0].alerts.size() == 2);
  CHECK(more.slots[0].alerts[0] == AlertChange{1, "unknown_slot", false, "", ""});
  const AlertChange& raised = more.slots[0].alerts[1];
  CHECK(raised.code == "physical_mismatch");
  CHECK(raised.raise);
  CHECK(raised.severity == "warning");
  CHECK(raised.message.find("holds 7 items but 5 sale tokens") != std::string::npos);
  CHECK(more.report.slots[0].actions == std::vector<std::string>{"alert: " + raised.message});

  // Already active: raised again (the core says it once), no new action.
  Outcome again = run(with_alerts(cloud(), true, false), {seen(toks({1, 2, 3, 4, 5}), 7, false)});
  CHECK(has_alert(again.slots[0], "physical_mismatch", true));
  CHECK(again.report.slots[0].actions.empty());
  CHECK(again.report.slots[0].verdict == "alert");

  Outcome fewer = run(cloud(), {seen(toks({1, 2, 3, 4, 5}), 3, false)});
  CHECK(fewer.slots[0].alerts[1].severity == "critical");

  // One item still dropping for the consumed dispatched token: no alert.
  Outcome dropping = run(with_alerts(cloud(), true, false), {seen(toks({1, 2, 3, 4}), 5, false)});
  CHECK(has_alert(dropping.slots[0], "physical_mismatch", false));
  CHECK(dropping.report.slots[0].verdict == "in_flight");

  Outcome resurrected = run(cloud(), {seen(toks({1, 2, 3, 4, 5, 8}), 6, true)});
  CHECK(has_alert(resurrected.slots[0], "token_resurrected", true));
  CHECK(resurrected.slots[0].alerts.back().code == "physical_mismatch");
  CHECK_FALSE(resurrected.slots[0].alerts.back().raise);
}

TEST_CASE("unknown tokens that could not be checked are neither added nor alerted on") {
  Cloud c = with_fresh(cloud(), toks({8}));
  c.fresh_error = "database is locked";
  Outcome out = run(c, {seen(toks({1, 2, 3, 4, 5, 8}), 6, true)});
  const SlotChanges& ch = out.slots[0];
  CHECK(ch.add_to_pool.empty());
  CHECK_FALSE(has_alert(ch, "token_resurrected", true));
  CHECK_FALSE(has_alert(ch, "token_resurrected", false));
  REQUIRE(out.report.slots[0].actions.size() == 1);
  CHECK(out.report.slots[0].actions[0] == "could not check 1 unknown tokens: database is locked");
  CHECK(out.report.slots[0].verdict == "repaired");
}

TEST_CASE("lost and added tokens are said in the actions and the warnings") {
  Outcome out = run(with_fresh(cloud(), toks({8})), {seen(toks({2, 5, 8}), 3, true)});
  const SlotChanges& ch = out.slots[0];
  CHECK(ch.burn_from_pool == toks({1}));
  CHECK(cancelled_orders(ch) == std::vector<std::string>{"o3"});
  CHECK(ch.add_to_pool == toks({8}));
  const std::vector<std::string> said = {
      "removed 2 tokens the device no longer has (1 reservations cancelled)",
      "added 1 tokens the cloud lacked to the pool"};
  CHECK(out.report.slots[0].actions == said);
  CHECK(ch.warnings == said);
  // Pool 1,2 less 1 plus 8; reserved 2 less the cancelled o3.
  CHECK(out.report.slots[0].pool == 2);
  CHECK(out.report.slots[0].reserved == 1);
}

TEST_CASE("a slot the cloud does not sell raises unknown_slot and nothing else") {
  Outcome out = run(cloud(), {seen(toks({1}), 1, true, 9)});
  REQUIRE(out.slots.size() == 1);
  CHECK_FALSE(out.slots[0].known);
  CHECK(out.slots[0].burn_from_pool.empty());
  REQUIRE(out.slots[0].alerts.size() == 1);
  CHECK(out.slots[0].alerts[0].code == "unknown_slot");
  CHECK(out.slots[0].alerts[0].raise);
  CHECK(out.report.slots[0].verdict == "alert");
  CHECK(out.report.slots[0].pool == 0);
  CHECK(out.report.verdict == "alert");
}

TEST_CASE("a fresh token offered by two slots joins the first pool only") {
  Input in;
  in.device = "vm-1";
  in.snapshot.slots = {seen(toks({8}), 1, true, 1), seen(toks({8}), 1, true, 2)};
  in.cloud[1] = CloudSlot{};
  in.cloud[2] = CloudSlot{};
  in.fresh = lookup({tok(8)});
  Outcome out = reconcile(in);
  REQUIRE(out.slots.size() == 2);
  CHECK(out.slots[0].add_to_pool == toks({8}));
  CHECK(out.slots[1].add_to_pool.empty());
  CHECK(has_alert(out.slots[1], "token_resurrected", true));
}

TEST_CASE("the report: worst verdict, trigger, seq and the seq_gap alert") {
  Input in;
  in.device = "vm-1";
  in.report_id = "rpt-x";
  in.now_ms = 42;
  in.snapshot_seq = 9;
  in.snapshot.request_id = "gap-3";
  in.snapshot.slots = {seen(toks({1, 2, 3, 4, 5}), 5, false, 1),
                       seen(toks({1, 2, 3, 4, 5, 9}), 6, false, 2)};
  in.cloud[1] = cloud().slot;
  in.cloud[2] = cloud().slot;
  Outcome out = reconcile(in);
  CHECK(out.report.id == "rpt-x");
  CHECK(out.report.device == "vm-1");
  CHECK(out.report.ts_ms == 42);
  CHECK(out.report.snapshot_seq == 9);
  CHECK(out.report.trigger == "seq_gap");
  CHECK_FALSE(out.report.full);
  CHECK(out.report.verdict == "pending");
  CHECK(out.alerts == std::vector<AlertChange>{{0, "seq_gap", false, "", ""}});
  CHECK(reconcile(in).report == out.report);  // deterministic

  in.snapshot.request_id = "";
  CHECK(reconcile(in).alerts.empty());
}

TEST_CASE("triggers") {
  CHECK(trigger_of("rec-1") == "periodic");
  CHECK(trigger_of("ond-1") == "on_demand");
  CHECK(trigger_of("chk-1") == "deadline");
  CHECK(trigger_of("gap-1") == "seq_gap");
  CHECK(trigger_of("full-1") == "digest_mismatch");
  CHECK(trigger_of("prt-1") == "incomplete_snapshot");
  CHECK(trigger_of("") == "device");
  CHECK(trigger_of("rec") == "device");
}

TEST_CASE("the fresh look-up is asked only about well-formed tokens the slot's view lacks") {
  std::vector<std::vector<std::string>> asked;
  // cloud(): pool 1,2; held 3, 4; dispatched 5. Matching lists, in any order: never asked.
  (void)run(cloud(), {seen(toks({1, 2, 3, 4, 5}), 5, true)}, "rec-1", &asked);
  (void)run(cloud(), {seen(toks({5, 4, 3, 2, 1}), 5, true)}, "rec-1", &asked);
  (void)run(cloud(), {seen(toks({1, 2, 3, 4, 5, 9}), 6, false)}, "rec-1", &asked);  // no list
  CHECK(asked.empty());
  SlotSnapshot odd = seen(toks({1, 9, 2, 3, 4, 5, 8}), 9, true);
  odd.tokens->push_back("XYZ");
  odd.tokens->push_back(std::string(32, 'A'));
  odd.available_tokens = static_cast<int>(odd.tokens->size());
  Outcome out = run(with_fresh(cloud(), toks({8})), {odd}, "rec-1", &asked);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == toks({9, 8}));
  CHECK(out.slots[0].add_to_pool == toks({8}));
  // 9 is known (spent), the other two malformed: three not sold.
  bool said = false;
  for (const AlertChange& a : out.slots[0].alerts) {
    if (a.code == "token_resurrected" && a.raise) said = a.message.starts_with("3 tokens ");
  }
  CHECK(said);
}
