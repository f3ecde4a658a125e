// Operators as people (cloud-agent/accounts): accounts, roles, passwords
// and API tokens in the log, on SQLite and on a real PostgreSQL shared by
// two repositories (two agents), with their audit rows; and the
// `vend-agent account|token` commands on the agent host.
#include "accounts/accounts.hpp"

#include <doctest/doctest.h>

#include <sstream>

#include "accounts/password.hpp"
#include "repository_backends.hpp"
#include "shell/account_cli.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"

using namespace vend;
using namespace vend::agent;

namespace {

using vend::test::Fixture;
using vend::test::OnPostgres;
using vend::test::OnSqlite;

const Actor kAdmin{"root-admin", "127.0.0.9"};

Accounts::NewAccount account(const std::string& name, Role role,
                             std::vector<std::string> machines = {}) {
  return Accounts::NewAccount{name, role, std::move(machines), ""};
}

}  // namespace

TEST_CASE("scrypt: a password verifies, another does not, a bad encoding never does") {
  auto encoded = password::hash("correct horse battery", password::ScryptParams{1024, 8, 1});
  REQUIRE(encoded.ok());
  CHECK(encoded->rfind("scrypt$1024$8$1$", 0) == 0);
  CHECK(password::verify("correct horse battery", *encoded));
  CHECK_FALSE(password::verify("correct horse batterx", *encoded));
  CHECK_FALSE(password::verify("correct horse battery", "scrypt$1000$8$1$00$00"));  // N not 2^k
  CHECK_FALSE(password::verify("correct horse battery", "bcrypt$x"));
  CHECK_FALSE(password::verify("x", ""));
  // The same password twice: two salts, two encodings.
  auto again = password::hash("correct horse battery", password::ScryptParams{1024, 8, 1});
  REQUIRE(again.ok());
  CHECK(*again != *encoded);
  CHECK(password::weakness("short") != "");
  CHECK(password::weakness("twelve bytes") == "");
  // The shipped parameters: 2^16, r 8, p 1.
  auto shipped = password::hash("correct horse battery");
  REQUIRE(shipped.ok());
  CHECK(shipped->rfind("scrypt$65536$8$1$", 0) == 0);
  CHECK(password::verify("correct horse battery", *shipped));
}

TEST_CASE_TEMPLATE("accounts and tokens live in the log, shared by two agents", B, OnSqlite,
                   OnPostgres) {
  Fixture<B> f;
  ManualClock clock;
  Accounts a(*f.repo, clock, f.log);
  auto second_repo = f.backend.open(f.options, f.log);  // another agent on the same log
  REQUIRE(second_repo.ok());
  Accounts b(**second_repo, clock, f.log);

  auto admin = account("ada", Role::kAdmin);
  admin.password = "correct horse battery";
  REQUIRE(a.add_account(admin, kAdmin).ok());
  REQUIRE(a.add_account(account("rex", Role::kRestocker, {"vm-1", "vm-2"}), kAdmin).ok());
  CHECK(a.add_account(account("ada", Role::kViewer), kAdmin).error().code == "conflict");
  CHECK(a.add_account(account("rex2", Role::kRestocker), kAdmin).error().code == "bad_request");
  CHECK(a.add_account(account("vic", Role::kViewer, {"vm-1"}), kAdmin).error().code ==
        "bad_request");
  CHECK(a.add_account(account("bad name", Role::kViewer), kAdmin).error().code == "bad_request");

  auto issued = a.issue_token("rex", "van 3", 3'600'000, kAdmin);
  REQUIRE(issued.ok());
  CHECK(issued->token.size() == 69);
  CHECK(issued->stored.sha256_hex != issued->token);  // only the hash is kept
  // The other agent resolves it from the shared log.
  auto caller = b.authenticate(issued->token);
  REQUIRE_MESSAGE(caller.ok(), caller.error().to_string());
  CHECK(caller->account == "rex");
  CHECK(caller->role == Role::kRestocker);
  CHECK(caller->covers("vm-2"));
  CHECK_FALSE(caller->covers("vm-3"));
  CHECK(b.authenticate("vend_" + std::string(64, '0')).error().code == "unauthorized");
  CHECK(b.authenticate("operator-token").error().code == "unauthorized");

  // Passwords: one answer for a wrong password and an unknown name.
  CHECK(b.check_password("ada", "correct horse battery").ok());
  CHECK(b.check_password("ada", "wrong horse battery").error().message ==
        b.check_password("nobody", "correct horse battery").error().message);
  CHECK(b.check_password("rex", "").error().code == "unauthorized");  // no password set

  // Expiry, revocation and a disabled account, each seen by the other agent.
  clock.advance(3'600'000);
  CHECK(b.authenticate(issued->token).error().message.find("expired") != std::string::npos);
  auto live = a.issue_token("rex", "", 0, Actor{"rex", "10.0.0.1"});
  REQUIRE(live.ok());
  CHECK(live->stored.expires_ms == clock.wall_ms() + Accounts::kDefaultTokenTtlMs);
  REQUIRE(b.authenticate(live->token).ok());
  REQUIRE(a.revoke_token(live->stored.id, kAdmin).ok());
  CHECK(b.authenticate(live->token).error().message.find("revoked") != std::string::npos);
  CHECK(a.revoke_token(live->stored.id, kAdmin).error().code == "conflict");
  auto third = a.issue_token("ada", "", 0, kAdmin);
  REQUIRE(third.ok());
  REQUIRE(a.disable_account("ada", kAdmin).ok());
  CHECK(b.authenticate(third->token).error().message.find("disabled") != std::string::npos);
  CHECK(a.issue_token("ada", "", 0, kAdmin).error().code == "conflict");

  // Every change has its audit row, in order, filtered by account.
  auto all = b.audit(AuditQuery{});
  REQUIRE(all.ok());
  std::vector<std::string> actions;
  for (const AuditEntry& e : *all) actions.push_back(e.action);
  CHECK(actions == std::vector<std::string>{"account_add", "account_add", "token_add", "token_add",
                                            "token_revoke", "token_add", "account_disable"});
  CHECK(all->front().account == "root-admin");
  CHECK(all->front().peer == "127.0.0.9");
  CHECK(all->front().detail == R"({"account":"ada","role":"admin","machines":""})");
  auto by_rex = b.audit(AuditQuery{"rex", "", 0, 0, 100});
  REQUIRE(by_rex.ok());
  REQUIRE(by_rex->size() == 1);
  CHECK(by_rex->front().peer == "10.0.0.1");
  auto page = b.audit(AuditQuery{"", "", 0, (*all)[1].id, 2});
  REQUIRE(page.ok());
  REQUIRE(page->size() == 2);
  CHECK((*page)[0].id == (*all)[2].id);

  // A restart keeps them all.
  second_repo->reset();
  f.reopen();
  Accounts again(*f.repo, clock, f.log);
  auto listed = again.list_accounts();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[1].machines == std::vector<std::string>{"vm-1", "vm-2"});
  CHECK(again.list_tokens("rex")->size() == 2);
}

TEST_CASE_TEMPLATE("an audit row commits with its change or not at all", B, OnSqlite, OnPostgres) {
  Fixture<B> f;
  ManualClock clock;
  Accounts a(*f.repo, clock, f.log);
  REQUIRE(a.add_account(account("vic", Role::kViewer), kAdmin).ok());
  // A revocation of a token that does not exist conflicts: its audit row
  // is rolled back with it.
  Changeset changes;
  changes.revoke_api_token("tok-none", clock.wall_ms());
  changes.insert_audit(a.entry(kAdmin, "token_revoke"));
  auto ticket = f.repo->submit(std::move(changes));
  REQUIRE(ticket.ok());
  CHECK(f.repo->wait(*ticket).error().code == "conflict");
  auto rows = a.audit(AuditQuery{});
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  CHECK(rows->front().action == "account_add");
}

TEST_CASE("vend-agent account add / token add: the first admin from the agent host") {
  vend::test::TempDir dir;
  std::string db = dir.file("agent.db");
  auto run = [&](std::vector<std::string> args, const std::string& stdin_text = "") {
    std::istringstream in(stdin_text);
    std::ostringstream out, err;
    int rc = run_account_command(args, in, out, err);
    return std::tuple{rc, out.str(), err.str()};
  };
  auto [rc, out, err] =
      run({"account", "add", "root", "--role", "admin", "--password-file", "-", "--db", db},
          "correct horse battery\n");
  CHECK_MESSAGE(rc == 0, err);
  CHECK(out == "account root (admin) added\n");
  auto [rc2, out2, err2] = run({"account", "add", "x", "--role", "king", "--db", db});
  CHECK(rc2 == 2);
  CHECK(err2.find("--role must be viewer, restocker, support or admin") != std::string::npos);
  // A password on the command line is no option of this command.
  auto [rc3, out3, err3] =
      run({"account", "add", "y", "--role", "admin", "--password", "pw", "--db", db});
  CHECK(rc3 == 2);
  auto [rc4, token, err4] = run({"token", "add", "root", "--ttl-days", "7", "--db", db});
  REQUIRE_MESSAGE(rc4 == 0, err4);
  CHECK(token.rfind("vend_", 0) == 0);
  CHECK(err4.find("shown once") != std::string::npos);
  NullLogger log;
  auto repo = Repository::open(db, {}, log);
  REQUIRE(repo.ok());
  SystemClock clock;
  Accounts accounts(**repo, clock, log);
  auto caller = accounts.authenticate(token.substr(0, token.size() - 1));
  REQUIRE(caller.ok());
  CHECK(caller->role == Role::kAdmin);
  CHECK(accounts.check_password("root", "correct horse battery").ok());
  auto audit = accounts.audit(AuditQuery{});
  REQUIRE(audit.ok());
  REQUIRE(audit->size() == 2);
  CHECK(audit->front().account == kHostActor);
}
