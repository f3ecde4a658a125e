// HttpServer's streaming replies: the MHD content reader that pulls from an
// HttpStreamSource, sleeps (suspends the connection) while the source has
// nothing and wakes on HttpStreamSource::wake(); the reaper's ticks and
// stop()'s end of every stream.
#include <string>
#include <vector>

#include "http/http_server.hpp"
#include "http/http_server_state.hpp"

namespace vend::agent {

namespace {

// The response's cls: one reference to the link, dropped by stream_free.
struct StreamHolder {
  std::shared_ptr<detail::StreamLink> link;
};

ssize_t stream_read(void* cls, uint64_t /*pos*/, char* buf, size_t max) {
  detail::StreamLink& link = *static_cast<StreamHolder*>(cls)->link;
  {
    std::lock_guard lock(link.mu);
    if (link.ending) return MHD_CONTENT_READER_END_OF_STREAM;
    link.woken = false;
  }
  std::string out;
  HttpStreamSource::Read r = link.source->read(out, max);
  if (r == HttpStreamSource::Read::kEnd) return MHD_CONTENT_READER_END_OF_STREAM;
  if (!out.empty()) {
    size_t n = std::min(out.size(), max);  // read() keeps within max
    out.copy(buf, n);
    return static_cast<ssize_t>(n);
  }
  std::lock_guard lock(link.mu);
  if (link.ending) return MHD_CONTENT_READER_END_OF_STREAM;
  // A wake() since we read: MHD calls again at once instead of sleeping.
  if (link.woken) return 0;
  link.suspended = true;
  MHD_suspend_connection(link.connection);
  return 0;
}

// MHD is done with the response (the client left, the body ended, or the
// daemon stops): the connection is never resumed again.
void stream_free(void* cls) {
  auto* holder = static_cast<StreamHolder*>(cls);
  std::shared_ptr<detail::StreamLink> link = std::move(holder->link);
  delete holder;
  {
    std::lock_guard lock(link->mu);
    link->closed = true;
  }
  link->source->on_close();
  std::lock_guard lock(link->state->streams_mu);
  link->state->streams.erase(link);
}

}  // namespace

void HttpStreamSource::wake() {
  std::shared_ptr<detail::StreamLink> link;
  {
    std::lock_guard lock(link_mu_);
    link = link_.lock();
  }
  if (link) link->wake();
}

namespace detail {

void StreamLink::attach(const std::shared_ptr<StreamLink>& link) {
  std::lock_guard lock(link->source->link_mu_);
  link->source->link_ = link;
}

void StreamLink::wake() {
  std::lock_guard lock(mu);
  if (closed) return;
  if (!suspended) {
    woken = true;
    return;
  }
  suspended = false;
  MHD_resume_connection(connection);
}

void StreamLink::end() {
  std::lock_guard lock(mu);
  ending = true;
  if (closed || !suspended) return;
  suspended = false;
  MHD_resume_connection(connection);
}

}  // namespace detail

MHD_Response* stream_response(HttpServer::State& state, MHD_Connection* connection,
                              const HttpReply& reply) {
  auto link = std::make_shared<detail::StreamLink>();
  link->connection = connection;
  link->source = reply.stream;
  link->state = &state;
  auto* holder = new StreamHolder{link};
  MHD_Response* response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                             &stream_read, holder, &stream_free);
  if (response == nullptr) {
    delete holder;
    return nullptr;
  }
  detail::StreamLink::attach(link);
  // Proxies must neither buffer nor cache an event stream.
  MHD_add_response_header(response, "Cache-Control", "no-cache");
  MHD_add_response_header(response, "X-Accel-Buffering", "no");
  std::lock_guard lock(state.streams_mu);
  state.streams.insert(link);
  return response;
}

void HttpServer::State::tick_streams(int64_t now_ms) {
  std::vector<std::shared_ptr<detail::StreamLink>> open;
  {
    std::lock_guard lock(streams_mu);
    open.assign(streams.begin(), streams.end());
  }
  for (const auto& link : open) link->source->tick(now_ms);
}

void HttpServer::State::end_streams() {
  std::vector<std::shared_ptr<detail::StreamLink>> open;
  {
    std::lock_guard lock(streams_mu);
    open.assign(streams.begin(), streams.end());
  }
  for (const auto& link : open) link->end();
}

}  // namespace vend::agent
