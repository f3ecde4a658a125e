// DeviceRoutes: the operators' routes over machines (operator token).
//
//   POST /v1/devices                      provision a machine (its slots)
//   GET  /v1/devices, /v1/devices/{id}    list, one machine
//   GET  /v1/devices/{id}/slots, /faults  its slots, its recent faults
//   PUT  /v1/devices/{id}/slots/{n}       a slot's product, price, capacity
//   POST /v1/devices/{id}/restock         a restock order
//   POST /v1/devices/{id}/reconcile       ask the machine for its counts
//   GET  /v1/reconcile/{id}               the last reconciliation's report
//   POST /v1/devices/{id}/rotate-key      a new device key
//   POST /v1/devices/{id}/decommission    retire the machine
//
// Every route naming one machine is per-machine (Router::add): with several
// agents another instance's machine is redirected to it.
#pragma once

#include "core/agent_core.hpp"
#include "http/router.hpp"
#include "vend/log.hpp"

namespace vend::agent {

// Non-copyable. `core` and `log` must outlive it. Thread-safe (AgentCore
// is).
class DeviceRoutes {
 public:
  DeviceRoutes(AgentCore& core, Logger& log) : core_(core), log_(log) {}
  DeviceRoutes(const DeviceRoutes&) = delete;
  DeviceRoutes& operator=(const DeviceRoutes&) = delete;

  void add_routes(Router& router);

 private:
  Result<HttpReply> provision_device(const HttpRequest& req);
  Result<HttpReply> list_devices(const HttpRequest& req);
  Result<HttpReply> get_device(const HttpRequest& req);
  Result<HttpReply> list_faults(const HttpRequest& req);
  Result<HttpReply> list_slots(const HttpRequest& req);
  Result<HttpReply> update_slot(const HttpRequest& req);
  Result<HttpReply> restock(const HttpRequest& req);
  Result<HttpReply> reconcile(const HttpRequest& req);
  Result<HttpReply> rotate_key(const HttpRequest& req);
  Result<HttpReply> decommission(const HttpRequest& req);
  // POST /v1/devices/{id}/update: an `update` command to one online device.
  Result<HttpReply> update_firmware(const HttpRequest& req);
  Result<HttpReply> reconcile_report(const HttpRequest& req);

  AgentCore& core_;
  Logger& log_;
};

}  // namespace vend::agent
