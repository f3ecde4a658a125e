// enable_tcp_nodelay_to_peer(): part of vend_mqtt (declared in
// vend/paho_transport.hpp). Paho opens its sockets itself and offers no
// socket hook, so the adapter finds them by peer address.
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include "vend/paho_transport.hpp"

namespace vend {

namespace {

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

Result<std::vector<sockaddr_storage>> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) return make_error("resolve_failed", host + ": " + gai_strerror(rc));
  std::vector<sockaddr_storage> out;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, std::min<size_t>(ai->ai_addrlen, sizeof ss));
    out.push_back(ss);
  }
  freeaddrinfo(list);
  return out;
}

// True when `fd` is a stream socket whose peer is one of `peers`.
bool is_stream_socket_to(int fd, const std::vector<sockaddr_storage>& peers) {
  int type = 0;
  socklen_t type_len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) {
    return false;  // not a socket (ENOTSOCK) or not TCP
  }
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  return std::any_of(peers.begin(), peers.end(),
                     [&](const sockaddr_storage& p) { return same_endpoint(p, peer); });
}

}  // namespace

// Paho (C and C++) never sets TCP_NODELAY. Scanning /proc/self/fd is
// O(open fds), done once per (re)connect. If an fd is closed and reused
// between getpeername() and setsockopt(), NODELAY lands on an unrelated TCP
// socket: harmless.
Result<int> enable_tcp_nodelay_to_peer(const std::string& host, int port) {
  Result<std::vector<sockaddr_storage>> peers = resolve(host, port);
  if (!peers) return peers.error();
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return make_error("proc_unavailable", "cannot open /proc/self/fd");
  int own_fd = dirfd(dir);
  int found = 0;
  while (dirent* entry = readdir(dir)) {
    std::string_view name = entry->d_name;
    int fd = -1;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (ec != std::errc() || ptr != name.data() + name.size() || fd == own_fd) continue;
    if (!is_stream_socket_to(fd, *peers)) continue;
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0) ++found;
  }
  closedir(dir);
  return found;
}

}  // namespace vend
