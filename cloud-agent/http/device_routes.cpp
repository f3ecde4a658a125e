#include "http/device_routes.hpp"

#include <set>

#include "http/http_json.hpp"
#include "http/operator_audit.hpp"
#include "vend/json_reader.hpp"
#include "vend/protocol.hpp"

namespace vend::agent {

namespace {

constexpr size_t kMaxProduct = 128;
constexpr int64_t kMaxPriceCents = 10'000'000;
constexpr int64_t kMaxCapacity = 1000;  // the firmware's slot capacity range
constexpr int64_t kMaxRestockCount = 1000;
constexpr size_t kMaxSlots = 255;
constexpr int64_t kDefaultFaults = 20;
constexpr int64_t kMaxFaults = 100;

Result<std::string> device_id_of(const HttpRequest& req) {
  std::string id(http::path_segment(req.path, 2));  // /v1/devices/{id}, /v1/reconcile/{id}
  if (!http::is_valid_id(id)) return make_error("not_found", "no device '" + id + "'");
  return id;
}

// One element of "slots" in a provisioning request.
Result<SlotSpec> read_slot_spec(http::Json& element, const std::string& path) {
  if (!element.is_object()) return http::bad_request("'" + path + "' must be an object");
  http::BodyReader f(element, path);
  if (Status s = f.only({"slot", "product", "price_cents", "capacity"}); !s.ok()) {
    return s.error();
  }
  SlotSpec spec;
  auto slot = f.integer("slot", 1, 255);
  if (!slot.ok()) return slot.error();
  auto product = f.text("product", kMaxProduct);
  if (!product.ok()) return product.error();
  auto price = f.integer("price_cents", 0, kMaxPriceCents);
  if (!price.ok()) return price.error();
  auto capacity = f.integer("capacity", 1, kMaxCapacity);
  if (!capacity.ok()) return capacity.error();
  spec.slot = static_cast<int>(*slot);
  spec.product = *product;
  spec.price_cents = *price;
  spec.capacity = static_cast<int>(*capacity);
  return spec;
}

Result<std::vector<SlotSpec>> read_slot_specs(http::Json& slots) {
  std::vector<SlotSpec> specs;
  std::set<int> seen;
  for (size_t i = 0; i < slots.size(); ++i) {
    std::string path = "slots[" + std::to_string(i) + "]";
    auto spec = read_slot_spec(slots[i], path);
    if (!spec.ok()) return spec.error();
    if (!seen.insert(spec->slot).second) {
      return http::bad_request("'" + path + ".slot': slot " + std::to_string(spec->slot) +
                               " is listed twice");
    }
    specs.push_back(std::move(spec).value());
  }
  return specs;
}

// The {slot} of /v1/devices/{id}/slots/{slot} (digits by the route).
Result<int> path_slot_of(const HttpRequest& req) {
  int64_t slot = std::stoll(std::string(http::path_segment(req.path, 4)));
  if (slot < 1 || slot > 255) return http::bad_request("the slot in the path must be 1..255");
  return static_cast<int>(slot);
}

Result<SlotView> find_slot(AgentCore& core, const std::string& device, int slot) {
  auto slots = core.slots(device);
  if (!slots.ok()) return slots.error();
  for (const SlotView& s : *slots) {
    if (s.slot == slot) return s;
  }
  return make_error("unknown_slot", "device '" + device + "' has no slot " + std::to_string(slot));
}

}  // namespace

void DeviceRoutes::add_routes(Router& router) {
  const std::string device = "/v1/devices/{id}";
  router.add("POST", "/v1/devices", Access::kAdmin,
             route_to(this, &DeviceRoutes::provision_device));
  router.add("GET", "/v1/devices", Access::kOperator, route_to(this, &DeviceRoutes::list_devices));
  // Per-machine routes: another instance's machine is redirected to it.
  const bool machine = true;
  auto add = [&](const char* method, const std::string& pattern, Access access,
                 Result<HttpReply> (DeviceRoutes::*handler)(const HttpRequest&)) {
    router.add(method, pattern, access, route_to(this, handler), machine);
  };
  add("GET", device, Access::kOperator, &DeviceRoutes::get_device);
  add("GET", device + "/slots", Access::kOperator, &DeviceRoutes::list_slots);
  add("GET", device + "/faults", Access::kOperator, &DeviceRoutes::list_faults);
  add("PUT", device + "/slots/{n}", Access::kAdmin, &DeviceRoutes::update_slot);
  add("POST", device + "/restock", Access::kRestock, &DeviceRoutes::restock);
  add("POST", device + "/reconcile", Access::kRestock, &DeviceRoutes::reconcile);
  add("POST", device + "/rotate-key", Access::kAdmin, &DeviceRoutes::rotate_key);
  add("POST", device + "/decommission", Access::kAdmin, &DeviceRoutes::decommission);
  add("POST", device + "/update", Access::kAdmin, &DeviceRoutes::update_firmware);
  add("GET", "/v1/reconcile/{id}", Access::kOperator, &DeviceRoutes::reconcile_report);
}

Result<HttpReply> DeviceRoutes::provision_device(const HttpRequest& req) {
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  if (Status s = fields.only({"id", "slots"}); !s.ok()) return s.error();
  auto id = fields.id("id");
  if (!id.ok()) return id.error();
  auto slots = fields.array("slots", 1, kMaxSlots);
  if (!slots.ok()) return slots.error();
  auto specs = read_slot_specs(**slots);
  if (!specs.ok()) return specs.error();
  http::Json detail = {{"slots", specs->size()}};
  auto device =
      core_.provision_device(*id, *specs, audit_of(req, "provision", *id, "", detail.dump()));
  if (!device.ok()) return device.error();
  log_.info("http", "provisioned device '" + device->id + "'");
  http::Json reply = {{"id", device->id}, {"key", device->key_hex}};
  return HttpReply{201, reply.dump()};
}

Result<HttpReply> DeviceRoutes::list_devices(const HttpRequest&) {
  http::Json list = http::Json::array();
  for (const DeviceView& d : core_.devices()) list.push_back(http::device_json(d));
  return HttpReply{200, http::Json{{"devices", std::move(list)}}.dump()};
}

// One device of GET /v1/devices (the console's device page).
Result<HttpReply> DeviceRoutes::get_device(const HttpRequest& req) {
  auto id = device_id_of(req);
  if (!id.ok()) return id.error();
  if (!req.params.empty()) return http::bad_request("GET /v1/devices/{id} takes no parameters");
  auto device = core_.device(*id);
  if (!device.ok()) return device.error();
  return HttpReply{200, http::device_json(*device).dump()};
}

// ?limit=1..100 (20), most recent first.
Result<HttpReply> DeviceRoutes::list_faults(const HttpRequest& req) {
  auto id = device_id_of(req);
  if (!id.ok()) return id.error();
  int64_t limit = kDefaultFaults;
  for (const auto& [name, value] : req.params) {
    if (name != "limit" || req.param_count(name) > 1) {
      return http::bad_request("GET .../faults takes one query parameter, 'limit'");
    }
    auto n = http::integer_param(name, value, 1, kMaxFaults);
    if (!n.ok()) return n.error();
    limit = *n;
  }
  auto faults = core_.faults(*id, static_cast<size_t>(limit));
  if (!faults.ok()) return faults.error();
  http::Json list = http::Json::array();
  for (const StoredFault& f : *faults) list.push_back(http::fault_json(f));
  return HttpReply{200, http::Json{{"device", *id}, {"faults", std::move(list)}}.dump()};
}

Result<HttpReply> DeviceRoutes::list_slots(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  auto slots = core_.slots(*device);
  if (!slots.ok()) return slots.error();
  http::Json list = http::Json::array();
  for (const SlotView& s : *slots) list.push_back(http::slot_json(s));
  return HttpReply{200, http::Json{{"device", *device}, {"slots", std::move(list)}}.dump()};
}

// Changes product and price (and optionally capacity) of an existing slot.
Result<HttpReply> DeviceRoutes::update_slot(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  auto slot = path_slot_of(req);
  if (!slot.ok()) return slot.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  if (Status s = fields.only({"product", "price_cents", "capacity"}); !s.ok()) return s.error();
  auto product = fields.text("product", kMaxProduct);
  if (!product.ok()) return product.error();
  auto price = fields.integer("price_cents", 0, kMaxPriceCents);
  if (!price.ok()) return price.error();
  auto current = find_slot(core_, *device, *slot);
  if (!current.ok()) return current.error();
  SlotSpec spec{*slot, *product, *price, current->capacity};
  if (fields.has("capacity")) {
    auto capacity = fields.integer("capacity", 1, kMaxCapacity);
    if (!capacity.ok()) return capacity.error();
    spec.capacity = static_cast<int>(*capacity);
  }
  http::Json detail = {{"slot", *slot},
                       {"before", http::slot_json(*current)},
                       {"after",
                        {{"product", spec.product},
                         {"price_cents", spec.price_cents},
                         {"capacity", spec.capacity}}}};
  if (Status s =
          core_.set_slot(*device, spec, audit_of(req, "set_slot", *device, "", detail.dump()));
      !s.ok()) {
    return s.error();
  }
  auto updated = find_slot(core_, *device, *slot);
  if (!updated.ok()) return updated.error();
  return HttpReply{200, http::slot_json(*updated).dump()};
}

Result<HttpReply> DeviceRoutes::restock(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  if (Status s = fields.only({"slot", "count"}); !s.ok()) return s.error();
  auto slot = fields.integer("slot", 1, 255);
  if (!slot.ok()) return slot.error();
  auto count = fields.integer("count", 1, kMaxRestockCount);
  if (!count.ok()) return count.error();
  http::Json detail = {{"slot", *slot}, {"count", *count}};
  auto id = core_.request_restock(*device, static_cast<int>(*slot), static_cast<int>(*count),
                                  audit_of(req, "restock", *device, "", detail.dump()));
  if (!id.ok()) return id.error();
  return HttpReply{202, http::Json{{"restock_id", *id}}.dump()};
}

namespace {
// The body of a POST that takes no fields: none, or {}.
Status no_fields(const HttpRequest& req) {
  if (req.body.empty()) return {};
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  return http::BodyReader(*body).only({});
}
}  // namespace

Result<HttpReply> DeviceRoutes::rotate_key(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  if (Status s = no_fields(req); !s.ok()) return s.error();
  auto rotated = core_.rotate_key(*device, audit_of(req, "rotate_key", *device));
  if (!rotated.ok()) return rotated.error();
  log_.info("http", "new key issued for device '" + rotated->id + "'");
  return HttpReply{200, http::Json{{"id", rotated->id}, {"key", rotated->key_hex}}.dump()};
}

Result<HttpReply> DeviceRoutes::decommission(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  if (Status s = no_fields(req); !s.ok()) return s.error();
  auto done = core_.decommission_device(*device, audit_of(req, "decommission", *device));
  if (!done.ok()) return done.error();
  log_.info("http", "decommissioned device '" + done->id + "'");
  return HttpReply{200, http::Json{{"id", done->id},
                                   {"tokens_withdrawn", done->tokens_withdrawn},
                                   {"orders_cancelled", done->orders_cancelled}}
                            .dump()};
}

namespace {
// The body of POST /v1/devices/{id}/update, checked as the device's codec
// will check the command (docs/protocol.md, `update`).
Result<UpdateRequest> read_update_request(http::BodyReader& f) {
  if (Status s = f.only({"version", "url", "size_bytes", "sha256", "signature"}); !s.ok()) {
    return s.error();
  }
  UpdateRequest u;
  auto version = f.text("version", proto::kMaxVersionLength);
  if (!version.ok()) return version.error();
  if (!proto::is_valid_version(*version)) {
    return http::bad_request("'version' must be 1..4 dot-separated numbers of 1..9 digits");
  }
  auto url = f.text("url", proto::kMaxUrlLength);
  if (!url.ok()) return url.error();
  if (!proto::is_valid_update_url(*url)) {
    return http::bad_request("'url' must be an http:// or https:// URL without spaces or quotes");
  }
  auto size = f.integer("size_bytes", 1, static_cast<int64_t>(proto::kMaxUpdateBytes));
  if (!size.ok()) return size.error();
  auto sha = f.text("sha256", 64);
  if (!sha.ok()) return sha.error();
  if (!json::is_hex64(*sha)) return http::bad_request("'sha256' must be 64 lowercase hex chars");
  auto signature = f.text("signature", 128);
  if (!signature.ok()) return signature.error();
  if (signature->size() != 128 || !json::is_hex64(signature->substr(0, 64)) ||
      !json::is_hex64(signature->substr(64))) {
    return http::bad_request("'signature' must be 128 lowercase hex chars (Ed25519)");
  }
  u.version = *version;
  u.url = *url;
  u.size_bytes = static_cast<uint64_t>(*size);
  u.sha256 = *sha;
  u.signature = *signature;
  return u;
}
}  // namespace

Result<HttpReply> DeviceRoutes::update_firmware(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  auto update = read_update_request(fields);
  if (!update.ok()) return update.error();
  http::Json detail = {{"version", update->version}, {"size_bytes", update->size_bytes}};
  auto id =
      core_.request_update(*device, *update, audit_of(req, "update", *device, "", detail.dump()));
  if (!id.ok()) return id.error();
  log_.info("http", "update " + *id + " of '" + *device + "' to " + update->version + " requested");
  return HttpReply{
      202,
      http::Json{{"device", *device}, {"update_id", *id}, {"version", update->version}}.dump()};
}

Result<HttpReply> DeviceRoutes::reconcile(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  if (Status s = no_fields(req); !s.ok()) return s.error();
  auto id = core_.request_reconcile(*device, audit_of(req, "reconcile", *device));
  if (!id.ok()) return id.error();
  return HttpReply{202,
                   http::Json{{"device", *device}, {"request_id", *id}, {"full", true}}.dump()};
}

Result<HttpReply> DeviceRoutes::reconcile_report(const HttpRequest& req) {
  auto device = device_id_of(req);
  if (!device.ok()) return device.error();
  auto report = core_.reconcile_report(*device);
  if (!report.ok()) return report.error();
  return HttpReply{200, *report};
}

}  // namespace vend::agent
