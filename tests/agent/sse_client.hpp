// A Server-Sent Events client over a raw loopback socket: sends one GET,
// then reads the chunked stream as it comes. Text search only (the tests
// look for frames and comment lines); chunk-size lines stay in the text,
// which is harmless for that. Non-copyable.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace vend::agent::test_sse {

class SseClient {
 public:
  // `rcvbuf` > 0: a small receive buffer (a slow reader fills it fast).
  SseClient(int port, const std::string& path, const std::string& auth, int rcvbuf = 0)
      : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::string req =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n";
    if (!auth.empty()) req += "Authorization: Bearer " + auth + "\r\n";
    req += "\r\n";
    REQUIRE(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  }
  ~SseClient() { ::close(fd_); }
  SseClient(const SseClient&) = delete;
  SseClient& operator=(const SseClient&) = delete;

  // Reads until `needle` is in the text (true) or `wait` passes (false).
  bool wait_for(const std::string& needle,
                std::chrono::milliseconds wait = std::chrono::milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (text_.find(needle) == std::string::npos) {
      if (!read_some(deadline)) return false;
    }
    return true;
  }
  // Reads whatever arrives within `wait`.
  void drain(std::chrono::milliseconds wait) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (read_some(deadline)) {
    }
  }
  const std::string& text() const { return text_; }
  bool closed() const { return closed_; }
  int status() const { return text_.size() > 12 ? std::stoi(text_.substr(9, 3)) : 0; }

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    pollfd p{fd_, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    text_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  std::string text_;
  bool closed_ = false;
};

}  // namespace vend::agent::test_sse
