// TrustedProxies (http/trusted_proxies.hpp): the --trusted-proxy list, and
// the client's address from a request's peer and its X-Forwarded-For.
#include "http/trusted_proxies.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "shell/shell_options.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

TrustedProxies proxies(const std::string& list) {
  auto p = TrustedProxies::parse(list);
  REQUIRE_MESSAGE(p.ok(), vend::test::error_text(p));
  return *p;
}

std::string refusal(const std::string& list) {
  auto p = TrustedProxies::parse(list);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code == "bad_usage");
  return p.error().message;
}

}  // namespace

TEST_CASE("IP literals: v4, v6, bracketed v6; v4 one address whichever way it is written") {
  CHECK(IpAddress::parse("203.0.113.7")->to_string() == "203.0.113.7");
  CHECK(IpAddress::parse("203.0.113.7")->is_v4());
  CHECK(IpAddress::parse("::ffff:203.0.113.7")->to_string() == "203.0.113.7");
  CHECK(IpAddress::parse("2001:DB8:0:0::1")->to_string() == "2001:db8::1");
  CHECK(IpAddress::parse("[2001:db8::1]")->to_string() == "2001:db8::1");
  for (const char* bad : {"", "unknown", "203.0.113.7:443", "203.0.113", "1.2.3.256", "[1.2.3.4]",
                          "fe80::1%eth0", "[2001:db8::1]:80", " 1.2.3.4"}) {
    CHECK_FALSE_MESSAGE(IpAddress::parse(bad).has_value(), bad);
  }
}

TEST_CASE("--trusted-proxy: addresses and CIDR blocks, v4 and v6; bad entries named") {
  TrustedProxies p = proxies("127.0.0.1, 10.0.0.0/8,2001:db8:1::/48,::1");
  CHECK(p.to_string() == "127.0.0.1,10.0.0.0/8,2001:db8:1::/48,::1");
  CHECK(p.trusts("127.0.0.1"));
  CHECK(p.trusts("::ffff:127.0.0.1"));  // the same peer on a dual-stack socket
  CHECK_FALSE(p.trusts("127.0.0.2"));
  CHECK(p.trusts("10.255.3.4"));
  CHECK_FALSE(p.trusts("11.0.0.1"));
  CHECK(p.trusts("2001:db8:1:ffff::9"));
  CHECK_FALSE(p.trusts("2001:db8:2::9"));
  CHECK(p.trusts("::1"));
  CHECK_FALSE(p.trusts("junk"));
  CHECK(proxies("0.0.0.0/0").trusts("198.51.100.1"));
  CHECK_FALSE(proxies("0.0.0.0/0").trusts("2001:db8::1"));  // a v4 block holds v4 only
  CHECK(proxies("192.168.1.128/25").trusts("192.168.1.200"));
  CHECK_FALSE(proxies("192.168.1.128/25").trusts("192.168.1.100"));
  CHECK(TrustedProxies().empty());

  CHECK(refusal("10.0.0.1,,10.0.0.2").find("is empty") != std::string::npos);
  CHECK(refusal("proxy.local").find("'proxy.local' is not an IPv4 or IPv6 address") !=
        std::string::npos);
  CHECK(refusal("10.0.0.0/33").find("bad prefix length: expected /0../32") != std::string::npos);
  CHECK(refusal("::/129").find("expected /0../128") != std::string::npos);
  CHECK(refusal("10.0.0.0/x").find("bad prefix length") != std::string::npos);
  CHECK(refusal("10.1.2.3/8").find("host bits set: the block is 10.0.0.0/8") != std::string::npos);
}

TEST_CASE("the client's address: the right-most forwarded one that is not a trusted proxy") {
  TrustedProxies p = proxies("127.0.0.1,10.0.0.0/8");
  using Lines = std::vector<std::string>;
  // Not a trusted peer: its header is ignored, whatever it says.
  CHECK(*p.client_address("192.0.2.9", Lines{"198.51.100.1"}) == "192.0.2.9");
  CHECK(*p.client_address("192.0.2.9", Lines{"junk"}) == "192.0.2.9");
  // A trusted peer without the header (its own health check): the peer.
  CHECK(*p.client_address("127.0.0.1", Lines{}) == "127.0.0.1");
  // nginx's $proxy_add_x_forwarded_for: what the client sent, then its peer.
  CHECK(*p.client_address("127.0.0.1", Lines{"198.51.100.1"}) == "198.51.100.1");
  CHECK(*p.client_address("127.0.0.1", Lines{"6.6.6.6, 198.51.100.1"}) == "198.51.100.1");
  // Through a second trusted hop; over two header lines; v6, canonical.
  CHECK(*p.client_address("127.0.0.1", Lines{"198.51.100.1 ,10.1.1.1"}) == "198.51.100.1");
  CHECK(*p.client_address("127.0.0.1", Lines{"6.6.6.6", "198.51.100.2", "10.1.1.1"}) ==
        "198.51.100.2");
  CHECK(*p.client_address("::ffff:127.0.0.1", Lines{"2001:DB8::7"}) == "2001:db8::7");
  // Every hop a trusted proxy: the left-most.
  CHECK(*p.client_address("127.0.0.1", Lines{"10.2.2.2, 10.1.1.1"}) == "10.2.2.2");
  // What the client wrote left of its own address is never read.
  CHECK(*p.client_address("127.0.0.1", Lines{"not an address, 198.51.100.1"}) == "198.51.100.1");
  // Untrusted configuration: nobody's header counts.
  CHECK(*TrustedProxies().client_address("127.0.0.1", Lines{"198.51.100.1"}) == "127.0.0.1");
}

TEST_CASE("a malformed X-Forwarded-For from a trusted proxy is refused, naming it") {
  TrustedProxies p = proxies("127.0.0.1");
  using Lines = std::vector<std::string>;
  auto junk = p.client_address("127.0.0.1", Lines{"198.51.100.1:5555"});
  REQUIRE_FALSE(junk.ok());
  CHECK(junk.error().code == "bad_request");
  CHECK(junk.error().message ==
        "header 'X-Forwarded-For' from trusted proxy 127.0.0.1: '198.51.100.1:5555' is not an IP "
        "address");
  auto empty = p.client_address("127.0.0.1", Lines{"198.51.100.1,"});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message.find("an empty element") != std::string::npos);
  CHECK_FALSE(p.client_address("127.0.0.1", Lines{""}).ok());
  CHECK_FALSE(p.client_address("127.0.0.1", Lines{"unknown"}).ok());
}

TEST_CASE("vend-agent --trusted-proxy: none by default; a bad list is a usage error") {
  auto defaults = parse_options({});
  REQUIRE(defaults.ok());
  CHECK(defaults->trusted_proxies.empty());
  auto o = parse_options({"--trusted-proxy", "10.0.0.0/8,fd00::1"});
  REQUIRE_MESSAGE(o.ok(), vend::test::error_text(o));
  CHECK(o->trusted_proxies.trusts("10.9.9.9"));
  CHECK(o->trusted_proxies.trusts("fd00::1"));
  auto bad = parse_options({"--trusted-proxy=nginx"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "bad_usage");
  CHECK(bad.error().message.find("--trusted-proxy: 'nginx'") == 0);
  CHECK(usage().find("--trusted-proxy ADDR[,ADDR...]") != std::string::npos);
}

}  // namespace vend::agent
