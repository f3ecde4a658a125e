#include "devices/device_book.hpp"

namespace vend::agent {

DeviceRecord* DeviceBook::find(std::string_view id) {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

const DeviceRecord* DeviceBook::find(std::string_view id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

DeviceRecord& DeviceBook::add(const std::string& id) {
  auto [it, added] = records_.try_emplace(id);
  DeviceRecord& rec = it->second;
  if (added) {
    rec.id = id;
    rec.index = static_cast<uint32_t>(by_index_.size());
    by_index_.push_back(&rec);
    by_id_.emplace(it->first, &rec);  // the key lives in the node: it never moves
  }
  return rec;
}

DeviceRecord* DeviceBook::at_index(uint32_t index) {
  return index < by_index_.size() ? by_index_[index] : nullptr;
}

}  // namespace vend::agent
