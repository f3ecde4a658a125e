#include "shell/refund_sender.hpp"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "vend/thread_name.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "refunds";

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
  // An outcome the core could not take goes first; while any is held the
  // core takes nothing (busy, or not writing): nothing new is sent either.
  if (!offer_held()) return 0;
  auto due = core_.take_due_refunds(options_.batch_max);
  size_t tried = 0;
  for (const auto& refund : due) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;  // the rest stays PENDING: sent after the restart
    }
    offer(Held{refund.refund_id, refund.payment_id, deliver(refund)});
    ++tried;
  }
  return tried;
}

void RefundSender::offer(Held outcome) {
  const RefundAnswer& a = outcome.answer;
  if (a.outcome == RefundOutcome::kRejected) {
    log_.error(kLog, outcome.refund_id + " refused by the gateway: " + a.detail);
  }
  if (core_.refund_attempted(outcome.payment_id, a.outcome, a.detail, a.retry_after_ms)) return;
  log_.warn(kLog, outcome.refund_id +
                      ": the core cannot record the gateway's answer now (busy, or not "
                      "writing); it is offered again");
  held_.push_back(std::move(outcome));
}

bool RefundSender::offer_held() {
  std::vector<Held> still;
  for (auto& h : held_) {
    const RefundAnswer& a = h.answer;
    if (!core_.refund_attempted(h.payment_id, a.outcome, a.detail, a.retry_after_ms)) {
      still.push_back(std::move(h));
    }
  }
  held_ = std::move(still);
  return held_.empty();
}

RefundAnswer RefundSender::deliver(const RefundDelivery& refund) {
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
  if (!res) return refund_no_answer(httplib::to_string(res.error()));
  return refund_answer_of(res->status, res->body, res->get_header_value("Retry-After"),
                          clock_.wall_ms());
}

}  // namespace vend::agent
