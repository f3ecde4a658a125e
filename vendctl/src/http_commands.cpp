// The HTTP commands: devices, orders, restock, provision, reconcile,
// rotate-key, decommission.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api_client.hpp"
#include "commands.hpp"
#include "vend/clock.hpp"
#include "vend/ctl/render.hpp"
#include "vend/ops.hpp"

namespace vend::ctl {

namespace {

using Json = nlohmann::json;

constexpr std::chrono::milliseconds kReconcilePoll{250};

Result<std::string> operator_token(const CtlOptions& o) {
  if (o.token_file) return read_secret_file(*o.token_file);
  const char* env = std::getenv("VEND_OPERATOR_TOKEN");
  return std::string(env == nullptr ? "" : env);
}

// A 2xx answer's body as JSON; any other status is the agent's error.
Result<Json> json_of(const Result<ApiAnswer>& answer) {
  if (!answer.ok()) return answer.error();
  if (answer->status < 200 || answer->status > 299) {
    return api_error(answer->status, answer->body);
  }
  Json j = Json::parse(answer->body, nullptr, false);
  if (j.is_discarded()) {
    return make_error("bad_answer", "the agent answered " + std::to_string(answer->status) +
                                        " with a body that is not JSON");
  }
  return j;
}

// Prints the raw JSON (--json) or the table, and returns the exit code.
int print(const CtlOptions& o, const Result<Json>& body,
          const std::function<Result<std::string>(const Json&)>& table, std::ostream& out,
          std::ostream& err) {
  if (!body.ok()) return report_error(body.error(), err);
  if (o.json) {
    out << body->dump() << "\n";
    return kExitOk;
  }
  auto text = table(*body);
  if (!text.ok()) return report_error(text.error(), err);
  out << *text;
  return kExitOk;
}

std::string orders_path(const CtlOptions& o) {
  std::string query;
  if (o.state) query += "state=" + *o.state;
  if (o.limit)
    query += (query.empty() ? "" : "&") + std::string("limit=") + std::to_string(*o.limit);
  return "/v1/orders" + (query.empty() ? "" : "?" + query);
}

Json provision_body(const CtlOptions& o) {
  Json slots = Json::array();
  for (const ProvisionSlot& s : o.slots) {
    slots.push_back({{"slot", s.slot},
                     {"product", s.product},
                     {"price_cents", s.price_cents},
                     {"capacity", s.capacity}});
  }
  return Json{{"id", o.device}, {"slots", slots}};
}

// Polls GET /v1/reconcile/{device} until a report for `request_id` arrives
// (404: no report yet) or `wait_ms` passes. Returns the report's JSON text.
Result<std::string> wait_for_report(ApiClient& api, const std::string& device,
                                    const std::string& request_id, int64_t wait_ms) {
  SystemClock clock;
  const int64_t deadline = clock.monotonic_ms() + wait_ms;
  for (;;) {
    auto answer = api.get("/v1/reconcile/" + device);
    if (!answer.ok()) return answer.error();
    if (answer->status == 200) {
      auto report = ops::decode_reconcile(answer->body);
      if (!report.ok())
        return make_error("bad_answer", "reconcile report: " + report.error().to_string());
      if (report->request_id == request_id) return answer->body;
    } else if (answer->status != 404) {
      return api_error(answer->status, answer->body);
    }
    if (clock.monotonic_ms() >= deadline) {
      std::string why = "no report for request " + request_id;
      why += " of " + device + " within " + std::to_string(wait_ms / 1000) +
             " s (is the device online?)";
      return make_error("no_report", why);
    }
    std::this_thread::sleep_for(kReconcilePoll);
  }
}

int reconcile(const CtlOptions& o, ApiClient& api, std::ostream& out, std::ostream& err) {
  auto started = json_of(api.post("/v1/devices/" + o.device + "/reconcile", "{}"));
  if (!started.ok()) return report_error(started.error(), err);
  auto request_id = started->find("request_id");
  if (request_id == started->end() || !request_id->is_string()) {
    return report_error(make_error("bad_answer", "reconcile answer without request_id"), err);
  }
  if (!o.json) {
    err << "vendctl: reconciliation " << request_id->get<std::string>() << " of " << o.device
        << " requested; waiting up to " << o.wait_ms / 1000 << " s for its report\n";
  }
  auto body = wait_for_report(api, o.device, request_id->get<std::string>(), o.wait_ms);
  if (!body.ok()) return report_error(body.error(), err);
  if (o.json) {
    out << *body << "\n";
  } else {
    out << render_reconcile(ops::decode_reconcile(*body).value());
  }
  return kExitOk;
}

}  // namespace

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("bad_usage", "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  const char* space = " \t\r\n";
  const size_t begin = s.find_first_not_of(space);
  if (begin == std::string::npos) return make_error("bad_usage", path + " is empty");
  return s.substr(begin, s.find_last_not_of(space) - begin + 1);
}

int report_error(const Error& error, std::ostream& err) {
  err << "vendctl: " << error.code << ": " << error.message << "\n";
  if (error.code == "bad_usage") return kExitUsage;
  if (error.code == "unreachable") return kExitUnreachable;
  if (error.code == "no_report") return kExitNoReport;
  return kExitApiError;
}

int run_http_command(const CtlOptions& o, std::ostream& out, std::ostream& err) {
  auto token = operator_token(o);
  if (!token.ok()) return report_error(token.error(), err);
  ApiClient api(o.api_url, *token);
  switch (o.command) {
    case CommandKind::kDevices: {
      const int64_t now = SystemClock().wall_ms();
      return print(
          o, json_of(api.get("/v1/devices")), [&](const Json& j) { return render_devices(j, now); },
          out, err);
    }
    case CommandKind::kOrders:
      return print(o, json_of(api.get(orders_path(o))), render_orders, out, err);
    case CommandKind::kRestock: {
      Json body{{"slot", o.slot}, {"count", o.count}};
      return print(
          o, json_of(api.post("/v1/devices/" + o.device + "/restock", body.dump())),
          [&](const Json& j) { return render_restock(j, o.device, o.slot, o.count); }, out, err);
    }
    case CommandKind::kProvision: {
      int code = print(o, json_of(api.post("/v1/devices", provision_body(o).dump())),
                       render_provisioned, out, err);
      if (code == kExitOk && o.json) err << "vendctl: store the key now; it is shown only once\n";
      return code;
    }
    case CommandKind::kReconcile: return reconcile(o, api, out, err);
    case CommandKind::kRotateKey: {
      int code = print(o, json_of(api.post("/v1/devices/" + o.device + "/rotate-key", "{}")),
                       render_rotated_key, out, err);
      if (code == kExitOk && o.json) err << "vendctl: store the key now; it is shown only once\n";
      return code;
    }
    case CommandKind::kDecommission:
      return print(o, json_of(api.post("/v1/devices/" + o.device + "/decommission", "{}")),
                   render_decommissioned, out, err);
    default: return report_error(make_error("bad_usage", "not an HTTP command"), err);
  }
}

}  // namespace vend::ctl
