#include "shell/account_cli.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "accounts/accounts.hpp"
#include "postgres/postgres_repository.hpp"
#include "shell/shell_options.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"

namespace vend::agent {

namespace {

struct Command {
  std::string noun, verb, name;
  std::map<std::string, std::string> flags;  // this command's own
  std::vector<std::string> rest;             // the agent's options (--db, --config)
};

const std::vector<std::string>& own_flags(const std::string& noun) {
  static const std::vector<std::string> kAccount = {"--role", "--machines", "--password-file"};
  static const std::vector<std::string> kToken = {"--label", "--ttl-days"};
  return noun == "account" ? kAccount : kToken;
}

Result<Command> parse(const std::vector<std::string>& args) {
  Command c;
  c.noun = args.at(0);
  if (args.size() < 2) return make_error("usage", c.noun + ": say what to do (add, list)");
  c.verb = args[1];
  bool wants_name = c.verb == "add";
  if (c.verb != "add" && !(c.noun == "account" && c.verb == "list")) {
    return make_error("usage", c.noun + ": unknown command '" + c.verb + "'");
  }
  size_t i = 2;
  if (wants_name) {
    if (args.size() < 3 || args[2].rfind("--", 0) == 0) {
      return make_error("usage", c.noun + " add: name the account");
    }
    c.name = args[2];
    i = 3;
  }
  const auto& mine = own_flags(c.noun);
  for (; i < args.size(); ++i) {
    bool own = std::find(mine.begin(), mine.end(), args[i]) != mine.end();
    if (!own) {
      c.rest.push_back(args[i]);
      continue;
    }
    if (i + 1 >= args.size()) return make_error("usage", args[i] + " needs a value");
    if (!c.flags.emplace(args[i], args[i + 1]).second) {
      return make_error("usage", args[i] + " given twice");
    }
    ++i;
  }
  return c;
}

Result<std::string> read_password(const std::string& from, std::istream& in) {
  std::string text;
  if (from == "-") {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    std::ifstream file(from, std::ios::binary);
    if (!file) return make_error("usage", "--password-file: cannot read '" + from + "'");
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return make_error("usage", "the password is empty");
  return text;
}

Result<Accounts::NewAccount> new_account(const Command& c, std::istream& in) {
  Accounts::NewAccount a;
  a.name = c.name;
  auto role = c.flags.find("--role");
  if (role == c.flags.end()) return make_error("usage", "account add: --role is required");
  auto parsed = parse_role(role->second);
  if (!parsed) {
    return make_error(
        "usage", "--role must be viewer, restocker, support or admin, not '" + role->second + "'");
  }
  a.role = *parsed;
  if (auto m = c.flags.find("--machines"); m != c.flags.end()) {
    a.machines = split_machines(m->second);
  }
  if (auto p = c.flags.find("--password-file"); p != c.flags.end()) {
    auto pw = read_password(p->second, in);
    if (!pw.ok()) return pw.error();
    a.password = *pw;
  }
  return a;
}

Result<int64_t> ttl_of(const Command& c) {
  auto it = c.flags.find("--ttl-days");
  if (it == c.flags.end()) return int64_t{0};
  int64_t days = 0;
  const std::string& v = it->second;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), days);
  if (ec != std::errc() || end != v.data() + v.size() || days < 1 || days > 366) {
    return make_error("usage", "--ttl-days must be 1..366");
  }
  return days * 24 * 3600 * 1000;
}

int run(const Command& c, Accounts& accounts, std::istream& in, std::ostream& out,
        std::ostream& err) {
  const Actor host{kHostActor, "local"};
  auto fail = [&](const Error& e) {
    err << "vend-agent " << c.noun << " " << c.verb << ": " << e.message << "\n";
    return e.code == "usage" || e.code == "bad_request" ? 2 : 1;
  };
  if (c.noun == "account" && c.verb == "list") {
    auto list = accounts.list_accounts();
    if (!list.ok()) return fail(list.error());
    for (const StoredAccount& a : *list) {
      out << a.name << " " << to_string(a.role) << (a.machines.empty() ? "" : " ")
          << join_machines(a.machines) << (a.disabled_ms != 0 ? " disabled" : "") << "\n";
    }
    return 0;
  }
  if (c.noun == "account") {
    auto a = new_account(c, in);
    if (!a.ok()) return fail(a.error());
    auto added = accounts.add_account(*a, host);
    if (!added.ok()) return fail(added.error());
    out << "account " << added->name << " (" << to_string(added->role) << ") added\n";
    return 0;
  }
  auto ttl = ttl_of(c);
  if (!ttl.ok()) return fail(ttl.error());
  auto label =
      c.flags.count("--label") ? c.flags.at("--label") : std::string("vend-agent token add");
  auto issued = accounts.issue_token(c.name, label, *ttl, host);
  if (!issued.ok()) return fail(issued.error());
  out << issued->token << "\n";
  err << "token " << issued->stored.id << " of " << c.name << ", expires at "
      << issued->stored.expires_ms << " ms (Unix): shown once, keep it in a file of mode 0600\n";
  return 0;
}

}  // namespace

bool is_account_command(const std::vector<std::string>& args) {
  return !args.empty() && (args[0] == "account" || args[0] == "token");
}

int run_account_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                        std::ostream& err) {
  auto command = parse(args);
  if (!command.ok()) {
    err << "vend-agent: " << command.error().message << "\n";
    return 2;
  }
  auto options = parse_options(command->rest);
  if (!options.ok()) {
    err << "vend-agent: " << options.error().message << "\n";
    return 2;
  }
  StderrLogger log(LogLevel::kWarn);
  RepositoryOptions ro;
  auto repo = is_postgres_url(options->db_path)
                  ? open_postgres_repository(options->db_path, ro, log)
                  : Repository::open(options->db_path, ro, log);
  if (!repo.ok()) {
    err << "vend-agent: " << options->db_path << ": " << repo.error().message << "\n";
    return 1;
  }
  SystemClock clock;
  Accounts accounts(**repo, clock, log);
  return run(*command, accounts, in, out, err);
}

}  // namespace vend::agent
