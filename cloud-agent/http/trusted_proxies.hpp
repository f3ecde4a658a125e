// TrustedProxies: which TCP peers may name the client they forward a request
// for (vend-agent --trusted-proxy), and the client's address that follows
// from a request's peer and its X-Forwarded-For header. Pure: no sockets, no
// clock. Immutable after parse(), so thread-safe to read.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vend/result.hpp"

namespace vend::agent {

// An IPv4 or IPv6 address, IPv4 held as its IPv4-mapped IPv6 form
// (::ffff:a.b.c.d), so a v4 peer and the same address seen on a dual-stack
// socket are one address.
struct IpAddress {
  std::array<uint8_t, 16> bytes{};

  // A literal: dotted-quad IPv4, or IPv6 (RFC 4291 text, optionally in
  // brackets); no port, no zone; nullopt otherwise.
  static std::optional<IpAddress> parse(std::string_view text);
  bool is_v4() const;
  // Canonical text: dotted quad for IPv4 (mapped ones too), RFC 5952 IPv6.
  std::string to_string() const;
};

class TrustedProxies {
 public:
  TrustedProxies() = default;  // trusts nobody: forwarded headers are ignored

  // "ADDR[,ADDR...]": each an IPv4 or IPv6 address, or a CIDR block
  // ADDR/N (N up to 32, or 128 for IPv6; the address's host bits must be 0);
  // spaces around entries are ignored. bad_usage naming the entry otherwise.
  static Result<TrustedProxies> parse(std::string_view list);

  bool empty() const { return blocks_.empty(); }
  // True when `address` (a literal as parse() reads it) is in a block.
  bool trusts(std::string_view address) const;
  bool trusts(const IpAddress& address) const;

  // The client's address of a request from TCP peer `peer` whose
  // X-Forwarded-For header lines are `forwarded_for`, in order:
  //  - a peer that is not trusted, or sends no header: `peer`, as given;
  //  - else the elements of the list (the lines joined by commas), walked
  //    from the right: the first that is not itself a trusted proxy is the
  //    client (canonical text); if every one is, the left-most.
  // Only the walked elements are read: those left of the client were
  // written by the client itself and mean nothing. bad_request naming the
  // proxy and the element when a walked element is empty or not an address
  // (the proxy, which wrote it, is misconfigured).
  Result<std::string> client_address(std::string_view peer,
                                     const std::vector<std::string>& forwarded_for) const;

  // The entries as given to parse(), canonical, comma-separated.
  std::string to_string() const;

 private:
  struct Block {
    IpAddress base;
    int prefix_bits = 128;  // of the 128-bit (mapped) form
  };
  std::vector<Block> blocks_;
};

}  // namespace vend::agent
