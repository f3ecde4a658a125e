// The server's request value (cloud-agent/http/http_request.hpp).
#include "http/http_request.hpp"

#include <doctest/doctest.h>

using vend::agent::HttpRequest;

TEST_CASE("header names match in any case and keep every repetition in order") {
  HttpRequest req;
  req.headers.emplace("X-Forwarded-For", "10.0.0.1");
  req.headers.emplace("content-type", "application/json");
  req.headers.emplace("x-forwarded-for", "10.0.0.2");
  CHECK(req.has_header("X-FORWARDED-FOR"));
  CHECK(req.has_header("Content-Type"));
  CHECK_FALSE(req.has_header("Authorization"));
  CHECK(req.header_count("x-Forwarded-for") == 2);
  CHECK(req.header("X-Forwarded-For") == "10.0.0.1");
  CHECK(req.header("X-Forwarded-For", 1) == "10.0.0.2");
  CHECK(req.header("X-Forwarded-For", 2).empty());
  CHECK(req.header("Authorization").empty());
}

TEST_CASE("query parameters are counted by exact name") {
  HttpRequest req;
  req.params.emplace("limit", "5");
  req.params.emplace("limit", "6");
  req.params.emplace("Limit", "7");
  CHECK(req.param_count("limit") == 2);
  CHECK(req.param_count("Limit") == 1);
  CHECK(req.param_count("state") == 0);
  CHECK(req.params.begin()->first == "Limit");  // sorted by name
}
