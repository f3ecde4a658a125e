// A command as the agent sends it (protocol v2): one without an expiry gets
// now + ttl, so a test that builds `proto::Ack{device, 4}` signs a command
// the firmware accepts. A dispense keeps its own expires_at_ms; a command
// whose `v` was set to 1 stays v1 (no expiry).
#pragma once

#include <cstdint>
#include <variant>

#include "vend/protocol.hpp"

namespace vend::test {

inline constexpr int64_t kCommandTtlMs = 30'000;

inline proto::Command fresh_command(proto::Command command, int64_t now_ms,
                                    int64_t ttl_ms = kCommandTtlMs) {
  std::visit(
      [&](auto& c) {
        if (c.v >= 2 && c.expires_at_ms == 0) c.expires_at_ms = now_ms + ttl_ms;
      },
      command);
  return command;
}

}  // namespace vend::test
