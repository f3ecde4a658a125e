// Private to vend_agent_postgres: the write fence's claims as the arrays
// vend_fence() takes (postgres_schema.cpp), one entry per claimed shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "repository/repository.hpp"

namespace vend::agent::pg {

class FenceArrays {
 public:
  // Appends the shards of `claim`, each entry owned by changeset `owner`.
  void add(const FenceClaim& claim, size_t owner = 0);
  bool empty() const { return shards_.empty(); }
  size_t size() const { return shards_.size(); }
  // Array literals ({...}) of the entries' instances, shards and epochs.
  std::string instances() const;
  std::string shards() const;
  std::string epochs() const;
  // Entry `i` (0-based): its changeset, and a "fenced" error naming it.
  size_t owner(size_t i) const { return owners_[i]; }
  Error refusal(size_t i) const;

 private:
  std::vector<std::string> instances_;
  std::vector<int> shards_;
  std::vector<uint64_t> epochs_;
  std::vector<size_t> owners_;
};

// The positions of the changesets of `group` that carry a fence claim.
std::vector<size_t> claimed(const std::vector<const Changeset*>& group);

}  // namespace vend::agent::pg
