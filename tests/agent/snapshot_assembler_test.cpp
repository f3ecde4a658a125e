// SnapshotAssembler on its own: parts in order, a missing part, a duplicate,
// two snapshots interleaved, a newer snapshot superseding an unfinished one,
// an agent restart (orphans), inconsistent parts, and the memory bounds.
#include "core/snapshot_assembler.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "vend/crypto.hpp"
#include "vend/snapshot_parts.hpp"

namespace vend::agent {
namespace {

using Outcome = SnapshotAssembler::Outcome;
constexpr const char* kBoot = "fedcba9876543210fedcba9876543210";
constexpr const char* kBoot2 = "0123456789abcdef0123456789abcdef";

std::vector<std::string> tokens_of(size_t n, size_t salt) {
  std::vector<std::string> out;
  char buf[33];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%016zx%016zx", salt, i);
    out.emplace_back(buf);
  }
  return out;
}

// A full snapshot of `slots` slots x `tokens` tokens; `salt` tells two apart.
proto::Snapshot machine(int slots, size_t tokens, size_t salt = 0, const std::string& id = "r-1") {
  proto::Snapshot s;
  s.request_id = id;
  s.outbox_depth = 3;
  for (int slot = 1; slot <= slots; ++slot) {
    auto t = tokens_of(tokens, salt * 1000 + static_cast<size_t>(slot));
    int n = static_cast<int>(tokens);
    s.slots.push_back(proto::SlotSnapshot{slot, n, n, crypto::token_digest(t), t});
  }
  return s;
}

// Parts of `whole`, about `per_part` tokens each (slots cut mid-list).
std::vector<proto::Snapshot> parts_of(const proto::Snapshot& whole, size_t per_part) {
  auto parts = proto::split_snapshot(
      whole, proto::kSlotEntryMaxBytes * 4 + per_part * proto::kTokenEntryBytes);
  REQUIRE(parts.ok());
  return *parts;
}

struct Feed {
  SnapshotAssembler& a;
  std::string device = "vm-1";
  std::string boot = kBoot;
  // Part i (1-based) of `parts`, whose first seq is `first`.
  SnapshotAssembler::Added operator()(const std::vector<proto::Snapshot>& parts, int i,
                                      uint64_t first) {
    return a.add(device, boot, first + static_cast<uint64_t>(i) - 1,
                 parts[static_cast<size_t>(i - 1)]);
  }
};

TEST_CASE("parts in order join into the snapshot; the last one completes it") {
  SnapshotAssembler a;
  Feed feed{a};
  const proto::Snapshot whole = machine(10, 100);
  auto parts = parts_of(whole, 150);
  const int n = static_cast<int>(parts.size());
  REQUIRE(n >= 5);
  for (int i = 1; i < n; ++i) {
    auto r = feed(parts, i, 40);
    CHECK(r.outcome == Outcome::kPending);
    CHECK(r.first_seq == 40);
  }
  CHECK(a.pending_snapshots() == 1);
  CHECK(a.pending_tokens("vm-1") > 0);
  auto done = feed(parts, n, 40);
  REQUIRE(done.outcome == Outcome::kComplete);
  CHECK(done.snapshot == whole);
  CHECK(done.snapshot.parts == 1);
  CHECK(a.pending_snapshots() == 0);
  CHECK(a.pending_tokens() == 0);
}

TEST_CASE("a snapshot in one message is complete at once") {
  SnapshotAssembler a;
  const proto::Snapshot whole = machine(2, 3);
  auto r = a.add("vm-1", kBoot, 7, whole);
  REQUIRE(r.outcome == Outcome::kComplete);
  CHECK(r.snapshot == whole);
  CHECK(r.first_seq == 7);
}

TEST_CASE("a missing part drops the snapshot once; its later parts are silent orphans") {
  SnapshotAssembler a;
  Feed feed{a};
  auto parts = parts_of(machine(10, 100), 150);
  CHECK(feed(parts, 1, 10).outcome == Outcome::kPending);
  auto gap = feed(parts, 3, 10);
  CHECK(gap.outcome == Outcome::kOrphan);
  CHECK(gap.first_drop);
  CHECK(gap.problem.find("missing") != std::string::npos);
  auto later = feed(parts, 4, 10);
  CHECK(later.outcome == Outcome::kOrphan);
  CHECK_FALSE(later.first_drop);
  CHECK(a.pending_tokens() == 0);
}

TEST_CASE("a duplicate part is ignored and the snapshot still completes") {
  SnapshotAssembler a;
  Feed feed{a};
  const proto::Snapshot whole = machine(6, 50);
  auto parts = parts_of(whole, 100);
  const int n = static_cast<int>(parts.size());
  CHECK(feed(parts, 1, 5).outcome == Outcome::kPending);
  CHECK(feed(parts, 2, 5).outcome == Outcome::kPending);
  CHECK(feed(parts, 2, 5).outcome == Outcome::kDuplicate);
  CHECK(feed(parts, 1, 5).outcome == Outcome::kDuplicate);
  SnapshotAssembler::Added last;
  for (int i = 3; i <= n; ++i) last = feed(parts, i, 5);
  REQUIRE(last.outcome == Outcome::kComplete);
  CHECK(last.snapshot == whole);
}

TEST_CASE(
    "parts of two snapshots interleaved: the newer supersedes, the older's parts are orphans") {
  SnapshotAssembler a;
  Feed feed{a};
  const proto::Snapshot older = machine(6, 50, 1, "r-a");
  const proto::Snapshot newer = machine(6, 50, 2, "r-b");
  auto pa = parts_of(older, 100);
  auto pb = parts_of(newer, 100);
  const int n = static_cast<int>(pb.size());
  CHECK(feed(pa, 1, 100).outcome == Outcome::kPending);
  auto b1 = feed(pb, 1, 200);
  CHECK(b1.outcome == Outcome::kPending);
  CHECK(b1.superseded);
  auto a2 = feed(pa, 2, 100);
  CHECK(a2.outcome == Outcome::kOrphan);
  CHECK_FALSE(a2.first_drop);  // superseded, not lost: nothing to ask for
  SnapshotAssembler::Added last;
  for (int i = 2; i <= n; ++i) {
    last = feed(pb, i, 200);
    if (i < static_cast<int>(pa.size())) CHECK(feed(pa, i + 1, 100).outcome == Outcome::kOrphan);
  }
  REQUIRE(last.outcome == Outcome::kComplete);
  CHECK(last.snapshot == newer);
}

TEST_CASE("two devices' parts interleaved are joined independently") {
  SnapshotAssembler a;
  Feed one{a, "vm-1"};
  Feed two{a, "vm-2"};
  const proto::Snapshot w1 = machine(5, 40, 1);
  const proto::Snapshot w2 = machine(5, 40, 2);
  auto p1 = parts_of(w1, 60);
  auto p2 = parts_of(w2, 60);
  REQUIRE(p1.size() == p2.size());
  const int n = static_cast<int>(p1.size());
  for (int i = 1; i < n; ++i) {
    CHECK(one(p1, i, 1).outcome == Outcome::kPending);
    CHECK(two(p2, i, 9).outcome == Outcome::kPending);
  }
  CHECK(a.pending_snapshots() == 2);
  auto d2 = two(p2, n, 9);
  auto d1 = one(p1, n, 1);
  REQUIRE(d1.outcome == Outcome::kComplete);
  REQUIRE(d2.outcome == Outcome::kComplete);
  CHECK(d1.snapshot == w1);
  CHECK(d2.snapshot == w2);
}

TEST_CASE("a one-message snapshot supersedes an unfinished one") {
  SnapshotAssembler a;
  Feed feed{a};
  auto parts = parts_of(machine(6, 50), 100);
  CHECK(feed(parts, 1, 1).outcome == Outcome::kPending);
  auto whole = a.add("vm-1", kBoot, 30, machine(1, 1));
  CHECK(whole.outcome == Outcome::kComplete);
  CHECK(whole.superseded);
  CHECK(a.pending_snapshots() == 0);
  CHECK(a.pending_tokens() == 0);
}

TEST_CASE("after an agent restart the rest of a snapshot is an orphan, reported once") {
  SnapshotAssembler restarted;  // parts 1..2 were held by the agent before it
  Feed feed{restarted};
  auto parts = parts_of(machine(6, 100), 100);
  REQUIRE(parts.size() >= 4);
  auto first = feed(parts, 3, 20);
  CHECK(first.outcome == Outcome::kOrphan);
  CHECK(first.first_drop);
  CHECK(first.first_seq == 20);
  auto next = feed(parts, 4, 20);
  CHECK(next.outcome == Outcome::kOrphan);
  CHECK_FALSE(next.first_drop);
  // The same seqs from a new boot (a reflashed board) are another snapshot.
  Feed reflashed{restarted, "vm-1", kBoot2};
  CHECK(reflashed(parts, 1, 20).outcome == Outcome::kPending);
}

TEST_CASE("parts that do not make one snapshot are inconsistent") {
  SnapshotAssembler a;
  Feed feed{a};
  auto parts = parts_of(machine(6, 50), 100);
  REQUIRE(parts[1].slots.front().slot == parts[0].slots.back().slot);  // a continuation

  SUBCASE("another request id") {
    feed(parts, 1, 1);
    parts[1].request_id = "r-other";
    CHECK(feed(parts, 2, 1).outcome == Outcome::kInconsistent);
  }
  SUBCASE("a continuation with another digest") {
    feed(parts, 1, 1);
    parts[1].slots.front().digest = std::string(64, '0');
    auto r = feed(parts, 2, 1);
    CHECK(r.outcome == Outcome::kInconsistent);
    CHECK(r.first_drop);
  }
  SUBCASE("a slot repeated later") {
    feed(parts, 1, 1);
    parts[1].slots.back().slot = 1;
    CHECK(feed(parts, 2, 1).outcome == Outcome::kInconsistent);
  }
  SUBCASE("fewer tokens than available") {
    for (int i = 1; i < static_cast<int>(parts.size()); ++i) feed(parts, i, 1);
    parts.back().slots.back().tokens->pop_back();
    CHECK(feed(parts, static_cast<int>(parts.size()), 1).outcome == Outcome::kInconsistent);
  }
  SUBCASE("a seq below its part number") {
    CHECK(a.add("vm-1", kBoot, 1, parts[2]).outcome == Outcome::kInconsistent);
  }
  CHECK(a.pending_tokens() == 0);
}

TEST_CASE("memory is bounded per snapshot and in total") {
  SnapshotAssembler a({/*per snapshot*/ 1000, /*total*/ 1500});
  SUBCASE("one snapshot over the per-snapshot bound is dropped") {
    Feed feed{a};
    auto parts = parts_of(machine(12, 100), 150);  // 1200 tokens
    SnapshotAssembler::Added r;
    int i = 1;
    for (; i <= static_cast<int>(parts.size()); ++i) {
      r = feed(parts, i, 1);
      if (r.outcome != Outcome::kPending) break;
    }
    CHECK(r.outcome == Outcome::kTooLarge);
    CHECK(r.first_drop);
    CHECK(a.pending_tokens() == 0);
    CHECK(feed(parts, i + 1, 1).outcome == Outcome::kOrphan);
  }
  SUBCASE("over the total, the least recently fed other device gives way") {
    std::vector<std::vector<proto::Snapshot>> parts;
    for (size_t d = 0; d < 4; ++d) parts.push_back(parts_of(machine(9, 100, d), 450));
    Feed devs[] = {{a, "vm-0"}, {a, "vm-1"}, {a, "vm-2"}, {a, "vm-3"}};
    for (size_t d = 0; d < 3; ++d) CHECK(devs[d](parts[d], 1, 1).outcome == Outcome::kPending);
    CHECK(a.pending_tokens() <= 1500);
    CHECK(devs[3](parts[3], 1, 1).outcome == Outcome::kPending);  // vm-0 gives way
    CHECK(a.pending_tokens() <= 1500);
    CHECK(a.pending_tokens("vm-0") == 0);
    auto back = devs[0](parts[0], 2, 1);
    CHECK(back.outcome == Outcome::kOrphan);
    CHECK(back.first_drop);  // evicted, so the caller asks vm-0 again
  }
}

}  // namespace
}  // namespace vend::agent
