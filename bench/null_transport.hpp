// A Transport whose publishes go nowhere, for in-process benchmarks of the
// agent core (the ops views and commands are not what they measure).
#pragma once

#include <string>

#include "vend/transport.hpp"

namespace vend::bench {

class NullTransport final : public Transport {
 public:
  void on_message(MessageHandler) override {}
  void on_connection(ConnectionHandler) override {}
  Status connect() override { return {}; }
  void disconnect() override {}
  bool connected() const override { return true; }
  Status publish(const Message&) override { return {}; }
  Status subscribe(const std::string&, int) override { return {}; }
};

}  // namespace vend::bench
