// A loopback TCP connection spoken to byte by byte, for tests of HTTP
// framing and limits against a real server. Failures to connect or send are
// doctest REQUIREs. Not copyable; not thread-safe.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

namespace vend::test {

class RawSocket {
 public:
  using Steady = std::chrono::steady_clock;
  using Ms = std::chrono::milliseconds;

  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~RawSocket() { ::close(fd_); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  void send(const std::string& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  // Ends our side (the server reads end of file).
  void end_our_side() { ::shutdown(fd_, SHUT_WR); }

  // Reads one response (headers, then Content-Length bytes of body), or
  // what came before the peer closed or `wait` passed.
  std::string read_response(Ms wait = Ms(5000)) {
    auto deadline = Steady::now() + wait;
    for (;;) {
      size_t end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = 0;
        size_t at = buffer_.find("Content-Length: ");
        if (at != std::string::npos && at < end) length = std::stoul(buffer_.substr(at + 16));
        if (buffer_.size() >= end + 4 + length) {
          std::string response = buffer_.substr(0, end + 4 + length);
          buffer_.erase(0, end + 4 + length);
          return response;
        }
      }
      if (!read_some(deadline)) return std::exchange(buffer_, "");
    }
  }
  // Everything received until the peer closes or `wait` passes.
  std::string read_until_close(Ms wait = Ms(3000)) {
    auto deadline = Steady::now() + wait;
    while (read_some(deadline)) {
    }
    return std::exchange(buffer_, "");
  }
  // True if the peer closes the connection before `wait` passes.
  bool closed_within(Ms wait) {
    auto deadline = Steady::now() + wait;
    while (read_some(deadline)) {
    }
    return closed_;
  }
  // Whether the peer has closed the connection (as far as read so far).
  bool closed() const { return closed_; }

 private:
  bool read_some(Steady::time_point deadline) {
    auto left = std::chrono::duration_cast<Ms>(deadline - Steady::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  std::string buffer_;
  bool closed_ = false;
};

}  // namespace vend::test
