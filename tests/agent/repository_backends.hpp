// The repository contract's backends (tests/agent/repository_*_test.cpp):
// where a fresh, empty log lives, on SQLite and on a real PostgreSQL 15 the
// test binary starts once (tests/support PostgresServer), and a fixture
// holding a repository over one of them.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>

#include "postgres/postgres_repository.hpp"
#include "repository/repository.hpp"
#include "test_support.hpp"
#include "vend/log.hpp"

namespace vend::test {

// The backends the contract runs on: where a fresh, empty log lives.
struct OnSqlite {
  static constexpr const char* kName = "sqlite";
  TempDir dir;
  Result<std::unique_ptr<agent::Repository>> open(const agent::RepositoryOptions& o, Logger& log) {
    return agent::Repository::open(dir.file("agent.db"), o, log);
  }
};

// One PostgreSQL server for the whole test binary; one database per fixture.
inline PostgresServer& postgres() {
  static PostgresServer server;
  return server;
}

struct OnPostgres {
  static constexpr const char* kName = "postgresql";
  OnPostgres() : db("contract_" + std::to_string(next_db++)) { postgres().create_database(db); }
  Result<std::unique_ptr<agent::Repository>> open(const agent::RepositoryOptions& o, Logger& log) {
    return agent::open_postgres_repository(postgres().url(db), o, log);
  }
  static inline std::atomic<int> next_db{0};
  std::string db;
};

template <typename Backend = OnSqlite>
struct Fixture {
  explicit Fixture(agent::RepositoryOptions options = {}) : options(options) { reopen(); }
  void reopen() {
    repo.reset();
    auto r = backend.open(options, log);
    REQUIRE_MESSAGE(r.ok(), Backend::kName, ": ", error_text(r));
    repo = std::move(r).value();
  }
  agent::Ticket submit(agent::Changeset c) {
    auto t = repo->submit(std::move(c));
    REQUIRE(t.ok());
    return *t;
  }
  agent::Ticket fault(const std::string& code) {
    agent::Changeset c;
    c.insert_fault(agent::StoredFault{"vm-1", code, "m", 0, 1});
    return submit(std::move(c));
  }
  size_t fault_count() {
    auto f = repo->faults("vm-1", 100000);
    REQUIRE(f.ok());
    return f->size();
  }

  Backend backend;
  MemoryLogger log;
  agent::RepositoryOptions options;
  std::unique_ptr<agent::Repository> repo;
};

}  // namespace vend::test
