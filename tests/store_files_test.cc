// The state database's files under a RunStore (store/store_files.cc): a write tells a refusal
// of the storage from a lost file; the database or its write-ahead log deleted or replaced is
// found before the next write, which is refused, after what the connection still holds is
// saved. And what the state directory says about a lost database (store/state_dir.h). Real
// SQLite files in a temporary directory.
#include <sqlite3.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "store/run_store.h"
#include "store/state_dir.h"
#include "store_test_support.h"
#include "test_support.h"

using namespace deployd;
using deployd::testing::MustOpen;
using deployd::testing::TempDir;

namespace {

RunRecord OneStepRun() {
  RunRecord run;
  run.plan_name = "files";
  run.plan_file = "files.yaml";
  run.plan_text = "version: 1\nname: files\nsteps:\n  - id: only\n    run: 'true'\n";
  run.created_at_ms = 1'700'000'000'000;
  StepRecord step;
  step.id = "only";
  run.steps.push_back(step);
  return run;
}

Transition Running(const std::string& run_id) {
  Transition t;
  t.run_id = run_id;
  t.at_ms = 1'700'000'000'100;
  t.run_state = RunState::kRunning;
  t.event.kind = "run.state";
  t.event.state = "running";
  return t;
}

}  // namespace

TEST_CASE("store files: a commit returns the event as stored", "[store_files]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  auto id = store->CreateRun(OneStepRun());
  REQUIRE(id.ok());
  Result<EventRecord> stored = store->Commit(Running(*id));
  REQUIRE(stored.ok());
  CHECK(stored->seq == 2);  // after run.created
  CHECK(stored->at_ms == 1'700'000'000'100);
  CHECK(stored->state == "running");
}

TEST_CASE("store files: a deleted write-ahead log is written into the database, and no more is",
          "[store_files]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  std::string id;
  {
    auto store = MustOpen(path);
    auto created = store->CreateRun(OneStepRun());
    REQUIRE(created.ok());
    id = *created;
    REQUIRE(store->CheckFiles().ok());
    REQUIRE(std::filesystem::remove(path + "-wal"));
    Result<EventRecord> refused = store->Commit(Running(id));
    REQUIRE_FALSE(refused.ok());
    CHECK(store->last_failure() == RunStore::Failure::kFilesLost);
    CHECK(refused.status().message() ==
          path +
              "-wal was deleted while deployd was running; nothing more is written to the "
              "state database: everything committed until now was written into " +
              path + "; start deployd again to go on");
    // Every write after it is refused the same way.
    CHECK(store->CheckFiles().message() == refused.status().message());
    CHECK_FALSE(store->CreateRun(OneStepRun()).ok());
  }
  auto reopened = MustOpen(path);
  auto run = reopened->LoadRun(id);
  REQUIRE(run.ok());
  REQUIRE(run->has_value());
  CHECK((*run)->state == RunState::kPending);  // as committed: the refused write is not there
}

TEST_CASE("store files: a database deleted under the store is saved beside it", "[store_files]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  auto store = MustOpen(path);
  auto id = store->CreateRun(OneStepRun());
  REQUIRE(id.ok());
  REQUIRE(std::filesystem::remove(path));
  Status lost = store->CheckFiles();
  REQUIRE_FALSE(lost.ok());
  std::string saved;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind("deployd.db.saved-", 0) == 0) saved = e.path();
  REQUIRE_FALSE(saved.empty());
  CHECK(lost.message() == path +
                              " was deleted while deployd was running; nothing more is written "
                              "to the state database: the runs it held were saved to " +
                              saved + ": put that file back as " + path +
                              " and start deployd again");
  Result<EventRecord> refused = store->Commit(Running(*id));
  REQUIRE_FALSE(refused.ok());
  CHECK(store->last_failure() == RunStore::Failure::kFilesLost);
  auto copy = MustOpen(saved);
  auto run = copy->LoadRun(*id);
  REQUIRE(run.ok());
  CHECK(run->has_value());
}

TEST_CASE("store files: a write the run itself refuses is not a storage fault", "[store_files]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  Result<EventRecord> refused = store->Commit(Running("nobody-1"));
  REQUIRE_FALSE(refused.ok());
  CHECK(store->last_failure() == RunStore::Failure::kRefused);
}

TEST_CASE("state dir: the runs whose logs are there, and their highest number", "[store_files]") {
  TempDir dir;
  CHECK(FindEarlierRuns(dir.path()).ids.empty());
  for (const char* id : {"kimi-k2-12", "demo-3", "demo-1", "not-a-run", "x-"})
    std::filesystem::create_directories(dir.File(std::string("logs/") + id));
  std::ofstream(dir.File("logs/file-99")) << "a file, not a run's directory";
  EarlierRuns earlier = FindEarlierRuns(dir.path());
  CHECK(earlier.ids == std::vector<std::string>{"demo-1", "demo-3", "kimi-k2-12"});
  CHECK(earlier.highest_number == 12);
}

TEST_CASE("state dir: a missing or empty database beside old logs is refused", "[store_files]") {
  TempDir dir;
  const std::string db = dir.File("deployd.db");
  EarlierRuns none;
  CHECK(CheckStateDatabase(db, dir.path(), none, false).ok());
  EarlierRuns two{{"a-1", "a-2"}, 2};
  Status missing = CheckStateDatabase(db, dir.path(), two, false);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message() ==
        db + " is missing, but " + dir.path() +
            "/logs holds the logs of 2 earlier runs (a-1, a-2): the state database was lost, and "
            "a new one would give new runs their ids and write into their logs. Restore " +
            db +
            " from a backup, or start deployd once with --new-state to begin a new state "
            "database (new runs are then numbered after theirs)");
  CHECK(CheckStateDatabase(db, dir.path(), two, true).ok());
  std::ofstream(db).close();
  Status empty = CheckStateDatabase(db, dir.path(), EarlierRuns{{"a-1", "a-2", "a-7"}, 7}, false);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.message().find(db + " is empty (0 bytes), but ") == 0);
  CHECK(empty.message().find("holds the logs of 3 earlier runs (a-1 … a-7)") != std::string::npos);
  // A database with something in it is RunStore::Open's to judge.
  auto store = MustOpen(db);
  store.reset();
  CHECK(CheckStateDatabase(db, dir.path(), two, false).ok());
}

TEST_CASE("state dir: new runs are numbered after the earlier ones", "[store_files]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  store->SetFirstRunNumber(41);
  auto id = store->CreateRun(OneStepRun());
  REQUIRE(id.ok());
  CHECK(*id == "files-42");
  auto next = store->CreateRun(OneStepRun());
  REQUIRE(next.ok());
  CHECK(*next == "files-43");
}
