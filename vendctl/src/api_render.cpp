// Tables of the agent's HTTP answers, and its error bodies.
#include <exception>
#include <string>

#include "text_table.hpp"
#include "vend/ctl/render.hpp"

namespace vend::ctl {

namespace {

using Json = nlohmann::json;

// nlohmann throws on a missing key or a wrong type; an answer of the wrong
// shape becomes "bad_answer" here instead.
template <typename Render>
Result<std::string> guarded(const char* what, Render render) {
  try {
    return render();
  } catch (const std::exception& e) {
    return make_error("bad_answer", std::string("unexpected ") + what + " answer: " + e.what());
  }
}

std::string text_or(const Json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

Result<std::string> render_devices(const Json& body, int64_t now_ms) {
  return guarded("devices", [&] {
    const Json& list = body.at("devices");
    if (list.empty()) return std::string("no devices (provision one: vendctl provision ...)\n");
    TextTable t({"DEVICE", "ONLINE", "SEEN", "LAST SEQ", "BOOT"});
    for (const Json& d : list) {
      const int64_t seen = d.at("last_seen_ms").get<int64_t>();
      t.add({d.at("id").get<std::string>(), d.at("online").get<bool>() ? "yes" : "NO",
             seen == 0 ? "never" : format_age(now_ms - seen) + " ago",
             std::to_string(d.at("last_processed_seq").get<int64_t>()),
             text_or(d, "boot_id", "").empty() ? "-" : text_or(d, "boot_id", "")});
    }
    return t.render();
  });
}

Result<std::string> render_orders(const Json& body) {
  return guarded("orders", [&] {
    const Json& list = body.at("orders");
    if (list.empty()) return std::string("no orders\n");
    TextTable t({"ORDER", "STATE", "DEVICE", "SLOT", "PRICE", "UPDATED", "REASON"});
    for (const Json& o : list) {
      t.add({o.at("id").get<std::string>(), o.at("state").get<std::string>(),
             o.at("device").get<std::string>(), std::to_string(o.at("slot").get<int>()),
             format_cents(o.at("price_cents").get<int64_t>()),
             format_utc(o.at("updated_ms").get<int64_t>(), true), text_or(o, "reason", "")});
    }
    return t.render();
  });
}

Result<std::string> render_provisioned(const Json& body) {
  return guarded("provision", [&] {
    return "provisioned " + body.at("id").get<std::string>() + "\n" +
           "device key: " + body.at("key").get<std::string>() + "\n" +
           "WARNING: the key is shown only this once. Store it now in the machine's key_file\n"
           "(mode 0600); the agent cannot show it again.\n";
  });
}

Result<std::string> render_rotated_key(const Json& body) {
  return guarded("rotate-key", [&] {
    return "new key for " + body.at("id").get<std::string>() + ": " +
           body.at("key").get<std::string>() + "\n" +
           "WARNING: shown only this once. Install it as the machine's key_file (mode 0600)\n"
           "and restart vend-firmware; the old key is revoked when the machine first signs\n"
           "with the new one (GET /v1/devices: key_rotation_pending false).\n";
  });
}

Result<std::string> render_decommissioned(const Json& body) {
  return guarded("decommission", [&] {
    return "decommissioned " + body.at("id").get<std::string>() + ": " +
           std::to_string(body.at("tokens_withdrawn").get<int64_t>()) +
           " token(s) withdrawn from sale, " +
           std::to_string(body.at("orders_cancelled").get<int64_t>()) +
           " reservation(s) cancelled; its key is revoked and its id stays taken.\n";
  });
}

Result<std::string> render_restock(const Json& body, const std::string& device, int slot,
                                   int count) {
  return guarded("restock", [&] {
    return "restock " + body.at("restock_id").get<std::string>() + " sent to " + device +
           ": slot " + std::to_string(slot) + ", " + std::to_string(count) +
           " item(s).\nThe items become sellable once the load is confirmed at the machine.\n";
  });
}

std::string render_reconcile(const ops::ReconcileReport& r) {
  std::string out = "reconcile " + r.id + " of " + r.device + " at " + format_utc(r.ts_ms, true) +
                    " UTC: " + r.verdict + " (trigger " + r.trigger + ", snapshot seq " +
                    std::to_string(r.snapshot_seq) + (r.full ? ", full" : "") + ")\n";
  TextTable t(
      {"SLOT", "VERDICT", "POOL", "RESV", "DISP", "PHYSICAL", "DEV TOKENS", "DIGEST", "ACTIONS"});
  for (const ops::SlotReconcile& s : r.slots) {
    std::string actions;
    for (const std::string& a : s.actions) actions += (actions.empty() ? "" : "; ") + a;
    if (s.tokens_added != 0 || s.tokens_removed != 0) {
      actions += (actions.empty() ? "" : "; ") + std::string("tokens +") +
                 std::to_string(s.tokens_added) + "/-" + std::to_string(s.tokens_removed);
    }
    t.add({std::to_string(s.slot), s.verdict, std::to_string(s.pool), std::to_string(s.reserved),
           std::to_string(s.dispatched), std::to_string(s.physical_count),
           std::to_string(s.device_tokens), s.digest_match ? "match" : "DIFFERS",
           actions.empty() ? "-" : actions});
  }
  return sanitized(out, true) + t.render();
}

Error api_error(int status, const std::string& body) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const Json& e = j["error"];
    std::string code = text_or(e, "code", "");
    if (!code.empty()) return make_error(std::move(code), text_or(e, "message", ""));
  }
  std::string start = body.substr(0, 200);
  for (char& c : start) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return make_error("http_" + std::to_string(status),
                    start.empty() ? "HTTP status " + std::to_string(status) : start);
}

}  // namespace vend::ctl
