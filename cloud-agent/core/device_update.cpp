// DeviceDesk: firmware updates over the air, one device at a time (the
// device decides, verifies and reports; docs/firmware.md).
#include "core/device_desk.hpp"
#include "core/output.hpp"

namespace vend::agent {

Result<std::string> DeviceDesk::request_update(const std::string& device_id,
                                               const UpdateRequest& update) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* it = devices_.find(device_id);
  if (it == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) {
    return make_error("conflict", device_id + " is decommissioned");
  }
  if (options.command_version < 2) {
    return make_error("conflict",
                      "update commands exist only in protocol v2 (the agent runs "
                      "--command-version 1)");
  }
  if (!dev.online) {
    return make_error("device_offline",
                      device_id + " is offline; send the update when it is online");
  }
  proto::UpdateCommand command;
  command.device = dev.id;
  command.update_id = "upd-" + random.id128().substr(0, 16);
  command.version = update.version;
  command.url = update.url;
  command.size_bytes = update.size_bytes;
  command.sha256 = update.sha256;
  command.signature = update.signature;
  if (auto s = out_.publish_command(dev, command); !s.ok()) {
    return make_error("unavailable", "update not sent: " + s.error().message);
  }
  log.info("devices", "update " + command.update_id + " of " + dev.id + " to " + update.version +
                          " sent (" + update.url + ")");
  return command.update_id;
}

}  // namespace vend::agent
