// The HTTP API's route patterns (cloud-agent/http/path_pattern.hpp).
#include "http/path_pattern.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using vend::agent::http::path_segment;
using vend::agent::http::PathPattern;

TEST_CASE("a literal pattern matches its path and nothing else") {
  PathPattern p("/v1/orders");
  CHECK(p.matches("/v1/orders"));
  CHECK_FALSE(p.matches("/v1/orders/"));
  CHECK_FALSE(p.matches("/v1/order"));
  CHECK_FALSE(p.matches("/v1/ordersx"));
  CHECK_FALSE(p.matches("/v1/orders/x"));
  CHECK_FALSE(p.matches("v1/orders"));
  CHECK_FALSE(p.matches(""));
  CHECK_FALSE(p.matches("//v1/orders"));
}

TEST_CASE("{id} takes one or more characters of the id alphabet") {
  PathPattern p("/v1/orders/{id}/payment");
  CHECK(p.matches("/v1/orders/ord-1/payment"));
  CHECK(p.matches("/v1/orders/A.b_c-9/payment"));
  CHECK(p.matches("/v1/orders/x/payment"));
  CHECK_FALSE(p.matches("/v1/orders//payment"));
  CHECK_FALSE(p.matches("/v1/orders/ord 1/payment"));
  CHECK_FALSE(p.matches("/v1/orders/ord%201/payment"));
  CHECK_FALSE(p.matches("/v1/orders/ord-1/payment/"));
  CHECK_FALSE(p.matches("/v1/orders/ord-1"));
  CHECK_FALSE(p.matches("/v1/orders/a/b/payment"));
  CHECK(PathPattern("/v1/orders/{id}").matches("/v1/orders/ord-1"));
  CHECK_FALSE(PathPattern("/v1/orders/{id}").matches("/v1/orders/"));
}

TEST_CASE("{n} takes 1..9 digits") {
  PathPattern p("/v1/devices/{id}/slots/{n}");
  CHECK(p.matches("/v1/devices/vm-1/slots/1"));
  CHECK(p.matches("/v1/devices/vm-1/slots/123456789"));
  CHECK_FALSE(p.matches("/v1/devices/vm-1/slots/1234567890"));
  CHECK_FALSE(p.matches("/v1/devices/vm-1/slots/"));
  CHECK_FALSE(p.matches("/v1/devices/vm-1/slots/-1"));
  CHECK_FALSE(p.matches("/v1/devices/vm-1/slots/1a"));
}

TEST_CASE("{file} is last and may be empty") {
  PathPattern p("/console/{file}");
  CHECK(p.matches("/console/"));
  CHECK(p.matches("/console/app.js"));
  CHECK_FALSE(p.matches("/console"));
  CHECK_FALSE(p.matches("/console/a/b"));
  CHECK_FALSE(p.matches("/console/../x"));  // two segments
  CHECK_FALSE(p.matches("/console/a b"));
  CHECK_THROWS_AS(PathPattern("/console/{file}/x"), std::invalid_argument);
  CHECK_THROWS_AS(PathPattern("/v1/{ids}"), std::invalid_argument);
  CHECK_THROWS_AS(PathPattern("v1"), std::invalid_argument);
}

TEST_CASE("path_segment counts from the first segment after '/'") {
  CHECK(path_segment("/v1/orders/ord-1/payment", 0) == "v1");
  CHECK(path_segment("/v1/orders/ord-1/payment", 2) == "ord-1");
  CHECK(path_segment("/v1/orders/ord-1/payment", 3) == "payment");
  CHECK(path_segment("/v1/orders/ord-1/payment", 4).empty());
  CHECK(path_segment("/console/", 1).empty());
  CHECK(path_segment("", 0).empty());
}
