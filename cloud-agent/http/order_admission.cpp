#include "http/order_admission.hpp"

#include <vector>

#include "http/http_json.hpp"
#include "http/metrics.hpp"
#include "vend/prometheus_text.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";

bool is_on(const RateLimit& l) { return l.rate_per_s > 0 && l.burst >= 1; }

}  // namespace

OrderAdmission::OrderAdmission(const HttpApiOptions& options, const Clock& clock, Logger& log)
    : options_(options), bad_input_log_(clock, log, RateLimitedLog::Options{60'000, 256}) {}

Result<std::string> OrderAdmission::client_of(const HttpRequest& req) {
  std::vector<std::string> forwarded;
  size_t lines = req.header_count("X-Forwarded-For");
  for (size_t i = 0; i < lines; ++i) forwarded.push_back(req.header("X-Forwarded-For", i));
  auto address = options_.trusted_proxies.client_address(req.remote_addr, forwarded);
  if (!address.ok()) {
    bad_forwarded_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(bad_input_log_mu_);
    bad_input_log_.log(LogLevel::kWarn, kLog, req.remote_addr, "bad_forwarded_for",
                       req.method + " " + req.path + " refused: " + address.error().message);
    return address.error();
  }
  if (!req.has_header("X-Client-Id")) return "addr:" + *address;
  if (req.header_count("X-Client-Id") > 1) {
    return http::bad_request("header 'X-Client-Id' given more than once");
  }
  std::string id = req.header("X-Client-Id");
  if (!http::is_valid_id(id)) {
    return http::bad_request("header 'X-Client-Id' must be 1..64 characters of [A-Za-z0-9._-]");
  }
  return "id:" + id;
}

std::optional<HttpReply> OrderAdmission::order_rate_limited(const std::string& device, bool known,
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

std::string OrderAdmission::rate_limit_metrics() const {
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
