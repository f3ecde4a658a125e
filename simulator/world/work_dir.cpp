#include "world/work_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace vend::sim {

Result<WorkDir> WorkDir::make(const std::string& path) {
  std::error_code ec;
  if (!path.empty()) {
    std::filesystem::create_directories(path, ec);
    if (ec) return make_error("work_dir", "cannot create '" + path + "': " + ec.message());
    return WorkDir(std::filesystem::absolute(path).string(), false);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/vend-sim-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return make_error("work_dir", "cannot create a directory like '" + pattern + "'");
  }
  return WorkDir(buf.data(), true);
}

WorkDir::~WorkDir() {
  if (!owned_ || path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace vend::sim
