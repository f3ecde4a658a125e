// HttpServer: the agent's HTTP/1.1 front end on libmicrohttpd (epoll, a few
// event threads, suspend/resume). No connection ever holds a thread: idle
// keep-alive connections and slow senders are only entries in an epoll set,
// and a request whose answer is not ready yet is suspended (it holds no
// event thread) until its HttpResponder is completed, from any thread.
//
// Limits, each answered once with a JSON error that names it
// ({"error":{"code","message","limit"}}), counted (stats()) and logged at
// most once per source address per interval:
//   max_connections      503 unavailable, then close
//   max_header_bytes     431 header_too_large, then close
//   max_body_bytes       413 payload_too_large (on Content-Length at once;
//                        a chunked body when it ends), then close
//   header_timeout_ms    408 request_timeout, then close: a request line was
//                        received but its headers are not complete in time
//   body_timeout_ms      408 request_timeout, then close: the body is not
//                        complete in time after the headers
//   idle_timeout_ms      a keep-alive connection with no new request in that
//                        time is closed without an answer (nothing to answer)
// A request without Content-Length and not chunked has an empty body (RFC
// 9112 6.3): bodiless POSTs are answered at once.
//
// Framing (request_framing.hpp), checked once the headers are in, before the
// handler: a request framed two ways or with a target or field a route could
// read differently from a proxy (two Content-Lengths, Content-Length with
// Transfer-Encoding, a coding but chunked, %00 or a control byte in the path,
// a target over max_target_bytes) is answered 400, 414 or 501 with
// {"error":{"code":<problem>,"message"}}, then close; counted by problem
// (stats().framing_errors) and logged once per source and problem per
// interval. A client that ends its side mid-request (a body shorter than its
// Content-Length or chunk size) gets 400 incomplete_request before the close.
// What libmicrohttpd refuses itself (a Content-Length that is no number, a
// chunk size past 64 bits, a head past its buffer) keeps its own 400/413/414
// answer and is counted as refused_by_parser.
//
// A reply may be a stream (HttpReply::stream, text/event-stream): its body
// is read from an HttpStreamSource as the client takes it. While the source
// has nothing, the connection is suspended (no thread, no busy loop) until
// the source calls wake(). The limits' timeouts do not apply to a stream;
// libmicrohttpd's own drops a connection silent for longer than the longest
// of them plus 5 s, so the source sends heartbeats more often (its tick(),
// from the reaper every 10-100 ms, is where it can). stop() ends every
// stream.
//
// Handlers read the request as an HttpRequest (http/http_request.hpp).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "http/http_request.hpp"
#include "http/request_framing.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

struct MHD_Daemon;
struct MHD_Connection;

namespace vend::agent {

namespace detail {
struct Exchange;
struct StreamLink;
}  // namespace detail

// The body of a streaming reply, produced over time. Subclasses implement
// read() (called on an event thread when the client can take more) and may
// override tick() and on_close(). Thread-safe: wake() from any thread.
// Non-copyable.
class HttpStreamSource {
 public:
  enum class Read { kData, kEmpty, kEnd };

  HttpStreamSource() = default;
  HttpStreamSource(const HttpStreamSource&) = delete;
  HttpStreamSource& operator=(const HttpStreamSource&) = delete;
  virtual ~HttpStreamSource() = default;

  // Appends at most `max` bytes to `out` (empty on entry). kData: `out` has
  // bytes; kEmpty: nothing now (the connection sleeps until wake());
  // kEnd: the body is complete.
  virtual Read read(std::string& out, size_t max) = 0;
  // Every reaper pass (10-100 ms) while the stream is open, on the reaper
  // thread. MUST NOT block.
  virtual void tick(int64_t /*now_mono_ms*/) {}
  // Once, when the client left or the server stopped; read() is not called
  // again. On an event thread.
  virtual void on_close() {}

  // There is something to read: resumes the sleeping connection. Never
  // blocks beyond a short lock; before the reply is queued or after the
  // client left it does nothing (a queued reply reads at once anyway).
  void wake();

 private:
  friend struct detail::StreamLink;
  std::mutex link_mu_;
  std::weak_ptr<detail::StreamLink> link_;
};

// A handler's answer.
struct HttpReply {
  HttpReply() = default;
  HttpReply(int status_code, std::string body_text, std::string type = "application/json")
      : status(status_code), body(std::move(body_text)), content_type(std::move(type)) {}

  int status = 200;
  std::string body;  // JSON text unless content_type says otherwise
  std::string content_type = "application/json";
  // Extra response headers (ETag, Cache-Control, Retry-After). A 304 is sent
  // without a body or Content-Type.
  std::vector<std::pair<std::string, std::string>> headers;
  bool close_connection = false;  // adds Connection: close
  // Set: the body is this stream (status, content_type and headers still
  // apply; `body` is ignored), sent chunked until the source ends.
  std::shared_ptr<HttpStreamSource> stream;
};

struct HttpServerLimits {
  size_t event_threads = 2;         // epoll threads (each its own epoll set)
  size_t max_connections = 20'000;  // open at once; the next ones get 503
  size_t max_header_bytes = 8'192;  // request line and header fields
  size_t max_body_bytes = 16'384;   // request body
  size_t max_target_bytes = 4'096;  // request target (path and query); 414 past it
  int64_t header_timeout_ms = 10'000;
  int64_t body_timeout_ms = 10'000;
  int64_t idle_timeout_ms = 60'000;         // keep-alive connection without a request
  int listen_backlog = 1024;                // connections waiting for accept()
  int64_t reject_log_interval_ms = 60'000;  // per source address and limit
};

// Counters since start, and the open connections now.
struct HttpServerStats {
  uint64_t open_connections = 0;
  uint64_t accepted_connections = 0;
  uint64_t requests = 0;
  uint64_t rejected_max_connections = 0;
  uint64_t rejected_max_header_bytes = 0;
  uint64_t rejected_max_body_bytes = 0;
  uint64_t rejected_header_timeout = 0;
  uint64_t rejected_body_timeout = 0;
  uint64_t rejected_max_queued_requests = 0;    // reported by the handler (note_rejected)
  uint64_t rejected_max_requests_per_peer = 0;  // the same
  uint64_t idle_closed = 0;
  uint64_t open_streams = 0;  // streaming replies being sent now
  // Requests refused for their framing, by FramingProblem.
  std::array<uint64_t, kFramingProblemCount> framing_errors{};
};

// Prometheus text of `stats`: vend_http_open_connections,
// vend_http_connections_total, vend_http_requests_total,
// vend_http_rejected_total{limit=...}, vend_http_idle_closed_total,
// vend_http_framing_errors_total{problem=...}.
std::string render_http_metrics(const HttpServerStats& stats);

// The JSON error body of a refused request: {"error":{"code","message","limit"}}.
std::string limit_error_body(const std::string& code, const std::string& message,
                             const std::string& limit);

// The answer to one request. Move-only. complete() sends the reply; call it
// exactly once, from any thread, at any time: during the handler call (the
// reply is queued at once, the connection is never suspended) or later
// (the connection stays suspended, holding no thread, until then). A future
// asynchronous AgentCore can complete it straight from its commit callback;
// today HttpApi completes it from its worker pool. A responder destroyed
// without complete() answers 500. Every responder must be completed or
// destroyed before HttpServer::stop() can return.
class HttpResponder {
 public:
  explicit HttpResponder(std::shared_ptr<detail::Exchange> exchange);
  HttpResponder(HttpResponder&&) noexcept = default;
  HttpResponder& operator=(HttpResponder&&) noexcept;
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;
  ~HttpResponder();

  void complete(HttpReply reply);

 private:
  std::shared_ptr<detail::Exchange> exchange_;
};

// Non-copyable. Thread-safe: stats() and note_rejected() from any thread.
// `log` and `clock` must outlive the server.
class HttpServer {
 public:
  // Called on an event thread for each complete request. MUST NOT block:
  // hand slow work elsewhere and complete the responder from there.
  using Handler = std::function<void(HttpRequest&& request, HttpResponder responder)>;

  HttpServer(HttpServerLimits limits, Handler handler, const Clock& clock, Logger& log);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  // Binds and listens on host:port (0: any free port) with SO_REUSEADDR
  // only (never shared with a second process). Connections wait in the
  // backlog until start(). Returns the bound port.
  Result<int> bind(const std::string& host, int port);
  // Starts the event threads and the deadline reaper. REQUIRES: bind() ok.
  Status start();
  // Closes each new connection at accept, waits (up to 10 s) for outstanding responders, closes
  // every connection and joins the threads. Idempotent.
  void stop();
  bool running() const { return running_.load(); }

  HttpServerStats stats() const;
  // Counts a request refused by the handler for `limit` (only
  // "max_queued_requests" today) and logs it rate-limited.
  void note_rejected(const std::string& limit, const std::string& source);

  struct State;  // the callbacks' shared state (http_server.cpp)

 private:
  std::unique_ptr<State> state_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  std::atomic<bool> running_{false};
};

}  // namespace vend::agent
