// The cloud agent of the deterministic world: AgentCore over a Repository in
// the work dir (manual commit: writes commit when the core waits for them or
// the world flushes) and a bus client. A crash drops the core, every write
// not committed yet and the bus connection; the database stays and is reopened by start(),
// which rebuilds the timers from it.
// Not thread-safe (the repository's writer thread is internal to it).
// Non-copyable.
#pragma once

#include <memory>
#include <string>

#include "trace.hpp"
#include "vend/agent/agent_core.hpp"
#include "vend/agent/repository.hpp"
#include "vend/in_memory_bus.hpp"

namespace vend::sim {

inline constexpr const char* kAgentClientId = "vend-agent";

// "vm-001 evt 12 dispense_result DISPENSED ord-..." / "vm-001 status online 0123abcd",
// for the trace.
std::string describe_device_message(const Message& message);

class WorldAgent {
 public:
  WorldAgent(std::string db_path, agent::AgentOptions options, InMemoryBus& bus, const Clock& clock,
             Random& random, Logger& log, Trace& trace);
  ~WorldAgent();
  WorldAgent(const WorldAgent&) = delete;
  WorldAgent& operator=(const WorldAgent&) = delete;

  // REQUIRES: !up().
  Status start();
  // Process death (kill -9): uncommitted writes are lost. REQUIRES: up().
  void crash();
  bool up() const { return core_ != nullptr; }
  void tick();
  // Waits until every write submitted so far is committed. No-op while down.
  void flush();

  // REQUIRES: up().
  agent::AgentCore& core() { return *core_; }

 private:
  std::string db_path_;
  agent::AgentOptions options_;
  InMemoryBus& bus_;
  const Clock& clock_;
  Random& random_;
  Logger& log_;
  Trace& trace_;
  std::unique_ptr<agent::Repository> repo_;
  std::unique_ptr<InMemoryClient> client_;
  std::unique_ptr<agent::AgentCore> core_;
};

}  // namespace vend::sim
