#include "shell/refund_sender.hpp"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "vend/thread_name.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "refunds";
constexpr size_t kMaxErrorBody = 120;

bool retryable(int status) { return status >= 500 || status == 408 || status == 429; }

}  // namespace

Result<std::unique_ptr<RefundSender>> RefundSender::create(AgentCore& core,
                                                           RefundSenderOptions options,
                                                           const Clock& clock, Logger& log) {
  const std::string& url = options.url;
  size_t scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return make_error("bad_request",
                      "refund URL '" + url + "' must start with http:// or https://");
  }
  size_t path_at = url.find('/', scheme_end + 3);
  std::string base = url.substr(0, path_at);
  std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  if (base.size() <= scheme_end + 3) {
    return make_error("bad_request", "refund URL '" + url + "' has no host");
  }
  return std::unique_ptr<RefundSender>(
      new RefundSender(core, std::move(options), base, path, clock, log));
}

RefundSender::RefundSender(AgentCore& core, RefundSenderOptions options, std::string base,
                           std::string path, const Clock& clock, Logger& log)
    : core_(core),
      options_(std::move(options)),
      base_(std::move(base)),
      path_(std::move(path)),
      clock_(clock),
      log_(log) {}

RefundSender::~RefundSender() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RefundSender::start() {
  thread_ = std::thread([this] {
    name_this_thread("vend-refunds");
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      run_once();
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms),
                     [this] { return stopping_; });
    }
  });
}

size_t RefundSender::run_once() {
  auto due = core_.take_due_refunds(options_.batch_max);
  size_t tried = 0;
  for (const auto& refund : due) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;  // the rest stays PENDING: sent after the restart
    }
    deliver(refund);
    ++tried;
  }
  return tried;
}

void RefundSender::deliver(const RefundDelivery& refund) {
  std::string body = nlohmann::json{
      {"refund_id", refund.refund_id},
      {"payment_id", refund.payment_id},
      {"order_id", refund.order_id},
      {"amount_cents", refund.amount_cents},
      {"reason",
       refund.reason}}.dump();
  httplib::Headers headers{
      {"Idempotency-Key", refund.refund_id},
      {webhook::kHeader,
       webhook::sign(options_.secret, clock_.wall_ms() / 1000, refund.refund_id, body)}};
  httplib::Client client(base_);
  auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  auto res = client.Post(path_, headers, body, "application/json");
  if (!res) {
    core_.refund_attempted(refund.payment_id, RefundOutcome::kRetry,
                           "no answer: " + httplib::to_string(res.error()));
    return;
  }
  if (res->status >= 200 && res->status < 300) {
    core_.refund_attempted(refund.payment_id, RefundOutcome::kDelivered, "");
    return;
  }
  std::string what =
      "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, kMaxErrorBody);
  if (!retryable(res->status)) log_.error(kLog, refund.refund_id + " refused: " + what);
  core_.refund_attempted(refund.payment_id,
                         retryable(res->status) ? RefundOutcome::kRetry : RefundOutcome::kRejected,
                         what);
}

}  // namespace vend::agent
