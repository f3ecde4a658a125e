// HttpServer's life (bind, start, stop) and its libmicrohttpd callbacks: a
// connection's start and end, a request's first line, its headers and body,
// its hand-over to the handler and its completion.
#include "http/http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "http/http_server_state.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";

HttpServer::State& state_of(void* cls) { return *static_cast<HttpServer::State*>(cls); }

ConnState* conn_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info == nullptr ? nullptr : static_cast<ConnState*>(info->socket_context);
}

std::string peer_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "?";
  char text[INET6_ADDRSTRLEN] = {0};
  const sockaddr* sa = info->client_addr;
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  }
  return text;
}

void on_connection(void* cls, MHD_Connection* connection, void** socket_context,
                   MHD_ConnectionNotificationCode code) {
  HttpServer::State& s = state_of(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    auto* cs = new ConnState;
    cs->connection = connection;
    const MHD_ConnectionInfo* fd =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    cs->fd = fd == nullptr ? -1 : fd->connect_fd;
    cs->peer = peer_of(connection);
    cs->since_ms = s.clock.monotonic_ms();
    uint64_t open = ++s.open;
    ++s.accepted;
    cs->over_limit = open > s.limits.max_connections;
    std::lock_guard lock(s.mu);
    s.conns.insert(cs);
    *socket_context = cs;
    return;
  }
  auto* cs = static_cast<ConnState*>(*socket_context);
  if (cs == nullptr) return;
  {
    // The reaper only touches a socket under mu: once erased here, before
    // MHD closes it, the descriptor is never used again by us.
    std::lock_guard lock(s.mu);
    s.conns.erase(cs);
  }
  --s.open;
  delete cs;
  *socket_context = nullptr;
}

// Every accepted connection: refused (closed at once) once stop() began.
// This, not MHD_quiesce_daemon(), stops new connections: with a thread pool,
// libmicrohttpd 0.9.75's quiesce races its own event threads over the
// listen socket's epoll registration and aborts the process ("Failed to
// remove listen FD from epoll set"), seen about once in 30 stops under load.
MHD_Result accept_policy(void* cls, const sockaddr* /*addr*/, socklen_t /*addrlen*/) {
  return state_of(cls).stopping.load() ? MHD_NO : MHD_YES;
}

// A request line arrived: the header deadline starts. Its return value is
// the request's context for the access handler.
void* on_request_line(void* cls, const char* uri, MHD_Connection* connection) {
  HttpServer::State& s = state_of(cls);
  ConnState* cs = conn_of(connection);
  if (cs == nullptr) return nullptr;
  cs->raw_target = uri == nullptr ? "" : uri;  // the only place MHD shows it undecoded
  cs->raw_target_at = uri;
  std::lock_guard lock(s.mu);
  s.enter(*cs, Stage::kHeaders);
  return cs;
}

// A request that ended before it was complete: the client ended its side
// (MHD closes without a word; we answer 400 on the still open socket), or
// MHD refused it itself (its own answer is sent; we only count it). Under mu.
void note_unfinished(HttpServer::State& s, ConnState& cs, MHD_RequestTerminationCode toe) {
  bool reading = cs.stage == Stage::kHeaders || cs.stage == Stage::kBody;
  if (!reading || cs.reaped || cs.replied || cs.fd < 0) return;
  if (toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT) {
    std::string raw = raw_incomplete_response();
    (void)::send(cs.fd, raw.data(), raw.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    note_framing(s, cs.peer, FramingProblem::kIncompleteRequest,
                 "the client closed its side before the request was complete");
  } else if (toe == MHD_REQUEST_TERMINATED_WITH_ERROR) {
    note_framing(s, cs.peer, FramingProblem::kRefusedByParser,
                 cs.started ? "malformed body (libmicrohttpd answered)"
                            : "malformed head (libmicrohttpd answered)");
  }
}

void on_completed(void* cls, MHD_Connection* /*connection*/, void** con_cls,
                  MHD_RequestTerminationCode toe) {
  auto* cs = static_cast<ConnState*>(*con_cls);
  if (cs == nullptr) return;
  HttpServer::State& s = state_of(cls);
  {
    std::lock_guard lock(s.mu);
    note_unfinished(s, *cs, toe);
    s.enter(*cs, Stage::kIdle);
    cs->replied = false;
  }
  cs->raw_target.clear();
  cs->raw_target_at = nullptr;
  cs->started = false;
  cs->body_too_large = false;
  cs->request = HttpRequest();
  cs->exchange.reset();
  *con_cls = nullptr;
}

// Adds one header or query parameter to the `Map` at `cls`.
template <typename Map>
MHD_Result add_value(void* cls, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  static_cast<Map*>(cls)->emplace(key, value == nullptr ? "" : value);
  return MHD_YES;
}

size_t header_bytes(const HttpRequest& req) {
  size_t n = req.method.size() + req.target.size() + req.version.size() + 4;
  for (const auto& [k, v] : req.headers) n += k.size() + v.size() + 4;
  return n;
}

// The request as handlers read it (headers, path, query parameters, peer).
void read_request(MHD_Connection* connection, ConnState& cs, const char* url, const char* method,
                  const char* version) {
  HttpRequest& req = cs.request;
  req.method = method;
  req.version = version;
  req.path = url;
  req.remote_addr = cs.peer;
  MHD_get_connection_values(connection, MHD_HEADER_KIND, add_value<HttpRequest::Headers>,
                            &req.headers);
  MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, add_value<HttpRequest::Params>,
                            &req.params);
  req.target = req.path;
  for (const auto& [k, v] : req.params) {
    req.target += req.target.size() == req.path.size() ? '?' : '&';
    req.target.append(k).append(1, '=').append(v);
  }
}

// The request's framing as check_request_head() reads it.
std::optional<FramingError> check_framing(const HttpServerLimits& l, const ConnState& cs) {
  RequestHead head;
  head.version = cs.request.version;
  head.target = cs.raw_target;
  for (const auto& [name, value] : cs.request.headers) head.fields.push_back({name, value});
  return check_request_head(head, l.max_target_bytes);
}

MHD_Result add_field(void* cls, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  static_cast<std::vector<std::pair<const char*, const char*>>*>(cls)->emplace_back(key, value);
  return MHD_YES;
}

// The head as libmicrohttpd left it in its read buffer (HeadLayout), or
// nothing when its pieces do not lie as 0.9.75 lays them out (the target
// where the URI log callback saw it, the version after it, both inside the
// head): then only check_request_head() applies. Offsets are differences of
// addresses; a field MHD moved elsewhere gets one past the head's end.
std::optional<HeadLayout> layout_of(MHD_Connection* connection, const ConnState& cs,
                                    const char* url, const char* method, const char* version) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  if (info == nullptr || cs.raw_target_at == nullptr || url != cs.raw_target_at) return {};
  auto base = reinterpret_cast<uintptr_t>(method);
  auto offset = [base](const char* p) { return reinterpret_cast<uintptr_t>(p) - base; };
  HeadLayout l;
  size_t size = info->header_size;
  l.method_end = std::strlen(method);
  l.target_at = offset(url);
  l.target_end = l.target_at + cs.raw_target.size();
  l.version_at = offset(version);
  l.version_end = l.version_at + std::strlen(version);
  if (l.target_at >= l.version_at || l.version_end > size) return {};
  l.buffer = std::string_view(method, size);
  std::vector<std::pair<const char*, const char*>> fields;
  MHD_get_connection_values(connection, MHD_HEADER_KIND, add_field, &fields);
  for (const auto& [key, value] : fields) {
    if (key == nullptr || value == nullptr) return {};
    l.fields.push_back({key, offset(key), offset(value), offset(value) + std::strlen(value)});
  }
  return l;
}

// The first call of a request: its headers are complete.
MHD_Result on_headers(HttpServer::State& s, MHD_Connection* connection, ConnState& cs,
                      const char* url, const char* method, const char* version) {
  cs.started = true;
  ++s.requests;
  read_request(connection, cs, url, method, version);
  {
    std::lock_guard lock(s.mu);
    s.enter(cs, Stage::kBody);
  }
  const HttpServerLimits& l = s.limits;
  if (cs.over_limit) {
    return refuse(s, cs, 503, "unavailable",
                  "too many open connections (at most " + std::to_string(l.max_connections) + ")",
                  "max_connections");
  }
  if (std::optional<HeadLayout> layout = layout_of(connection, cs, url, method, version)) {
    if (std::optional<FramingError> bad = check_head_layout(*layout)) {
      return refuse_framing(s, cs, *bad);
    }
  }
  if (std::optional<FramingError> bad = check_framing(l, cs)) return refuse_framing(s, cs, *bad);
  if (header_bytes(cs.request) > l.max_header_bytes) {
    return refuse(
        s, cs, 431, "header_too_large",
        "the request line and headers are over " + std::to_string(l.max_header_bytes) + " bytes",
        "max_header_bytes");
  }
  const char* length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Content-Length");
  if (length != nullptr && std::strtoull(length, nullptr, 10) > l.max_body_bytes) {
    return refuse(s, cs, 413, "payload_too_large",
                  "the request body is over " + std::to_string(l.max_body_bytes) + " bytes",
                  "max_body_bytes");
  }
  return MHD_YES;
}

// The request is complete: hand it to the handler; queue the reply at once
// if it is already there, else suspend until complete() resumes us.
MHD_Result dispatch(HttpServer::State& s, MHD_Connection* connection, ConnState& cs) {
  {
    std::lock_guard lock(s.mu);
    s.enter(cs, Stage::kHandling);
  }
  auto ex = std::make_shared<detail::Exchange>();
  ex->connection = connection;
  ex->outstanding = s.outstanding;
  ex->outstanding->add();
  cs.exchange = ex;
  try {
    s.handler(std::move(cs.request), HttpResponder(ex));
  } catch (const std::exception& e) {
    s.log.error(kLog, std::string("handler: ") + e.what());
  } catch (...) {
    s.log.error(kLog, "handler: unknown exception");
  }
  std::unique_lock lock(ex->mu);
  if (ex->reply) return queue_reply(s, connection, *ex->reply);
  if (!ex->completed) {  // a handler that threw kept no responder: 500 below
    ex->suspended = true;
    MHD_suspend_connection(connection);
  }
  return MHD_YES;
}

MHD_Result on_access(void* cls, MHD_Connection* connection, const char* url, const char* method,
                     const char* version, const char* upload_data, size_t* upload_data_size,
                     void** con_cls) {
  HttpServer::State& s = state_of(cls);
  ConnState* cs = static_cast<ConnState*>(*con_cls);
  if (cs == nullptr) return MHD_NO;  // no request line seen: cannot happen
  if (!cs->started) return on_headers(s, connection, *cs, url, method, version);
  if (*upload_data_size > 0) {
    std::string& body = cs->request.body;
    if (cs->body_too_large || body.size() + *upload_data_size > s.limits.max_body_bytes) {
      cs->body_too_large = true;  // a chunked body: refused once it ends
      body.clear();
    } else {
      body.append(upload_data, *upload_data_size);
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (cs->exchange) {  // resumed: the reply is there
    std::lock_guard lock(cs->exchange->mu);
    if (!cs->exchange->reply) return MHD_NO;
    return queue_reply(s, connection, *cs->exchange->reply);
  }
  if (cs->body_too_large) {
    return refuse(s, *cs, 413, "payload_too_large",
                  "the request body is over " + std::to_string(s.limits.max_body_bytes) + " bytes",
                  "max_body_bytes");
  }
  return dispatch(s, connection, *cs);
}

Result<int> bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return make_error("http_bind", std::string("getsockname: ") + std::strerror(errno));
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

HttpServer::HttpServer(HttpServerLimits limits, Handler handler, const Clock& clock, Logger& log)
    : state_(std::make_unique<State>(limits, std::move(handler), clock, log)) {}

HttpServer::~HttpServer() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Result<int> HttpServer::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return make_error("http_bind", "cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;  // restart at once despite TIME_WAIT, but never share the port
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(fd, state_->limits.listen_backlog) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0)
    return make_error("http_bind", "cannot listen on " + host + ":" + service + ": " + why);
  return bound_port(listen_fd_);
}

Status HttpServer::start() {
  if (listen_fd_ < 0) return make_error("http_start", "bind() first");
  const HttpServerLimits& l = state_->limits;
  // MHD's own backstops, beyond ours: connections past it are closed at
  // accept, a header block past its memory pool gets MHD's own 431, and a
  // connection silent past the longest of our deadlines is dropped.
  auto hard_limit = static_cast<unsigned int>(l.max_connections + l.max_connections / 8 + 64);
  // The pool is all a connection's buffers; MHD zeroes it after every
  // request, so its whole size stays resident per open connection and is
  // written once per request: the header block, and 4 KiB for the parsed
  // header list, the body's read buffer and the reply's head.
  size_t pool = l.max_header_bytes + 4 * 1024;
  int64_t longest_ms = std::max({l.idle_timeout_ms, l.header_timeout_ms, l.body_timeout_ms});
  auto timeout_s = static_cast<unsigned int>(longest_ms / 1000 + 5);
  unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
  State* s = state_.get();
  daemon_ = MHD_start_daemon(
      flags, 0, &accept_policy, s, &on_access, s, MHD_OPTION_LISTEN_SOCKET, listen_fd_,
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned int>(std::max<size_t>(1, l.event_threads)),
      MHD_OPTION_CONNECTION_LIMIT, hard_limit, MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
      MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_NOTIFY_CONNECTION, &on_connection, s,
      MHD_OPTION_URI_LOG_CALLBACK, &on_request_line, s, MHD_OPTION_NOTIFY_COMPLETED, &on_completed,
      s, MHD_OPTION_END);
  if (daemon_ == nullptr) return make_error("http_start", "libmicrohttpd did not start");
  listen_fd_ = -1;  // the daemon's now: MHD_stop_daemon() closes it
  running_ = true;
  state_->reaper = std::thread([s] { s->reap_loop(); });
  return {};
}

void HttpServer::stop() {
  if (daemon_ == nullptr) return;
  state_->stopping = true;  // new connections are closed at accept
  {
    std::unique_lock lock(state_->outstanding->mu);
    state_->outstanding->zero.wait_for(lock, std::chrono::seconds(10),
                                       [this] { return state_->outstanding->count == 0; });
  }
  state_->abandon_outstanding();
  state_->end_streams();
  // A completed answer is only queued: its connection's event thread still
  // has to resume and write it. Give those writes up to 2 s before the
  // daemon closes every socket.
  for (int i = 0; i < 400 && state_->answering() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lock(state_->reaper_mu);
    state_->reaper_stop = true;
  }
  state_->reaper_wake.notify_all();
  if (state_->reaper.joinable()) state_->reaper.join();
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
  running_ = false;
}

HttpServerStats HttpServer::stats() const {
  const State& s = *state_;
  HttpServerStats out;
  out.open_connections = s.open.load();
  out.accepted_connections = s.accepted.load();
  out.requests = s.requests.load();
  out.rejected_max_connections = s.max_connections.load();
  out.rejected_max_header_bytes = s.max_header_bytes.load();
  out.rejected_max_body_bytes = s.max_body_bytes.load();
  out.rejected_header_timeout = s.header_timeout.load();
  out.rejected_body_timeout = s.body_timeout.load();
  out.rejected_max_queued_requests = s.max_queued_requests.load();
  out.rejected_max_requests_per_peer = s.max_requests_per_peer.load();
  out.idle_closed = s.idle_closed.load();
  for (size_t i = 0; i < kFramingProblemCount; ++i) out.framing_errors[i] = s.framing[i].load();
  {
    std::lock_guard lock(state_->streams_mu);
    out.open_streams = state_->streams.size();
  }
  return out;
}

void HttpServer::note_rejected(const std::string& limit, const std::string& source) {
  if (limit == "max_queued_requests") ++state_->max_queued_requests;
  if (limit == "max_requests_per_peer") ++state_->max_requests_per_peer;
  std::lock_guard lock(state_->mu);
  state_->log_refusal(
      source, limit,
      limit == "max_requests_per_peer" ? "too many requests in flight from it" : "no handler free");
}

}  // namespace vend::agent
