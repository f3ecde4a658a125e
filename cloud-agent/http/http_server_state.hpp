// Internals of HttpServer shared by http_server.cpp (the libmicrohttpd
// callbacks and the server's life) and http_server_limits.cpp (the deadline
// reaper, the refusals and their counters). Not a public header.
#pragma once

#include <microhttpd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include "http/http_server.hpp"
#include "http/request_framing.hpp"
#include "vend/log_limiter.hpp"

namespace vend::agent {

namespace detail {

// Requests handed to a handler and not yet answered; stop() waits for zero.
struct Outstanding {
  std::mutex mu;
  std::condition_variable zero;
  size_t count = 0;
  void add();
  void remove();
};

// One request between the handler call and its reply. `mu` orders complete()
// against the event thread's suspend: complete() before the suspend leaves
// the reply for the event thread to queue at once; after it, complete()
// resumes the connection. `abandoned`: stop() answered it already.
struct Exchange {
  std::mutex mu;
  MHD_Connection* connection = nullptr;
  std::shared_ptr<Outstanding> outstanding;
  std::optional<HttpReply> reply;
  bool suspended = false;
  bool completed = false;
  bool abandoned = false;
};

// One streaming reply between its queueing and the response's end. `mu`
// orders wake() against the reader's suspend like Exchange: a wake() before
// the suspend leaves `woken` (the reader tries again instead of sleeping),
// after it resumes the connection. `closed`: MHD is done with the
// connection (never resumed again); `ending`: stop() ends the body.
struct StreamLink {
  std::mutex mu;
  MHD_Connection* connection = nullptr;
  std::shared_ptr<HttpStreamSource> source;
  HttpServer::State* state = nullptr;
  bool suspended = false;
  bool woken = false;
  bool closed = false;
  bool ending = false;

  // Makes `link` the one `source` wakes.
  static void attach(const std::shared_ptr<StreamLink>& link);
  void wake();
  void end();  // stop(): the body ends at the next read
};

}  // namespace detail

enum class Stage { kIdle, kHeaders, kBody, kHandling };

// One open connection (MHD's socket context), from NOTIFY_STARTED to
// NOTIFY_CLOSED. Stage fields are guarded by State::mu (the reaper reads
// them); the request fields are touched only by the connection's event thread.
struct ConnState {
  MHD_Connection* connection = nullptr;
  int fd = -1;
  std::string peer;
  bool over_limit = false;  // opened beyond max_connections
  Stage stage = Stage::kIdle;
  int64_t since_ms = 0;  // when `stage` began
  bool reaped = false;   // the reaper shut the socket down
  // The reaper found the client's side ended at this stage start (since_ms):
  // a second pass that still finds it answers incomplete_request.
  int64_t ended_seen_since_ms = -1;
  // The current request.
  std::string raw_target;  // as received: not percent-decoded, not cut at %00
  // Where MHD's C string of the target starts in its read buffer: compared
  // with the other pieces' addresses (HeadLayout), never read through.
  const char* raw_target_at = nullptr;
  bool started = false;  // the access handler has seen its headers
  bool replied = false;  // a refusal is queued: nothing else may be written (under mu)
  bool body_too_large = false;
  HttpRequest request;
  std::shared_ptr<detail::Exchange> exchange;
};

struct HttpServer::State {
  State(HttpServerLimits l, Handler h, const Clock& c, Logger& lg);

  HttpServerLimits limits;
  Handler handler;
  const Clock& clock;
  Logger& log;
  std::shared_ptr<detail::Outstanding> outstanding = std::make_shared<detail::Outstanding>();

  std::mutex mu;  // guards conns, every ConnState's stage fields, reject_log
  std::unordered_set<ConnState*> conns;
  RateLimitedLog reject_log;

  // stop() began: new connections are closed at accept (accept_policy).
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> open{0}, accepted{0}, requests{0}, idle_closed{0};
  std::atomic<uint64_t> max_connections{0}, max_header_bytes{0}, max_body_bytes{0};
  std::atomic<uint64_t> header_timeout{0}, body_timeout{0}, max_queued_requests{0};
  std::atomic<uint64_t> max_requests_per_peer{0};
  std::array<std::atomic<uint64_t>, kFramingProblemCount> framing{};  // by FramingProblem

  // Streaming replies being sent (for their ticks and stop()).
  std::mutex streams_mu;
  std::unordered_set<std::shared_ptr<detail::StreamLink>> streams;

  std::mutex reaper_mu;
  std::condition_variable reaper_wake;
  bool reaper_stop = false;
  std::thread reaper;

  // Sets the stage of `cs` (under mu).
  void enter(ConnState& cs, Stage stage);
  // Logs a refusal at most once per (source, limit) per interval (under mu).
  void log_refusal(const std::string& source, const std::string& limit, const std::string& message);
  // The reaper's loop, and one pass of it.
  void reap_loop();
  void reap_once(int64_t now_ms);
  // Answers a request whose client ended its side mid-request (reap_once).
  bool reap_incomplete(ConnState& cs);
  // Connections whose request is handed over and not yet fully answered.
  size_t answering();
  // Resumes every suspended exchange with 503 (stop() after its wait).
  void abandon_outstanding();
  // Ticks every open stream (the reaper), ends them all (stop()).
  void tick_streams(int64_t now_ms);
  void end_streams();
};

// Queues `reply` on `connection` (inside the access handler); a streaming
// reply is registered in `state` (http_server_stream.cpp).
MHD_Result queue_reply(HttpServer::State& state, MHD_Connection* connection,
                       const HttpReply& reply);
// The MHD response of a streaming reply; nullptr when MHD refuses it.
MHD_Response* stream_response(HttpServer::State& state, MHD_Connection* connection,
                              const HttpReply& reply);

// Refuses the current request of `cs` for `limit`: counts, logs, queues the
// JSON error with Connection: close.
MHD_Result refuse(HttpServer::State& state, ConnState& cs, int status, const std::string& code,
                  const std::string& message, const std::string& limit);
// Refuses the current request of `cs` for its framing: counts the problem,
// logs it once per source and interval, queues the JSON error
// ({"error":{"code":<problem>,"message"}}) with Connection: close.
MHD_Result refuse_framing(HttpServer::State& state, ConnState& cs, const FramingError& error);
// Counts and logs a framing problem libmicrohttpd met itself (no reply of ours).
void note_framing(HttpServer::State& state, const std::string& peer, FramingProblem problem,
                  const std::string& message);
// The raw 400 incomplete_request written on a connection whose client ended
// its side mid-request (MHD writes nothing then).
std::string raw_incomplete_response();

}  // namespace vend::agent
