// The order rate limits of HttpApi (docs/agent.md "Rate limits").
#include "http/http_api.hpp"
#include "http/http_json.hpp"

namespace vend::agent {

namespace {

bool is_on(const RateLimit& l) { return l.rate_per_s > 0 && l.burst >= 1; }

}  // namespace

std::optional<HttpReply> HttpApi::order_rate_limited(const std::string& device, bool known,
                                                     const std::string& client) {
  if (options_.rate_limiter == nullptr) return std::nullopt;
  std::vector<BucketRequest> buckets;
  std::vector<const char*> names;
  if (is_on(options_.machine_limit)) {
    // '?' is no id's character: the shared bucket is no machine's.
    buckets.push_back({known ? "machine:" + device : "machine:?", options_.machine_limit});
    names.push_back("machine");
  }
  if (is_on(options_.client_limit)) {
    buckets.push_back({"client:" + client, options_.client_limit});
    names.push_back("client");
  }
  RateDecision d = options_.rate_limiter->take_all(buckets);
  if (d.allowed) return std::nullopt;
  std::string limit = names.at(d.limited);
  (limit == "machine" ? rate_limited_machine_ : rate_limited_client_)
      .fetch_add(1, std::memory_order_relaxed);
  const RateLimit& l = limit == "machine" ? options_.machine_limit : options_.client_limit;
  int64_t retry_s = (d.retry_after_ms + 999) / 1000;
  std::string what = limit == "client" ? "this client"
                     : known           ? "machine '" + device + "'"
                                       : "machines this agent does not know";
  HttpReply reply{
      429, limit_error_body("rate_limited",
                            "too many orders for " + what + " (" + format_double(l.rate_per_s) +
                                "/s, burst " + std::to_string(l.burst) + "): retry after " +
                                std::to_string(retry_s) + " s",
                            limit)};
  reply.headers.emplace_back("Retry-After", std::to_string(retry_s));
  return reply;
}

std::string HttpApi::rate_limit_metrics() const {
  PrometheusText text;
  text.family("vend_rate_limited_total", MetricType::kCounter,
              "Orders answered 429, by the limit that refused them.");
  text.sample({{"limit", "machine"}}, rate_limited_machine_.load(std::memory_order_relaxed));
  text.sample({{"limit", "client"}}, rate_limited_client_.load(std::memory_order_relaxed));
  uint64_t errors = options_.rate_limiter ? options_.rate_limiter->errors_total() : 0;
  text.scalar("vend_rate_limiter_errors_total", MetricType::kCounter,
              "Rate-limit checks that failed (Redis down, slow or wrong) and let the order "
              "through.",
              errors);
  text.scalar("vend_http_bad_forwarded_for_total", MetricType::kCounter,
              "Customer requests refused 400: a malformed X-Forwarded-For from a "
              "--trusted-proxy.",
              bad_forwarded_.load(std::memory_order_relaxed));
  return text.take();
}

}  // namespace vend::agent
