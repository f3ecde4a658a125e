// WriteGate: a repository write that holds the writer thread until open(),
// so that the writes submitted meanwhile pile up and form the next group.
#pragma once

#include <future>

#include "repository/repository.hpp"

namespace vend::test {

class WriteGate {
  using WriteFn = agent::WriteFn;
  using WriteContext = agent::WriteContext;

 public:
  WriteFn write() {
    return [this](WriteContext&) {
      started_.set_value();
      released_.wait();
      return Status{};
    };
  }
  void wait_started() { started_future_.wait(); }
  void open() { release_.set_value(); }

 private:
  std::promise<void> started_;
  std::future<void> started_future_ = started_.get_future();
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

}  // namespace vend::test
