// OpsSeries on a ManualClock: per-minute counts, payment -> result latency
// percentiles, availability over the window, the window's end, and its
// bounds (pending messages, undecodable ones).
#include "http/ops_series.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "vend/clock.hpp"
#include "vend/ops.hpp"

namespace vend::agent {
namespace {

using Json = nlohmann::json;
constexpr int64_t kMinute = 60'000;
// A whole minute, so the tests know which bucket a time falls in.
constexpr int64_t kStart = 1'700'000'040'000 - 1'700'000'040'000 % kMinute;

ops::OrderEvent event(const std::string& id, const std::string& from, const std::string& to,
                      int64_t ts) {
  return ops::OrderEvent{id, "vm-1", 1, from, to, 150, "", ts};
}

void offer_orders(OpsSeries& s, std::vector<ops::OrderEvent> events) {
  s.offer("orders", ops::encode(ops::OrderEvents{std::move(events)}));
}

void offer_status(OpsSeries& s, const std::string& device, bool online, int64_t ts) {
  ops::DeviceStatus st;
  st.device = device;
  st.online = online;
  st.ts_ms = ts;
  s.offer("device", ops::encode(st));
}

// One sale: created, paid, dispatched and completed `latency_ms` after the payment.
void sale(OpsSeries& s, const std::string& id, int64_t at, int64_t latency_ms) {
  offer_orders(s, {event(id, "", "RESERVED", at), event(id, "RESERVED", "PAID", at + 1),
                   event(id, "PAID", "DISPATCHED", at + 2),
                   event(id, "DISPATCHED", "COMPLETED", at + 1 + latency_ms)});
}

TEST_CASE("orders, sales and failures per minute; latency percentiles within 12%") {
  ManualClock clock(kStart);
  OpsSeries s(OpsSeriesOptions{}, clock);
  for (int i = 0; i < 98; ++i) sale(s, "o-" + std::to_string(i), kStart + 100, 200);
  sale(s, "o-slow-1", kStart + 100, 5000);
  sale(s, "o-slow-2", kStart + 100, 5000);
  offer_orders(
      s, {event("o-f", "", "RESERVED", kStart + 10), event("o-f", "RESERVED", "PAID", kStart + 11),
          event("o-f", "PAID", "DISPATCHED", kStart + 12),
          event("o-f", "DISPATCHED", "FAILED", kStart + 511)});
  offer_orders(s, {event("o-next", "", "RESERVED", kStart + kMinute + 5)});
  clock.advance(kMinute + 10'000);
  Json j = Json::parse(s.render());
  REQUIRE(j["minutes"].size() == 60);
  Json before = j["minutes"][58];
  Json now = j["minutes"][59];
  CHECK(before["start_ms"] == kStart);
  CHECK(before["orders"] == 101);
  CHECK(before["sales"] == 100);
  CHECK(before["failed"] == 1);
  CHECK(before["latency_ms"]["count"] == 101);  // the failure is a result too
  auto p50 = before["latency_ms"]["p50"].get<int64_t>();
  auto p99 = before["latency_ms"]["p99"].get<int64_t>();
  CHECK(p50 >= 176);  // 200 ms within 12%
  CHECK(p50 <= 224);
  CHECK(p99 >= 4400);  // 5000 ms within 12%
  CHECK(p99 <= 5600);
  CHECK(now["orders"] == 1);
  CHECK(now["latency_ms"].is_null());
  CHECK(j["minutes"][0]["orders"] == 0);
}

TEST_CASE("availability: the share of the window each device was online") {
  ManualClock clock(kStart);
  OpsSeries s(OpsSeriesOptions{}, clock);
  offer_status(s, "vm-a", true, kStart);
  offer_status(s, "vm-b", false, kStart);
  clock.advance(30 * kMinute);
  offer_status(s, "vm-a", false, clock.wall_ms());  // down after 30 minutes
  offer_status(s, "vm-b", true, clock.wall_ms());   // up after 30 minutes
  clock.advance(10 * kMinute);
  offer_status(s, "vm-a", true, clock.wall_ms());  // back after 10
  clock.advance(20 * kMinute);                     // 60 minutes observed in all
  Json j = Json::parse(s.render());
  REQUIRE(j["availability"].size() == 2);
  CHECK(j["availability"][0]["device"] == "vm-a");
  CHECK(j["availability"][0]["share"].get<double>() == doctest::Approx(50.0 / 60).epsilon(0.01));
  CHECK(j["availability"][0]["online"] == true);
  CHECK(j["availability"][1]["share"].get<double>() == doctest::Approx(30.0 / 60).epsilon(0.01));
  // An hour later, only the last hour counts: vm-a was online all of it.
  clock.advance(60 * kMinute);
  j = Json::parse(s.render());
  CHECK(j["availability"][0]["share"].get<double>() == doctest::Approx(1.0).epsilon(0.02));
}

TEST_CASE("the window ends after `minutes`: old buckets and events are gone") {
  ManualClock clock(kStart);
  OpsSeries s(OpsSeriesOptions{}, clock);
  sale(s, "o-1", kStart + 100, 50);
  CHECK(Json::parse(s.render())["minutes"][59]["sales"] == 1);
  clock.advance(60 * kMinute);
  Json j = Json::parse(s.render());
  for (const auto& m : j["minutes"]) CHECK(m["sales"] == 0);
  sale(s, "o-old", kStart + 200, 50);  // older than the window: not counted
  j = Json::parse(s.render());
  for (const auto& m : j["minutes"]) CHECK(m["orders"] == 0);
}

TEST_CASE("bounded: the oldest pending messages are dropped and counted; bad ones skipped") {
  ManualClock clock(kStart);
  OpsSeriesOptions o;
  o.max_pending = 3;
  OpsSeries s(o, clock);
  for (int i = 0; i < 5; ++i) {
    offer_orders(s, {event("o-" + std::to_string(i), "", "RESERVED", kStart + i)});
  }
  s.offer("orders", "{not json");
  s.offer("alert", "ignored: not kept");
  Json j = Json::parse(s.render());
  CHECK(j["dropped_messages"] == 3);  // 6 kept-kind messages, 3 fit
  CHECK(j["bad_messages"] == 1);
  CHECK(j["minutes"][59]["orders"] == 2);
}

}  // namespace
}  // namespace vend::agent
