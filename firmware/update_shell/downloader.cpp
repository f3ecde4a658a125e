// One download try with cpp-httplib; exceptions and errno stop here and
// become a DownloadOutcome.
#include "update_shell/downloader.hpp"

#include <fcntl.h>
#include <httplib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "vend/sha256_stream.hpp"

namespace vend::fw {

namespace {

using Kind = DownloadOutcome::Kind;

DownloadOutcome outcome(Kind kind, uint64_t bytes, std::string detail) {
  return DownloadOutcome{kind, bytes, "", std::move(detail)};
}

// scheme://host[:port] and the path of a URL the codec accepted.
bool split_url(const std::string& url, std::string& origin, std::string& path) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return false;
  size_t path_start = url.find('/', scheme_end + 3);
  origin = url.substr(0, path_start);
  path = path_start == std::string::npos ? "/" : url.substr(path_start);
  return origin.size() > scheme_end + 3;
}

// Hashes the `size` bytes of the file already at `fd` (an earlier try).
bool hash_existing(int fd, uint64_t size, crypto::Sha256Stream& hash) {
  std::string buffer(64 * 1024, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t got = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    hash.add(std::string_view(buffer.data(), static_cast<size_t>(got)));
    done += static_cast<uint64_t>(got);
  }
  return true;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The state of one try: the file, what it holds, the running hash.
struct Transfer {
  int fd = -1;
  uint64_t held = 0;
  uint64_t limit = 0;
  crypto::Sha256Stream hash;
  bool too_long = false;
  bool write_failed = false;

  // Starts the file again (a server that ignored the range).
  bool restart() {
    if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) return false;
    held = 0;
    hash = crypto::Sha256Stream();
    return true;
  }
  bool take(const char* data, size_t size) {
    if (held + size > limit) {
      too_long = true;
      return false;
    }
    if (!write_all(fd, data, size)) {
      write_failed = true;
      return false;
    }
    hash.add(std::string_view(data, size));
    held += size;
    return true;
  }
};

std::unique_ptr<httplib::Client> client_for(const std::string& origin,
                                            const DownloadLimits& limits) {
  auto client = std::make_unique<httplib::Client>(origin);
  client->set_connection_timeout(std::chrono::milliseconds(limits.connect_timeout_ms));
  client->set_read_timeout(std::chrono::milliseconds(limits.read_timeout_ms));
  client->set_follow_location(true);
  if (!limits.ca_file.empty()) client->set_ca_cert_path(limits.ca_file.c_str());
  client->enable_server_certificate_verification(true);
  return client;
}

DownloadOutcome fetch(Transfer& t, const StartDownload& what, const DownloadLimits& limits) {
  std::string origin, path;
  if (!split_url(what.url, origin, path)) return outcome(Kind::kRefused, 0, "bad url");
  auto client = client_for(origin, limits);
  httplib::Headers headers;
  const uint64_t asked_from = t.held;
  if (asked_from > 0) headers.emplace("Range", "bytes=" + std::to_string(asked_from) + "-");
  int status = 0;
  auto result = client->Get(
      path, headers,
      [&](const httplib::Response& response) {
        status = response.status;
        if (status == 200 && asked_from > 0) return t.restart();  // the range was ignored
        return status == 200 || status == 206;
      },
      [&](const char* data, size_t size) { return t.take(data, size); });
  if (t.too_long) return outcome(Kind::kRefused, t.held, "more than size_bytes");
  if (t.write_failed) return outcome(Kind::kRefused, t.held, std::strerror(errno));
  if (status != 0 && status != 200 && status != 206) {
    return outcome(Kind::kRefused, t.held, "HTTP " + std::to_string(status));
  }
  if (!result && t.held < what.size_bytes) {
    return outcome(Kind::kCut, t.held, httplib::to_string(result.error()));
  }
  if (t.held < what.size_bytes) return outcome(Kind::kCut, t.held, "answer ended early");
  return outcome(Kind::kComplete, t.held, "");
}

}  // namespace

DownloadOutcome download_artifact(const StartDownload& what, const std::string& path,
                                  const DownloadLimits& limits) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return outcome(Kind::kRefused, 0, path + ": " + std::strerror(errno));
  Transfer t;
  t.fd = fd;
  t.limit = what.size_bytes;
  off_t existing = ::lseek(fd, 0, SEEK_END);
  if (existing < 0 || static_cast<uint64_t>(existing) > what.size_bytes ||
      !hash_existing(fd, static_cast<uint64_t>(existing), t.hash)) {
    existing = 0;  // unreadable or longer than the artifact: start again
    if (!t.restart()) {
      ::close(fd);
      return outcome(Kind::kRefused, 0, path + ": cannot truncate");
    }
  }
  t.held = static_cast<uint64_t>(existing);
  DownloadOutcome out =
      t.held == what.size_bytes ? outcome(Kind::kComplete, t.held, "") : fetch(t, what, limits);
  if (out.kind == Kind::kComplete) {
    if (::fsync(fd) != 0) out = outcome(Kind::kCut, t.held, "fsync failed");
    out.sha256 = t.hash.finish_hex();
  }
  ::close(fd);
  return out;
}

}  // namespace vend::fw
