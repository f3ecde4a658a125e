// The artifact download against a real HTTP server on loopback (cpp-httplib):
// a cut connection is resumed with a Range request, a wrong hash or a longer
// answer is caught, an HTTP error refuses.
#include "update_shell/downloader.hpp"

#include <doctest/doctest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "vend/crypto.hpp"

namespace vend::fw {
namespace {

namespace fs = std::filesystem;
using Kind = DownloadOutcome::Kind;

std::string artifact_bytes() {
  std::string data(300'000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 31) ^ (i >> 7));
  return data;
}

// A server of one artifact at /fw.deb. The first `cuts` answers stop after
// `cut_at` bytes (the connection closes); a Range request is answered 206.
struct Server {
  httplib::Server http;
  std::string data = artifact_bytes();
  std::atomic<int> cuts{0};
  size_t cut_at = 100'000;
  std::atomic<int> range_requests{0};
  int port = 0;
  std::thread thread;

  Server() {
    http.Get("/fw.deb", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.has_header("Range")) ++range_requests;
      if (cuts.load() > 0) {
        --cuts;
        res.set_content_provider(data.size(), "application/octet-stream",
                                 [this](size_t offset, size_t, httplib::DataSink& sink) {
                                   if (offset >= cut_at) return false;  // the cut
                                   sink.write(data.data() + offset, cut_at - offset);
                                   return true;
                                 });
        return;
      }
      res.set_content(data, "application/octet-stream");
    });
    http.Get("/long.deb", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(data + "extra", "application/octet-stream");
    });
    port = http.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { http.listen_after_bind(); });
    while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Server() {
    http.stop();
    thread.join();
  }
  StartDownload what(const std::string& path = "/fw.deb") const {
    return StartDownload{"http://127.0.0.1:" + std::to_string(port) + path, data.size(),
                         crypto::sha256_hex(data)};
  }
};

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("vend-dl-" + crypto::random_id128());
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const char* name) const { return (path / name).string(); }
};

DownloadLimits quick() {
  DownloadLimits limits;
  limits.connect_timeout_ms = 2000;
  limits.read_timeout_ms = 2000;
  return limits;
}

TEST_CASE("a whole artifact is downloaded, hashed and its bytes kept") {
  Server server;
  TempDir dir;
  DownloadOutcome out = download_artifact(server.what(), dir.file("a.part"), quick());
  CHECK(out.kind == Kind::kComplete);
  CHECK(out.bytes == server.data.size());
  CHECK(out.sha256 == crypto::sha256_hex(server.data));
  CHECK(fs::file_size(dir.file("a.part")) == server.data.size());
  CHECK(server.range_requests.load() == 0);
}

TEST_CASE("a cut connection keeps the bytes; the next try asks only for the rest") {
  Server server;
  server.cuts = 1;
  TempDir dir;
  DownloadOutcome first = download_artifact(server.what(), dir.file("a.part"), quick());
  CHECK(first.kind == Kind::kCut);
  CHECK(first.bytes == server.cut_at);
  CHECK(fs::file_size(dir.file("a.part")) == server.cut_at);
  DownloadOutcome second = download_artifact(server.what(), dir.file("a.part"), quick());
  CHECK(second.kind == Kind::kComplete);
  CHECK(server.range_requests.load() == 1);
  CHECK(second.sha256 == crypto::sha256_hex(server.data));
}

TEST_CASE("an artifact of other bytes completes with another hash (the core refuses it)") {
  Server server;
  TempDir dir;
  {  // an earlier try left bytes that are not the artifact's
    std::ofstream junk(dir.file("a.part"), std::ios::binary);
    junk << std::string(1000, 'j');
  }
  DownloadOutcome out = download_artifact(server.what(), dir.file("a.part"), quick());
  CHECK(out.kind == Kind::kComplete);
  CHECK(out.sha256 != crypto::sha256_hex(server.data));
}

TEST_CASE("an answer longer than size_bytes is refused, never written past the bound") {
  Server server;
  TempDir dir;
  DownloadOutcome out = download_artifact(server.what("/long.deb"), dir.file("a.part"), quick());
  CHECK(out.kind == Kind::kRefused);
  CHECK(out.detail == "more than size_bytes");
  CHECK(fs::file_size(dir.file("a.part")) <= server.data.size());
}

TEST_CASE("an HTTP error refuses; no server is a cut worth a retry") {
  Server server;
  TempDir dir;
  DownloadOutcome missing =
      download_artifact(server.what("/none.deb"), dir.file("a.part"), quick());
  CHECK(missing.kind == Kind::kRefused);
  CHECK(missing.detail == "HTTP 404");
  StartDownload nowhere = server.what();
  nowhere.url = "http://127.0.0.1:1/fw.deb";
  DownloadOutcome down = download_artifact(nowhere, dir.file("b.part"), quick());
  CHECK(down.kind == Kind::kCut);
}

}  // namespace
}  // namespace vend::fw
