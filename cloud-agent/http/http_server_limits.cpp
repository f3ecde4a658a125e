// HttpServer's limits: the deadline reaper (408 for slow senders, a close for
// idle keep-alive connections), refusals with their JSON errors, counters
// and logs, the responder's completion, and the Prometheus lines.
#include <sys/socket.h>

#include <algorithm>

#include "http/http_server.hpp"
#include "http/http_server_state.hpp"
#include "vend/json_writer.hpp"
#include "vend/prometheus_text.hpp"
#include "vend/thread_name.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";

// The raw 408 written by the reaper: the connection is still reading the
// request (MHD writes nothing then), so nothing else is on the wire.
std::string raw_timeout_response(const std::string& limit, int64_t ms) {
  std::string stage = limit == "header_timeout_ms" ? "headers" : "body";
  std::string body = limit_error_body(
      "request_timeout",
      "the request " + stage + " did not arrive within " + std::to_string(ms) + " ms", limit);
  return "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

namespace detail {

void Outstanding::add() {
  std::lock_guard lock(mu);
  ++count;
}

void Outstanding::remove() {
  std::lock_guard lock(mu);
  if (--count == 0) zero.notify_all();
}

}  // namespace detail

HttpServer::State::State(HttpServerLimits l, Handler h, const Clock& c, Logger& lg)
    : limits(l),
      handler(std::move(h)),
      clock(c),
      log(lg),
      reject_log(c, lg, RateLimitedLog::Options{l.reject_log_interval_ms, 1024}) {}

void HttpServer::State::enter(ConnState& cs, Stage stage) {
  cs.stage = stage;
  cs.since_ms = clock.monotonic_ms();
}

void HttpServer::State::log_refusal(const std::string& source, const std::string& limit,
                                    const std::string& message) {
  reject_log.log(LogLevel::kWarn, kLog, source, limit,
                 source + ": request refused (" + limit + "): " + message);
}

void HttpServer::State::reap_loop() {
  name_this_thread("vend-http-reap");
  int64_t shortest =
      std::min({limits.header_timeout_ms, limits.body_timeout_ms, limits.idle_timeout_ms});
  auto period = std::chrono::milliseconds(std::clamp<int64_t>(shortest / 4, 10, 100));
  std::unique_lock lock(reaper_mu);
  while (!reaper_wake.wait_for(lock, period, [this] { return reaper_stop; })) {
    lock.unlock();
    int64_t now = clock.monotonic_ms();
    reap_once(now);
    tick_streams(now);
    lock.lock();
  }
}

namespace {

// True once the client ended its side and every byte it sent was read: a
// request still being read then can never complete. MHD notices this itself
// only sometimes (it may wait for more body until body_timeout_ms).
bool client_side_ended(int fd) {
  char byte;
  return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace

// A request being read whose client ended its side on two passes in a row
// (the event thread has had a pass to handle bytes it read just before):
// answered 400 incomplete_request. Under mu.
bool HttpServer::State::reap_incomplete(ConnState& cs) {
  bool reading = cs.stage == Stage::kHeaders || cs.stage == Stage::kBody;
  if (!reading || cs.replied || !client_side_ended(cs.fd)) return false;
  if (cs.ended_seen_since_ms != cs.since_ms) {
    cs.ended_seen_since_ms = cs.since_ms;  // first sight: next pass decides
    return false;
  }
  std::string raw = raw_incomplete_response();
  (void)::send(cs.fd, raw.data(), raw.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  note_framing(*this, cs.peer, FramingProblem::kIncompleteRequest,
               "the client closed its side before the request was complete");
  return true;
}

void HttpServer::State::reap_once(int64_t now_ms) {
  std::lock_guard lock(mu);
  for (ConnState* cs : conns) {
    if (cs->reaped || cs->fd < 0) continue;
    if (reap_incomplete(*cs)) {
      ::shutdown(cs->fd, SHUT_RDWR);
      cs->reaped = true;
      continue;
    }
    int64_t age = now_ms - cs->since_ms;
    std::string limit;
    int64_t bound = 0;
    if (cs->stage == Stage::kHeaders && age > limits.header_timeout_ms) {
      limit = "header_timeout_ms", bound = limits.header_timeout_ms;
      ++header_timeout;
    } else if (cs->stage == Stage::kBody && age > limits.body_timeout_ms) {
      limit = "body_timeout_ms", bound = limits.body_timeout_ms;
      ++body_timeout;
    } else if (cs->stage == Stage::kIdle &&
               age > (cs->over_limit ? std::min(limits.idle_timeout_ms, limits.header_timeout_ms)
                                     : limits.idle_timeout_ms)) {
      ++idle_closed;
    } else {
      continue;
    }
    if (!limit.empty()) {
      std::string raw = raw_timeout_response(limit, bound);
      (void)::send(cs->fd, raw.data(), raw.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      log_refusal(cs->peer, limit, "too slow");
    }
    // MHD sees the end of the stream on its next read and closes the socket.
    ::shutdown(cs->fd, SHUT_RDWR);
    cs->reaped = true;
  }
  reject_log.flush();
}

size_t HttpServer::State::answering() {
  std::lock_guard lock(mu);
  size_t n = 0;
  for (const ConnState* cs : conns) n += cs->stage == Stage::kHandling;
  return n;
}

void HttpServer::State::abandon_outstanding() {
  std::lock_guard lock(mu);
  for (ConnState* cs : conns) {
    if (!cs->exchange) continue;
    detail::Exchange& ex = *cs->exchange;
    std::lock_guard ex_lock(ex.mu);
    if (!ex.suspended || ex.reply) continue;
    ex.reply = HttpReply{503, limit_error_body("unavailable", "the agent is stopping", "")};
    ex.reply->close_connection = true;
    ex.abandoned = true;
    MHD_resume_connection(ex.connection);
  }
}

MHD_Result queue_reply(HttpServer::State& state, MHD_Connection* connection,
                       const HttpReply& reply) {
  size_t size = reply.status == 304 ? 0 : reply.body.size();  // a 304 has no body
  MHD_Response* response =
      reply.stream ? stream_response(state, connection, reply)
                   : MHD_create_response_from_buffer(size, const_cast<char*>(reply.body.data()),
                                                     MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  if (reply.status != 304) {
    MHD_add_response_header(response, "Content-Type", reply.content_type.c_str());
  }
  for (const auto& [name, value] : reply.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  if (reply.close_connection) MHD_add_response_header(response, "Connection", "close");
  MHD_Result r = MHD_queue_response(connection, static_cast<unsigned int>(reply.status), response);
  MHD_destroy_response(response);
  return r;
}

void note_framing(HttpServer::State& s, const std::string& peer, FramingProblem problem,
                  const std::string& message) {
  ++s.framing[static_cast<size_t>(problem)];
  s.log_refusal(peer, framing_problem_name(problem), message);
}

std::string raw_incomplete_response() {
  std::string body =
      limit_error_body(framing_problem_name(FramingProblem::kIncompleteRequest),
                       "the connection was closed before the request was complete", "");
  return "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

MHD_Result refuse_framing(HttpServer::State& s, ConnState& cs, const FramingError& error) {
  {
    std::lock_guard lock(s.mu);
    note_framing(s, cs.peer, error.problem, error.message);
    cs.replied = true;
  }
  HttpReply reply{
      error.status,
      limit_error_body(framing_problem_name(error.problem), error.message,
                       error.problem == FramingProblem::kTargetTooLong ? "max_target_bytes" : "")};
  reply.close_connection = true;
  return queue_reply(s, cs.connection, reply);
}

MHD_Result refuse(HttpServer::State& s, ConnState& cs, int status, const std::string& code,
                  const std::string& message, const std::string& limit) {
  if (limit == "max_connections") ++s.max_connections;
  if (limit == "max_header_bytes") ++s.max_header_bytes;
  if (limit == "max_body_bytes") ++s.max_body_bytes;
  {
    std::lock_guard lock(s.mu);
    s.log_refusal(cs.peer, limit, message);
    cs.replied = true;
  }
  HttpReply reply{status, limit_error_body(code, message, limit)};
  reply.close_connection = true;
  return queue_reply(s, cs.connection, reply);
}

HttpResponder::HttpResponder(std::shared_ptr<detail::Exchange> exchange)
    : exchange_(std::move(exchange)) {}

HttpResponder& HttpResponder::operator=(HttpResponder&& other) noexcept {
  if (this != &other) {
    if (exchange_) {
      complete(HttpReply{500, limit_error_body("internal", "internal error (no answer)", "")});
    }
    exchange_ = std::move(other.exchange_);
  }
  return *this;
}

HttpResponder::~HttpResponder() {
  if (exchange_) {
    complete(HttpReply{500, limit_error_body("internal", "internal error (no answer)", "")});
  }
}

void HttpResponder::complete(HttpReply reply) {
  std::shared_ptr<detail::Exchange> ex = std::move(exchange_);
  if (!ex) return;  // completed before: a bug of the caller, answered once
  {
    std::lock_guard lock(ex->mu);
    if (ex->completed || ex->abandoned) return;
    ex->completed = true;
    ex->reply = std::move(reply);
    if (ex->suspended) MHD_resume_connection(ex->connection);
  }
  ex->outstanding->remove();
}

std::string limit_error_body(const std::string& code, const std::string& message,
                             const std::string& limit) {
  std::string out = "{\"error\":";
  json::Object e(out);
  e.string("code", code);
  if (!limit.empty()) e.string("limit", limit);
  e.string("message", message);
  e.close();
  out += '}';
  return out;
}

std::string render_http_metrics(const HttpServerStats& s) {
  PrometheusText text;
  text.scalar("vend_http_open_connections", MetricType::kGauge, "HTTP connections open now",
              s.open_connections);
  text.scalar("vend_http_connections_total", MetricType::kCounter, "HTTP connections accepted",
              s.accepted_connections);
  text.scalar("vend_http_requests_total", MetricType::kCounter, "HTTP requests received",
              s.requests);
  text.family("vend_http_rejected_total", MetricType::kCounter,
              "HTTP requests refused by a server limit");
  const std::pair<const char*, uint64_t> rows[] = {
      {"max_connections", s.rejected_max_connections},
      {"max_header_bytes", s.rejected_max_header_bytes},
      {"max_body_bytes", s.rejected_max_body_bytes},
      {"header_timeout_ms", s.rejected_header_timeout},
      {"body_timeout_ms", s.rejected_body_timeout},
      {"max_queued_requests", s.rejected_max_queued_requests},
      {"max_requests_per_peer", s.rejected_max_requests_per_peer}};
  for (const auto& [limit, n] : rows) text.sample({{"limit", limit}}, n);
  text.scalar("vend_http_open_streams", MetricType::kGauge,
              "streaming replies (event streams) being sent now", s.open_streams);
  text.scalar("vend_http_idle_closed_total", MetricType::kCounter,
              "keep-alive connections closed after idle_timeout_ms", s.idle_closed);
  text.family("vend_http_framing_errors_total", MetricType::kCounter,
              "HTTP requests refused for their framing (RFC 9112)");
  for (FramingProblem p : all_framing_problems()) {
    text.sample({{"problem", framing_problem_name(p)}}, s.framing_errors[static_cast<size_t>(p)]);
  }
  return text.take();
}

}  // namespace vend::agent
