#include "world/trace.hpp"

namespace vend::sim {

Trace::Trace(const std::string& path, size_t keep_last) : keep_last_(keep_last) {
  if (!path.empty()) file_ = std::make_unique<std::ofstream>(path, std::ios::trunc);
}

void Trace::add(const std::string& line) {
  std::string full = "s" + std::to_string(step_) + " t" + std::to_string(now_ms_) + " " + line;
  for (unsigned char c : full) {
    hash_ ^= c;
    hash_ *= 1099511628211ULL;
  }
  hash_ ^= '\n';
  hash_ *= 1099511628211ULL;
  ++lines_;
  if (file_) *file_ << full << '\n';
  last_.push_back(std::move(full));
  if (last_.size() > keep_last_) last_.pop_front();
}

std::string Trace::last_lines() const {
  std::string out;
  for (const auto& l : last_) out += "  " + l + "\n";
  return out;
}

}  // namespace vend::sim
