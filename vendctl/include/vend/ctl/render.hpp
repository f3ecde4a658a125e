// Text rendering of vendctl's views: the `watch` frame of a FleetView and
// the tables of the agent's HTTP answers. Pure functions of their inputs
// (the current wall time is a parameter).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "vend/ctl/fleet_view.hpp"
#include "vend/ops.hpp"
#include "vend/result.hpp"

namespace vend::ctl {

struct FrameOptions {
  // Prefix the frame with ANSI "cursor home + clear screen" (a terminal).
  bool ansi = false;
  // Device rows shown; the rest is summarised as "... N more". 0 = all.
  size_t max_devices = 0;
  // A line under the header when not empty ("broker connection lost").
  std::string note;
};

// One `watch` frame: a header with the time, the fleet summary line, the
// device table, the recent order events and the active alerts. Ends with a
// newline.
std::string render_frame(const FleetView& view, int64_t now_ms, const FrameOptions& options);

// Tables of the agent's answers (docs/openapi.yaml). An answer without the
// expected shape is an error "bad_answer" naming what is missing.
Result<std::string> render_devices(const nlohmann::json& body, int64_t now_ms);
Result<std::string> render_orders(const nlohmann::json& body);
Result<std::string> render_provisioned(const nlohmann::json& body);
// POST /v1/devices/{id}/rotate-key and /decommission answers.
Result<std::string> render_rotated_key(const nlohmann::json& body);
Result<std::string> render_decommissioned(const nlohmann::json& body);
Result<std::string> render_restock(const nlohmann::json& body, const std::string& device, int slot,
                                   int count);
std::string render_reconcile(const ops::ReconcileReport& report);

// The agent's error answer {"error":{"code","message"}} as an Error; any
// other body becomes code "http_<status>" with the start of the body.
Error api_error(int status, const std::string& body);

}  // namespace vend::ctl
