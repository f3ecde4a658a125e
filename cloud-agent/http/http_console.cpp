// The operators' console of HttpApi: GET /console/ serves the embedded
// static files (embedded_files.hpp). The files are public; every API call
// the page makes sends the operator token (Authorization: Bearer).
#include <string>
#include <string_view>

#include "http/embedded_files.hpp"
#include "http/http_api.hpp"
#include "http/http_json.hpp"

namespace vend::agent {

namespace {

std::string content_type_of(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

const console::EmbeddedFile* find_file(std::string_view name) {
  for (size_t i = 0; i < console::kEmbeddedFileCount; ++i) {
    if (name == console::kEmbeddedFiles[i].name) return &console::kEmbeddedFiles[i];
  }
  return nullptr;
}

// If-None-Match holds `etag` (or "*"), compared weakly.
bool not_modified(const HttpRequest& req, const std::string& etag) {
  for (size_t i = 0; i < req.header_count("If-None-Match"); ++i) {
    std::string header = req.header("If-None-Match", i);
    if (header.find('*') != std::string::npos || header.find(etag) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

// GET /console redirects to /console/; /console/ is index.html. The files
// change only with the binary: revalidated (no-cache) by their ETag.
Result<HttpReply> HttpApi::console(const HttpRequest& req) {
  if (req.path == "/console") {
    HttpReply moved{308, "", "text/plain"};
    moved.headers.emplace_back("Location", "/console/");
    return moved;
  }
  std::string name(http::path_segment(req.path, 1));  // /console/{file}
  if (name.empty()) name = "index.html";
  const console::EmbeddedFile* file = find_file(name);
  if (file == nullptr) return make_error("not_found", "no console file '" + name + "'");
  std::string etag = "\"" + std::string(file->sha256).substr(0, 32) + "\"";
  HttpReply reply{200, std::string(file->bytes, file->size), content_type_of(name)};
  if (not_modified(req, etag)) reply = HttpReply{304, "", ""};
  reply.headers.emplace_back("ETag", etag);
  reply.headers.emplace_back("Cache-Control", "no-cache");
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");
  reply.headers.emplace_back("Content-Security-Policy",
                             "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  return reply;
}

}  // namespace vend::agent
