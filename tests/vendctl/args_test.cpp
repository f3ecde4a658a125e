// vendctl's command line: every command, both option spellings, and the
// refusals (unknown or misplaced options, bad values, wrong arity).
#include "vend/ctl/args.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_support.hpp"

namespace vend::ctl {
namespace {

CtlOptions parsed(const std::vector<std::string>& args) {
  auto o = parse_args(args);
  REQUIRE_MESSAGE(o.ok(), vend::test::error_text(o));
  return *o;
}

std::string refusal(const std::vector<std::string>& args) {
  auto o = parse_args(args);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error().code == "bad_usage");
  return o.error().message;
}

TEST_CASE("watch: defaults and options") {
  CtlOptions d = parsed({"watch"});
  CHECK(d.command == CommandKind::kWatch);
  CHECK(d.mqtt_url == "tcp://127.0.0.1:1883");
  CHECK_FALSE(d.once);
  CHECK_FALSE(d.for_ms.has_value());

  CtlOptions o =
      parsed({"watch", "--mqtt=ssl://broker:8883", "--once", "--for", "3", "--mqtt-username", "ops",
              "--mqtt-password-file", "/run/pw", "--mqtt-ca-file", "/etc/vend/ca.crt"});
  CHECK(o.mqtt_url == "ssl://broker:8883");
  CHECK(o.once);
  CHECK(o.for_ms == 3000);
  CHECK(o.username == "ops");
  CHECK(o.password_file == "/run/pw");
  CHECK(o.ca_file == "/etc/vend/ca.crt");
  CHECK(o.warnings.empty());

  // The spellings of before: the same options, one warning each.
  CtlOptions old = parsed(
      {"watch", "--username", "ops", "--password-file=/run/pw", "--ca-file", "/etc/vend/ca.crt"});
  CHECK(old.username == "ops");
  CHECK(old.password_file == "/run/pw");
  CHECK(old.ca_file == "/etc/vend/ca.crt");
  CHECK(old.warnings ==
        std::vector<std::string>{"--username is deprecated; use --mqtt-username",
                                 "--password-file is deprecated; use --mqtt-password-file",
                                 "--ca-file is deprecated; use --mqtt-ca-file"});
  CHECK(parsed({"--version"}).command == CommandKind::kVersion);
  CHECK(refusal({"--version", "watch"}) == "--version takes no arguments");

  CHECK(refusal({"watch", "--mqtt-username", "ops"}) ==
        "--mqtt-username and --mqtt-password-file go together");
  CHECK(refusal({"watch", "--for", "0"}).find("--for") == 0);
  CHECK(refusal({"watch", "--once=yes"}) == "--once takes no value");
  CHECK(refusal({"watch", "--json"}) == "--json is not an option of watch");
  CHECK(refusal({"watch", "extra"}) == "usage: vendctl watch");
}

TEST_CASE("HTTP commands: positionals, --api, --token-file, --json") {
  CtlOptions r = parsed({"restock", "vm-1", "3", "12", "--api", "http://10.0.0.5:9000",
                         "--token-file=/etc/vend/op.token", "--json"});
  CHECK(r.command == CommandKind::kRestock);
  CHECK(r.device == "vm-1");
  CHECK(r.slot == 3);
  CHECK(r.count == 12);
  CHECK(r.api_url == "http://10.0.0.5:9000");
  CHECK(r.token_file == "/etc/vend/op.token");
  CHECK(r.json);

  CtlOptions orders = parsed({"orders", "--state", "PAID", "--limit", "5"});
  CHECK(orders.state == "PAID");
  CHECK(orders.limit == 5);
  CHECK(parsed({"devices"}).api_url == "http://127.0.0.1:8080");
  CHECK(parsed({"reconcile", "vm-1", "--wait", "7"}).wait_ms == 7000);
  CHECK(parsed({"reconcile", "vm-1"}).wait_ms == 30000);
  CHECK(parsed({"rotate-key", "vm-1"}).command == CommandKind::kRotateKey);
  CHECK(parsed({"decommission", "vm-1", "--json"}).command == CommandKind::kDecommission);
  CHECK(parsed({"decommission", "vm-1"}).device == "vm-1");
  CHECK(refusal({"rotate-key"}) == "usage: vendctl rotate-key DEVICE");
  CHECK(refusal({"decommission", "vm/1"}).find("DEVICE") == 0);
  CHECK(refusal({"decommission", "vm-1", "--wait", "3"}) ==
        "--wait is not an option of decommission");

  CHECK(refusal({"restock", "vm-1", "0", "1"}).find("SLOT") == 0);
  CHECK(refusal({"restock", "vm-1", "1", "1001"}).find("COUNT") == 0);
  CHECK(refusal({"restock", "vm-1", "1"}) == "usage: vendctl restock DEVICE SLOT COUNT");
  CHECK(refusal({"restock", "vm/1", "1", "1"}).find("DEVICE") == 0);
  CHECK(refusal({"orders", "--limit", "1001"}).find("--limit") == 0);
  CHECK(refusal({"orders", "--state", "paid&x=1"}).find("--state") == 0);
  CHECK(refusal({"devices", "--once"}) == "--once is not an option of devices");
  CHECK(refusal({"devices", "--api"}) == "--api: missing value");
  CHECK(refusal({"devices", "--bogus"}) == "unknown option --bogus");
  CHECK(refusal({"frobnicate"}) == "unknown command 'frobnicate'");
  CHECK(refusal({}).find("missing command") == 0);
  CHECK(parsed({"orders", "--help"}).command == CommandKind::kHelp);
  CHECK(parsed({"--help"}).command == CommandKind::kHelp);
}

TEST_CASE("provision --slot N:PRODUCT:PRICE_CENTS:CAPACITY") {
  CtlOptions p = parsed({"provision", "vm-9", "--slot", "1:cola:150:10", "--slot=2:ice:tea:90:8"});
  CHECK(p.command == CommandKind::kProvision);
  CHECK(p.device == "vm-9");
  REQUIRE(p.slots.size() == 2);
  CHECK(p.slots[0] == ProvisionSlot{1, "cola", 150, 10});
  CHECK(p.slots[1] == ProvisionSlot{2, "ice:tea", 90, 8});  // ':' inside the product

  CHECK(refusal({"provision", "vm-9"}).find("--slot") != std::string::npos);
  CHECK(refusal({"provision", "vm-9", "--slot", "1:cola:150"}).find("must be N:PRODUCT") !=
        std::string::npos);
  CHECK(refusal({"provision", "vm-9", "--slot", "1::150:10"}).find("PRODUCT is empty") !=
        std::string::npos);
  CHECK(refusal({"provision", "vm-9", "--slot", "256:cola:150:10"}).find("--slot N") == 0);
  CHECK(refusal({"provision", "vm-9", "--slot", "1:cola:-1:10"}).find("PRICE_CENTS") !=
        std::string::npos);
  CHECK(refusal({"provision", "vm-9", "--slot", "1:cola:150:0"}).find("CAPACITY") !=
        std::string::npos);
}

TEST_CASE("--help documents every command and the exit codes") {
  const std::string text = usage();
  for (const char* word : {"watch", "devices", "orders", "restock", "provision", "reconcile",
                           "rotate-key", "decommission", "--once", "--for", "--token-file",
                           "VEND_OPERATOR_TOKEN", "--json", "exit codes", "  3  "}) {
    CAPTURE(word);
    CHECK(text.find(word) != std::string::npos);
  }
}

}  // namespace
}  // namespace vend::ctl
