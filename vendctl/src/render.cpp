// The `watch` frame.
#include "vend/ctl/render.hpp"

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "text_table.hpp"

namespace vend::ctl {

namespace {

constexpr const char* kAnsiHomeClear = "\x1b[H\x1b[2J";

// Order states in lifecycle order; others (from a newer agent) follow.
constexpr std::array<std::string_view, 9> kStateOrder = {"RESERVED",  "PAID",     "DISPATCHED",
                                                         "COMPLETED", "EXPIRED",  "CANCELLED",
                                                         "FAILED",    "REFUNDED", "NEEDS_REVIEW"};

std::string orders_text(const ops::FleetSummary& f) {
  std::string out;
  auto add = [&](const std::string& state, int64_t n) {
    out += (out.empty() ? "" : ", ") + state + " " + std::to_string(n);
  };
  for (std::string_view s : kStateOrder) {
    auto it = f.orders_by_state.find(std::string(s));
    if (it != f.orders_by_state.end() && it->second != 0) add(it->first, it->second);
  }
  for (const auto& [state, n] : f.orders_by_state) {
    bool known = false;
    for (std::string_view s : kStateOrder) known = known || s == state;
    if (!known && n != 0) add(state, n);
  }
  if (out.empty()) out = "none";
  return out + " (" + std::to_string(f.orders_total) + " since start)";
}

std::string summary_line(const FleetView& view) {
  std::optional<ops::FleetSummary> fleet = view.fleet();
  if (!fleet) return "fleet: no summary yet (is vend-agent publishing vend/v1/ops/fleet?)\n";
  const ops::FleetSummary& f = *fleet;
  std::string agents;
  for (const auto& [id, s] : view.instances()) {
    agents += (agents.empty() ? "agents " : ", ") + id + " " + std::to_string(s.devices) +
              " devices" + (s.storage_ok ? "" : " STORAGE FAILING");
  }
  if (!agents.empty()) agents += "\n";
  return agents + "devices " + std::to_string(f.online) + "/" + std::to_string(f.devices) +
         " online | stock " + std::to_string(f.stock_total) + " | orders " + orders_text(f) +
         " | alerts " + std::to_string(f.alerts_active) + " | storage " +
         (f.storage_ok ? "ok" : "FAILING") + "\n";
}

std::vector<std::string> device_row(const ops::DeviceStatus& d, int64_t now_ms) {
  int64_t stock = 0, reserved = 0, dispatched = 0;
  for (const ops::SlotStatus& s : d.slots) {
    stock += s.pool;
    reserved += s.reserved;
    dispatched += s.dispatched;
  }
  return {d.device,
          d.online ? "yes" : "NO",
          d.last_seen_ms == 0 ? "never" : format_age(now_ms - d.last_seen_ms),
          std::to_string(stock),
          std::to_string(reserved) + "/" + std::to_string(dispatched),
          d.snapshot_at_ms == 0 ? "-" : std::to_string(d.outbox_depth),
          d.last_verdict.empty() ? "-" : d.last_verdict};
}

std::string device_table(const FleetView& view, int64_t now_ms, size_t max_rows) {
  if (view.devices().empty()) return "no device status yet\n";
  // Several agents: which instance serves each machine.
  bool owners = false;
  for (const auto& [id, d] : view.devices()) owners = owners || !d.owner.empty();
  std::vector<std::string> header = {"DEVICE",    "ONLINE", "SEEN",     "STOCK",
                                     "RESV/DISP", "OUTBOX", "RECONCILE"};
  if (owners) header.push_back("AGENT");
  TextTable t(header);
  size_t hidden = 0;
  for (const auto& [id, d] : view.devices()) {
    if (max_rows != 0 && t.rows() >= max_rows) {
      ++hidden;
      continue;
    }
    std::vector<std::string> row = device_row(d, now_ms);
    if (owners) row.push_back(d.owner.empty() ? "-" : d.owner);
    t.add(row);
  }
  std::string out = t.render();
  if (hidden > 0) out += "... " + std::to_string(hidden) + " more\n";
  return out;
}

std::string orders_table(const FleetView& view) {
  if (view.recent_orders().empty()) return "RECENT ORDERS: none since watching\n";
  TextTable t({"TIME", "ORDER", "DEVICE", "SLOT", "TRANSITION", "PRICE", "REASON"});
  for (const ops::OrderEvent& e : view.recent_orders()) {
    const std::string from = e.from_state.empty() ? "new" : e.from_state;
    t.add({format_utc(e.ts_ms), e.order_id, e.device, std::to_string(e.slot),
           from + " -> " + e.to_state, format_cents(e.price_cents), e.reason});
  }
  return "RECENT ORDERS\n" + t.render();
}

std::string alerts_table(const FleetView& view) {
  if (view.active_alerts().empty()) return "ACTIVE ALERTS: none\n";
  TextTable t({"SINCE", "SEVERITY", "CODE", "DEVICE", "SLOT", "MESSAGE"});
  for (const auto& [key, a] : view.active_alerts()) {
    t.add({format_utc(a.ts_ms), a.severity, a.code, a.device.empty() ? "(fleet)" : a.device,
           a.slot == 0 ? "-" : std::to_string(a.slot), a.message});
  }
  return "ACTIVE ALERTS\n" + t.render();
}

}  // namespace

std::string render_frame(const FleetView& view, int64_t now_ms, const FrameOptions& options) {
  std::string out = "vend fleet at " + format_utc(now_ms, true) + " UTC (" +
                    std::to_string(view.messages()) + " ops messages)\n";
  if (!options.note.empty()) out += "!! " + options.note + "\n";
  out += summary_line(view);
  out += "\n" + device_table(view, now_ms, options.max_devices);
  out += "\n" + orders_table(view);
  out += "\n" + alerts_table(view);
  if (view.rejected() > 0) {
    out += "\n" + std::to_string(view.rejected()) +
           " message(s) rejected; last: " + view.last_error() + "\n";
  }
  // Payload text (products, messages, states) never reaches the terminal raw.
  return (options.ansi ? kAnsiHomeClear : "") + sanitized(out, true);
}

}  // namespace vend::ctl
