// The directory of a run's files: a given one (created if missing, kept), or
// a fresh temporary one removed on destruction. Non-copyable, movable.
#pragma once

#include <string>

#include "vend/result.hpp"

namespace vend::sim {

class WorkDir {
 public:
  // `path` "" = a new directory under $TMPDIR (or /tmp), removed afterwards.
  static Result<WorkDir> make(const std::string& path);
  WorkDir(WorkDir&& other) noexcept : path_(std::move(other.path_)), owned_(other.owned_) {
    other.owned_ = false;
  }
  WorkDir& operator=(WorkDir&&) = delete;
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir();

  const std::string& path() const { return path_; }

 private:
  WorkDir(std::string path, bool owned) : path_(std::move(path)), owned_(owned) {}
  std::string path_;
  bool owned_;
};

}  // namespace vend::sim
