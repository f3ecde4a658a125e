// RedisLimiterOptions::parse_url: the --redis URL (redis://HOST:PORT).
#include <charconv>

#include "limits/redis_rate_limiter.hpp"

namespace vend::agent {

namespace {

Error bad_url(std::string_view url, std::string_view why) {
  return make_error("bad_url", "redis url '" + std::string(url) + "': " + std::string(why));
}

struct HostPort {
  std::string_view host;
  std::string_view port;  // empty when absent
};

// Splits "host[:port]" or "[v6]:port". Returns false when malformed.
bool split_host_port(std::string_view rest, HostPort* out) {
  if (rest.starts_with('[')) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return false;
    out->host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (after.empty()) return true;
    if (after[0] != ':') return false;
    out->port = after.substr(1);
    return !out->port.empty();
  }
  size_t colon = rest.find(':');
  out->host = rest.substr(0, colon);
  if (colon == std::string_view::npos) return true;
  out->port = rest.substr(colon + 1);
  return !out->port.empty() && out->port.find(':') == std::string_view::npos;
}

}  // namespace

Result<RedisLimiterOptions> RedisLimiterOptions::parse_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme)) return bad_url(url, "expected the scheme redis://");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('@') != std::string_view::npos) {
    return bad_url(url, "credentials are not supported");
  }
  if (rest.find('/') != std::string_view::npos) {
    return bad_url(url, "a path or database number is not supported");
  }
  HostPort hp;
  if (!split_host_port(rest, &hp)) {
    return bad_url(url, "expected host[:port] (an IPv6 host in brackets: [::1]:6379)");
  }
  if (hp.host.empty()) return bad_url(url, "missing host");
  RedisLimiterOptions options;
  options.host = std::string(hp.host);
  if (!hp.port.empty()) {
    int port = 0;
    auto [end, ec] = std::from_chars(hp.port.data(), hp.port.data() + hp.port.size(), port);
    if (ec != std::errc() || end != hp.port.data() + hp.port.size() || port < 1 || port > 65535) {
      return bad_url(url, "port '" + std::string(hp.port) + "' is not a number in 1..65535");
    }
    options.port = port;
  }
  return options;
}

std::string RedisLimiterOptions::address() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace vend::agent
