#include "shell/operator_commands.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "shell/setup.hpp"
#include "vend/clock.hpp"
#include "vend/crypto.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"

namespace vend::fw {

namespace {

using Json = nlohmann::json;

constexpr DispenseState kAllStates[] = {DispenseState::kAccepted,  DispenseState::kMotorRunning,
                                        DispenseState::kDispensed, DispenseState::kFailed,
                                        DispenseState::kRejected,  DispenseState::kUncertain};

int fail(std::ostream& err, const Error& error) {
  err << "vend-firmware: " << error.to_string() << "\n";
  return exit_code_for(error);
}

bool slot_configured(const DeviceConfig& config, int slot) {
  return std::any_of(config.slots.begin(), config.slots.end(),
                     [&](const SlotConfig& s) { return s.slot == slot; });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Everything `status` shows, read in one go.
struct StatusReport {
  std::vector<SlotRow> slots;
  std::map<int, std::vector<std::string>> tokens;
  std::vector<std::pair<DispenseState, size_t>> dispenses;
  int64_t outbox_depth = 0;
  uint64_t last_seq = 0;
  uint64_t acked_seq = 0;
  std::string ledger_id;  // "" until the daemon or a restock first named it
};

Result<StatusReport> read_status(Ledger& ledger, bool with_tokens) {
  StatusReport r;
  auto slots = ledger.slots();
  if (!slots.ok()) return slots.error();
  r.slots = std::move(slots).value();
  for (const auto& s : r.slots) {
    if (!with_tokens) break;
    auto tokens = ledger.available_tokens(s.slot);
    if (!tokens.ok()) return tokens.error();
    r.tokens[s.slot] = std::move(tokens).value();
  }
  for (DispenseState state : kAllStates) {
    auto rows = ledger.dispenses_in(state);
    if (!rows.ok()) return rows.error();
    r.dispenses.emplace_back(state, rows->size());
  }
  auto depth = ledger.outbox_depth();
  auto last = ledger.last_seq();
  auto acked = ledger.acked_seq();
  if (!depth.ok()) return depth.error();
  if (!last.ok()) return last.error();
  if (!acked.ok()) return acked.error();
  r.outbox_depth = *depth;
  r.last_seq = *last;
  r.acked_seq = *acked;
  r.ledger_id = ledger.identity().ledger_id;
  return r;
}

Json status_json(const std::string& device, const StatusReport& r, bool with_tokens) {
  Json slots = Json::array();
  for (const auto& s : r.slots) {
    Json slot = {{"slot", s.slot},
                 {"product", s.product},
                 {"capacity", s.capacity},
                 {"physical_count", s.physical_count},
                 {"available_tokens", s.available_tokens}};
    if (with_tokens) slot["tokens"] = r.tokens.at(s.slot);
    slots.push_back(std::move(slot));
  }
  Json dispenses = Json::object();
  for (const auto& [state, n] : r.dispenses) dispenses[lower(to_string(state))] = n;
  return Json{{"device", device},        {"slots", slots},
              {"dispenses", dispenses},  {"outbox_depth", r.outbox_depth},
              {"last_seq", r.last_seq},  {"acked_seq", r.acked_seq},
              {"ledger_id", r.ledger_id}};
}

void print_status_text(std::ostream& out, const std::string& device, const std::string& path,
                       const StatusReport& r, bool with_tokens) {
  out << "device " << device << "  ledger " << path << " (id "
      << (r.ledger_id.empty() ? "none yet" : r.ledger_id) << ")\n";
  out << "slot  product               capacity  physical  tokens\n";
  for (const auto& s : r.slots) {
    out << std::setw(4) << s.slot << "  " << std::left << std::setw(20) << s.product.substr(0, 20)
        << std::right << std::setw(10) << s.capacity << std::setw(10) << s.physical_count
        << std::setw(8) << s.available_tokens << "\n";
    if (with_tokens) {
      for (const auto& t : r.tokens.at(s.slot)) out << "        " << t << "\n";
    }
  }
  out << "dispenses:";
  const char* sep = " ";
  for (const auto& [state, n] : r.dispenses) {
    out << sep << lower(to_string(state)) << " " << n;
    sep = ", ";
  }
  out << "\noutbox: " << r.outbox_depth << " events waiting (last seq " << r.last_seq
      << ", acknowledged up to " << r.acked_seq << ")\n";
}

}  // namespace

int run_restock(const RestockArgs& args, std::ostream& out, std::ostream& err) {
  auto setup = load_setup(args.config_path, /*with_key=*/true);
  if (!setup.ok()) return fail(err, setup.error());
  if (!slot_configured(setup->config, args.slot)) {
    return fail(err, make_error("usage", "slot " + std::to_string(args.slot) + " is not in " +
                                             args.config_path));
  }
  SecureRandom random;
  std::string restock_id = args.restock_id.empty() ? "local-" + random.id128() : args.restock_id;
  auto ledger = open_ledger(*setup, random.id128(), /*must_exist=*/false);
  if (!ledger.ok()) return fail(err, ledger.error());
  if (auto s = ledger->sync_slots(setup->config.slots); !s.ok()) return fail(err, s.error());
  SystemClock clock;
  auto minted = ledger->confirm_restock(restock_id, args.slot, args.count, clock.wall_ms(), random);
  if (!minted.ok()) return fail(err, minted.error());
  out << "restock " << restock_id << ": minted " << minted->tokens.size() << " tokens for slot "
      << args.slot << "; it now holds " << minted->physical_count << " items\n";
  return kExitOk;
}

int run_status(const StatusArgs& args, std::ostream& out, std::ostream& err) {
  auto setup = load_setup(args.config_path, /*with_key=*/false);
  if (!setup.ok()) return fail(err, setup.error());
  // Reads only: no key needed, and no event is ever signed.
  auto ledger = open_ledger(*setup, "", /*must_exist=*/true);
  if (!ledger.ok()) return fail(err, ledger.error());
  auto report = read_status(*ledger, args.tokens);
  if (!report.ok()) return fail(err, report.error());
  const std::string& device = setup->config.device_id;
  if (args.json) {
    out << status_json(device, *report, args.tokens).dump() << "\n";
  } else {
    print_status_text(out, device, setup->config.ledger_path, *report, args.tokens);
  }
  return kExitOk;
}

int run_check_config(const CheckConfigArgs& args, std::ostream& out, std::ostream& err) {
  auto setup = load_setup(args.config_path, /*with_key=*/true);
  if (!setup.ok()) return fail(err, setup.error());
  const DeviceConfig& c = setup->config;
  out << "config " << args.config_path << ": device " << c.device_id << ", " << c.slots.size()
      << " slots, broker " << c.broker_url << "\n"
      << "key " << c.key_file << ": private, a valid key\n";
  if (!c.password_file.empty())
    out << "password file " << c.password_file << ": private, one line\n";
  for (const std::string* f : {&c.tls_ca_file, &c.tls_cert_file, &c.tls_key_file}) {
    if (!f->empty()) out << "TLS file " << *f << ": parses\n";
  }
  std::error_code ec;
  if (!std::filesystem::exists(c.ledger_path, ec)) {
    auto dir = std::filesystem::path(c.ledger_path).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      return fail(err, make_error("no_ledger_dir", "ledger " + c.ledger_path + ": directory " +
                                                       dir.string() + " does not exist"));
    }
    out << "ledger " << c.ledger_path << ": none yet (a new board): the daemon creates it\n";
  } else {
    auto ledger = open_ledger(*setup, "", /*must_exist=*/true);
    if (!ledger.ok()) return fail(err, ledger.error());
    auto report = read_status(*ledger, /*with_tokens=*/false);
    if (!report.ok()) return fail(err, report.error());
    out << "ledger " << c.ledger_path << ": opens; " << report->outbox_depth
        << " events waiting to be sent\n";
  }
  out << "ok\n";
  return kExitOk;
}

int run_keygen(const KeygenArgs& args, std::ostream& out, std::ostream& err) {
  std::string hex = crypto::Key::generate().to_hex();
  if (args.out_file.empty()) {
    out << hex << "\n";
    return kExitOk;
  }
  int fd = ::open(args.out_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(err, make_error("io_error",
                                "cannot create '" + args.out_file + "': " + std::strerror(errno)));
  }
  hex += "\n";
  bool ok = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
  ok = ::fsync(fd) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (!ok) return fail(err, make_error("io_error", "cannot write '" + args.out_file + "'"));
  out << "wrote a new device key to " << args.out_file << "\n";
  return kExitOk;
}

int run_sign_dispense(const SignDispenseArgs& args, std::ostream& out, std::ostream& err) {
  auto setup = load_setup(args.config_path, /*with_key=*/true);
  if (!setup.ok()) return fail(err, setup.error());
  std::string token = args.token;
  if (token.empty()) {
    auto ledger = open_ledger(*setup, "", /*must_exist=*/true);
    if (!ledger.ok()) return fail(err, ledger.error());
    auto tokens = ledger->available_tokens(args.slot);
    if (!tokens.ok()) return fail(err, tokens.error());
    if (tokens->empty()) {
      return fail(err, make_error("no_token", "slot " + std::to_string(args.slot) +
                                                  " has no available token (restock it first)"));
    }
    token = tokens->front();
  }
  SystemClock clock;
  proto::DispenseCommand command{setup->config.device_id, args.order_id, args.slot, token,
                                 clock.wall_ms() + args.ttl_s * 1000};
  std::string mac = crypto::sign(setup->key, proto::encode_canonical(command));
  out << proto::encode(command, mac) << "\n";
  return kExitOk;
}

}  // namespace vend::fw
