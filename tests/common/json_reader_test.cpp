// The one strict JSON reader (common/include/vend/json_reader.hpp): its
// problems as values, and the protocol's wording of them. The HTTP API's
// wording is checked through its routes (tests/agent/http_api_test.cpp).
#include "vend/json_reader.hpp"

#include <doctest/doctest.h>

#include <string>

using vend::Error;
using vend::json::FieldProblem;
using vend::json::FieldReader;
using vend::json::Json;
using vend::json::parse_strict;
using vend::json::ParseProblem;

namespace {

// A wording that keeps the last problem reported and words it as its path.
FieldProblem last;
Error keep(const FieldProblem& p, std::string_view) {
  last = p;
  return Error{"kept", p.path + p.name};
}

Json parsed(const std::string& text) {
  Json j;
  REQUIRE_FALSE(parse_strict(text, j).has_value());
  return j;
}

}  // namespace

TEST_CASE("parse_strict names each kind of problem") {
  Json j;
  auto syntax = parse_strict(R"({"a":1)", j);
  REQUIRE(syntax);
  CHECK(syntax->kind == ParseProblem::Kind::kSyntax);
  CHECK(syntax->message == "invalid JSON at byte " + std::to_string(syntax->position));
  CHECK(syntax->parser_detail.find("syntax error") != std::string::npos);
  auto dup = parse_strict(R"({"a":1,"a":2})", j);
  REQUIRE(dup);
  CHECK(dup->kind == ParseProblem::Kind::kDuplicateKey);
  CHECK(dup->key == "a");
  CHECK(dup->message == "duplicate key 'a'");
  auto deep = parse_strict("[[[[[[[[[1]]]]]]]]]", j);
  REQUIRE(deep);
  CHECK(deep->kind == ParseProblem::Kind::kTooDeep);
  CHECK_FALSE(parse_strict("[[[[[[[[1]]]]]]]]", j).has_value());  // 8 levels
}

TEST_CASE("a field problem carries what the wording needs") {
  Json j = parsed(R"({"n":"x","m":1.5,"b":0})");
  FieldReader r(j, "t", "slots[1].", keep);
  r.int64_in("n", 1, 9);
  CHECK(last.kind == FieldProblem::Kind::kWrongType);
  CHECK(last.path == "slots[1].");
  CHECK(last.name == "n");
  CHECK(last.expected == "an integer");
  CHECK(std::string(last.actual) == "a string");
  CHECK(r.take_error().message == "slots[1].n");

  Json k = parsed(R"({"n":10})");
  FieldReader range(k, "t", "", keep);
  range.int64_in("n", 1, 9);
  CHECK(last.kind == FieldProblem::Kind::kOutOfRange);
  CHECK(last.rule == FieldProblem::Rule::kRange);
  CHECK(last.lo == "1");
  CHECK(last.hi == "9");

  Json t = parsed(R"({"s":"a\u0001b"})");
  FieldReader text(t, "t", "", keep);
  CHECK(text.text("s", 10, /*no_controls=*/true).empty());
  CHECK(last.rule == FieldProblem::Rule::kControlChars);
}

TEST_CASE("the protocol's wording: codes of protocol.hpp, the field and the type") {
  Json j = parsed(R"({"slot":300,"x":1})");
  FieldReader r(j, "dispense", "slots[2].");
  static constexpr std::string_view kKnown[] = {"slot"};
  r.only(kKnown);
  REQUIRE(r.failed());
  Error unknown = r.take_error();
  CHECK(unknown.code == "unknown_field");
  CHECK(unknown.message == "unknown field 'slots[2].x' in dispense");

  Json k = parsed(R"({"slot":300})");
  FieldReader range(k, "dispense");
  range.integer("slot", 1, 255);
  CHECK(range.take_error().message == "field 'slot' in dispense must be in 1..255");

  Json m = parsed("{}");
  FieldReader missing(m, "dispense");
  missing.id("order_id");
  Error e = missing.take_error();
  CHECK(e.code == "missing_field");
  CHECK(e.message == "missing field 'order_id' in dispense");
}

TEST_CASE("the first problem is kept; later reads do nothing") {
  Json j = parsed(R"({"a":true,"b":"x"})");
  FieldReader r(j, "t");
  CHECK(r.int64_in("a", 0, 1) == 0);
  CHECK(r.id("b").empty());  // would pass, but a problem is recorded
  CHECK(r.take_error().message == "field 'a' in t must be an integer");
}
