#include "store/run_store.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <thread>

#include "store_test_support.h"
#include "test_support.h"

using namespace deployd;

using deployd::testing::MustOpen;
using deployd::testing::ReadFile;
using deployd::testing::TempDir;

namespace {

// A fresh directory under /tmp, removed with everything in it at the end of the test.
std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// WAL and shared-memory files belong to the database file they sit next to; a test that
// rewrites the database must not leave a previous one's behind.
void RemoveSideFiles(const std::string& path) {
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
}

// A second, plain SQLite connection, to look at the file behind the store's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                            nullptr) == SQLITE_OK);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  // The first column of the first row, or "ERROR: <message>".
  std::string Query(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      return std::string("ERROR: ") + sqlite3_errmsg(db_);
    }
    std::string result;
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      result = text ? text : "";
    } else if (rc != SQLITE_DONE) {
      result = std::string("ERROR: ") + sqlite3_errmsg(db_);
    }
    sqlite3_finalize(stmt);
    return result;
  }

 private:
  sqlite3* db_ = nullptr;
};

RunRecord DemoRun(const std::string& plan_name = "demo") {
  RunRecord run;
  run.plan_name = plan_name;
  run.plan_file = "plans/" + plan_name + ".yaml";
  run.plan_text = "version: 1\nname: " + plan_name + "\nsteps:\n  - id: stop\n    run: 'true'\n";
  run.vars = {{"model_dir", "/shared/kimi"},
              {"port", "8000"},
              {"tricky", "a\"b\\c\n\té ${x}"},
              {"empty", ""}};
  run.state = RunState::kPending;
  run.created_at_ms = 1'700'000'000'123;
  run.reason = "";
  run.evidence = R"({"preflight":[{"check":"command","ok":true}]})";
  const char* ids[] = {"stop", "download", "launch", "cleanup"};
  for (int i = 0; i < 4; ++i) {
    StepRecord step;
    step.index = i;
    step.id = ids[i];
    step.phase = i == 3 ? "on_failure" : "main";
    run.steps.push_back(step);
  }
  return run;
}

void CheckSameStep(const StepRecord& a, const StepRecord& b) {
  INFO("step " << b.index << " " << b.id);
  CHECK(a.index == b.index);
  CHECK(a.id == b.id);
  CHECK(a.phase == b.phase);
  CHECK(a.state == b.state);
  CHECK(a.attempts == b.attempts);
  CHECK(a.started_at_ms == b.started_at_ms);
  CHECK(a.finished_at_ms == b.finished_at_ms);
  CHECK(a.exit_status == b.exit_status);
  CHECK(a.pid == b.pid);
  CHECK(a.reason == b.reason);
  CHECK(a.evidence == b.evidence);
  CHECK(a.action == b.action);
}

void CheckSameRun(const RunRecord& a, const RunRecord& b) {
  CHECK(a.id == b.id);
  CHECK(a.plan_name == b.plan_name);
  CHECK(a.plan_file == b.plan_file);
  CHECK(a.plan_text == b.plan_text);
  CHECK(a.vars == b.vars);
  CHECK(a.state == b.state);
  CHECK(a.created_at_ms == b.created_at_ms);
  CHECK(a.finished_at_ms == b.finished_at_ms);
  CHECK(a.reason == b.reason);
  CHECK(a.evidence == b.evidence);
  REQUIRE(a.steps.size() == b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) CheckSameStep(a.steps[i], b.steps[i]);
}

RunRecord MustLoad(RunStore& store, const std::string& id, bool with_steps = true) {
  auto run = store.LoadRun(id, with_steps);
  INFO((run.ok() ? std::string() : run.status().message()));
  REQUIRE(run.ok());
  REQUIRE(run->has_value());
  return **run;
}

std::vector<EventRecord> MustEvents(RunStore& store, const std::string& id) {
  auto events = store.Events(id);
  INFO((events.ok() ? std::string() : events.status().message()));
  REQUIRE(events.ok());
  return *events;
}

std::string MustCreate(RunStore& store, RunRecord run) {
  auto id = store.CreateRun(std::move(run));
  INFO((id.ok() ? std::string() : id.status().message()));
  REQUIRE(id.ok());
  return *id;
}

// A step moving to `state`, announced by a "step.state" event.
Transition StepTransition(const std::string& run_id, StepRecord step, StepState state,
                          std::int64_t at_ms) {
  step.state = state;
  Transition t;
  t.run_id = run_id;
  t.at_ms = at_ms;
  t.event.step_id = step.id;
  t.event.kind = "step.state";
  t.event.state = std::string(ToString(state));
  t.step = std::move(step);
  return t;
}

EventRecord MustCommit(RunStore& store, const Transition& t) {
  Result<EventRecord> stored = store.Commit(t);
  INFO((stored.ok() ? std::string() : stored.status().message()));
  REQUIRE(stored.ok());
  return stored.value();
}

}  // namespace

TEST_CASE("RunStore round-trips every field of a run", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  RunRecord run = DemoRun();
  run.steps[0].state = StepState::kSucceeded;
  run.steps[0].attempts = 2;
  run.steps[0].started_at_ms = 1'700'000'000'200;
  run.steps[0].finished_at_ms = 1'700'000'000'900;
  run.steps[0].exit_status = 0;  // set, and zero: must not read back as "none"
  run.steps[0].reason = "exit status 0";
  run.steps[0].evidence = R"({"probe":"systemctl is-active glm5","output":"inactive\n"})";
  run.steps[1].state = StepState::kRunning;
  run.steps[1].pid = 4'000'000'123;  // wider than 32 bits
  run.steps[1].action = R"({"kind":"background","status_file":"/s/x.1.status","log_offset":7})";
  run.steps[2].exit_status = 137;
  {
    auto store = MustOpen(path);
    std::string id = MustCreate(*store, run);
    CHECK(id == "demo-1");
    run.id = id;
    CheckSameRun(MustLoad(*store, id), run);
    CHECK(MustLoad(*store, id, /*with_steps=*/false).steps.empty());

    auto missing = store->LoadRun("demo-2");
    REQUIRE(missing.ok());
    CHECK_FALSE(missing->has_value());
    auto no_events = store->Events("demo-2");
    REQUIRE(no_events.ok());
    CHECK(no_events->empty());

    auto events = MustEvents(*store, id);
    REQUIRE(events.size() == 1);
    CHECK(events[0].seq == 1);
    CHECK(events[0].at_ms == run.created_at_ms);
    CHECK(events[0].step_id.empty());
    CHECK(events[0].kind == "run.created");
    CHECK(events[0].state == "pending");
    CHECK(events[0].detail == "plan demo from plans/demo.yaml");
  }
  auto store = MustOpen(path);
  CheckSameRun(MustLoad(*store, "demo-1"), run);
}

TEST_CASE("Commit updates the run and the step together and appends the event", "[run_store]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  RunRecord run = DemoRun();
  run.id = MustCreate(*store, run);

  StepRecord step = run.steps[1];
  step.attempts = 1;
  step.started_at_ms = 5000;
  step.pid = 4242;
  Transition t = StepTransition(run.id, step, StepState::kRunning, 5000);
  t.run_state = RunState::kRunning;
  t.event.detail = "fired: hf download nvidia/Kimi-K2.5-NVFP4";
  MustCommit(*store, t);

  RunRecord loaded = MustLoad(*store, run.id);
  CHECK(loaded.state == RunState::kRunning);
  CHECK(loaded.reason.empty());  // not given, so not touched
  CheckSameStep(loaded.steps[1], *t.step);
  CheckSameStep(loaded.steps[0], run.steps[0]);  // other steps untouched
  auto events = MustEvents(*store, run.id);
  REQUIRE(events.size() == 2);
  CHECK(events[1].seq == 2);
  CHECK(events[1].at_ms == 5000);
  CHECK(events[1].step_id == "download");
  CHECK(events[1].kind == "step.state");
  CHECK(events[1].state == "running");
  CHECK(events[1].detail == "fired: hf download nvidia/Kimi-K2.5-NVFP4");

  // A run-only transition: the step rows stay as they are; optional fields go back to null.
  step = *t.step;
  step.pid.reset();
  step.exit_status = 1;
  step.finished_at_ms = 9000;
  step.reason = "exit status 1";
  Transition fail = StepTransition(run.id, step, StepState::kFailed, 9000);
  MustCommit(*store, fail);
  Transition end;
  end.run_id = run.id;
  end.at_ms = 9001;
  end.run_state = RunState::kFailed;
  end.run_reason = "step download failed: exit status 1";
  end.run_evidence = R"({"step":"download"})";
  end.run_finished_at_ms = 9001;
  end.event.kind = "run.state";
  end.event.state = "failed";
  MustCommit(*store, end);

  loaded = MustLoad(*store, run.id);
  CHECK(loaded.state == RunState::kFailed);
  CHECK(loaded.reason == "step download failed: exit status 1");
  CHECK(loaded.evidence == R"({"step":"download"})");
  CHECK(loaded.finished_at_ms == 9001);
  CHECK(loaded.created_at_ms == run.created_at_ms);
  CheckSameStep(loaded.steps[1], *fail.step);
  CHECK_FALSE(loaded.steps[1].pid.has_value());
  events = MustEvents(*store, run.id);
  REQUIRE(events.size() == 4);
  CHECK(events[3].kind == "run.state");
  CHECK(events[3].step_id.empty());

  // The event's own time is used when the transition gives none.
  Transition note;
  note.run_id = run.id;
  note.event.kind = "run.note";
  note.event.at_ms = 12345;
  MustCommit(*store, note);
  CHECK(MustEvents(*store, run.id).back().at_ms == 12345);
}

TEST_CASE("event seq counts 1..N per run without gaps, across reopen", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  std::string a, b;
  {
    auto store = MustOpen(path);
    a = MustCreate(*store, DemoRun("alpha"));
    b = MustCreate(*store, DemoRun("beta"));
    for (int i = 0; i < 60; ++i) {
      StepRecord step = DemoRun().steps[i % 3];
      step.attempts = i;
      MustCommit(*store, StepTransition(i % 2 ? a : b, step, StepState::kRunning, i));
    }
  }
  for (int round = 0; round < 2; ++round) {
    auto store = MustOpen(path);
    StepRecord step = DemoRun().steps[0];
    MustCommit(*store, StepTransition(a, step, StepState::kVerifying, 100 + round));
  }
  auto store = MustOpen(path);
  auto events_a = MustEvents(*store, a);
  auto events_b = MustEvents(*store, b);
  REQUIRE(events_a.size() == 1 + 30 + 2);
  REQUIRE(events_b.size() == 1 + 30);
  for (size_t i = 0; i < events_a.size(); ++i) CHECK(events_a[i].seq == std::int64_t(i) + 1);
  for (size_t i = 0; i < events_b.size(); ++i) CHECK(events_b[i].seq == std::int64_t(i) + 1);
  CHECK(events_a.back().state == "verifying");
}

TEST_CASE("a Commit that cannot apply changes nothing", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  auto store = MustOpen(path);
  RunRecord run = DemoRun();
  run.id = MustCreate(*store, run);

  auto check_unchanged = [&] {
    CheckSameRun(MustLoad(*store, run.id), run);
    CHECK(MustEvents(*store, run.id).size() == 1);
  };

  SECTION("unknown step index") {
    StepRecord step = run.steps[0];
    step.index = 9;
    Transition t = StepTransition(run.id, step, StepState::kRunning, 1);
    t.run_state = RunState::kRunning;  // would apply first, then be rolled back
    t.run_reason = "should not stick";
    Status s = store->Commit(t).status();
    REQUIRE_FALSE(s.ok());
    CHECK(s.message() ==
          path + ": cannot commit step.state to run demo-1: it has no step stop " + "at index 9");
    check_unchanged();
  }
  SECTION("step id that does not match its index") {
    StepRecord step = run.steps[0];
    step.id = "launch";
    Status s = store->Commit(StepTransition(run.id, step, StepState::kRunning, 1)).status();
    REQUIRE_FALSE(s.ok());
    CHECK(s.message() == path +
                             ": cannot commit step.state to run demo-1: it has no step launch at "
                             "index 0");
    check_unchanged();
  }
  SECTION("unknown run") {
    Transition t = StepTransition("demo-7", run.steps[0], StepState::kRunning, 1);
    Status s = store->Commit(t).status();
    REQUIRE_FALSE(s.ok());
    CHECK(s.message() == path + ": cannot commit step.state to run demo-7: no such run");
    CHECK(MustEvents(*store, "demo-7").empty());
    check_unchanged();
  }
  SECTION("event without a kind") {
    Transition t = StepTransition(run.id, run.steps[0], StepState::kRunning, 1);
    t.event.kind.clear();
    Status s = store->Commit(t).status();
    REQUIRE_FALSE(s.ok());
    CHECK(s.message() == path + ": cannot commit to run demo-1: the event has no kind");
    check_unchanged();
  }
  // The store stays usable after a failed Commit: no transaction was left open.
  MustCommit(*store, StepTransition(run.id, run.steps[0], StepState::kRunning, 2));
  CHECK(MustEvents(*store, run.id).size() == 2);
}

TEST_CASE("run ids count up over the database's life", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  {
    auto store = MustOpen(path);
    CHECK(MustCreate(*store, DemoRun()) == "demo-1");
    CHECK(MustCreate(*store, DemoRun()) == "demo-2");
  }
  auto store = MustOpen(path);
  CHECK(MustCreate(*store, DemoRun("other")) == "other-3");
  CHECK(MustCreate(*store, DemoRun()) == "demo-4");
  RunRecord unnamed = DemoRun();
  unnamed.plan_name.clear();
  auto refused = store->CreateRun(unnamed);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == path + ": cannot create a run: no plan name");

  RunRecord bad_bytes = DemoRun();
  bad_bytes.vars["port"] = "80\xff";
  auto refused_vars = store->CreateRun(bad_bytes);
  REQUIRE_FALSE(refused_vars.ok());
  CHECK(refused_vars.status().message() ==
        path + ": cannot create a run of demo: a variable is not valid UTF-8");

  auto all = store->ListRuns(/*with_steps=*/false);
  REQUIRE(all.ok());
  std::vector<std::string> ids;
  for (const RunRecord& r : *all) ids.push_back(r.id);
  CHECK(ids == std::vector<std::string>{"demo-4", "other-3", "demo-2", "demo-1"});
  CHECK(all->front().steps.empty());
  auto two = store->ListRuns(/*with_steps=*/true, 2);
  REQUIRE(two.ok());
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].id == "demo-4");
  CHECK((*two)[1].id == "other-3");
  CHECK((*two)[1].steps.size() == 4);
}

TEST_CASE("UnfinishedRuns returns the runs not in a terminal state, oldest first", "[run_store]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  const RunState states[] = {RunState::kSucceeded, RunState::kRunning,   RunState::kFailed,
                             RunState::kPaused,    RunState::kCancelled, RunState::kWaiting,
                             RunState::kPending};
  for (RunState state : states) {
    std::string id = MustCreate(*store, DemoRun());
    Transition t;
    t.run_id = id;
    t.run_state = state;
    t.event.kind = "run.state";
    t.event.state = std::string(ToString(state));
    MustCommit(*store, t);
  }
  auto unfinished = store->UnfinishedRuns();
  REQUIRE(unfinished.ok());
  std::vector<std::string> ids;
  for (const RunRecord& r : *unfinished) {
    ids.push_back(r.id);
    CHECK(r.steps.size() == 4);
    CHECK_FALSE(IsTerminal(r.state));
  }
  CHECK(ids == std::vector<std::string>{"demo-2", "demo-4", "demo-6", "demo-7"});
}

TEST_CASE("Open sets WAL, synchronous=FULL and foreign keys", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  auto store = MustOpen(path);
  MustCreate(*store, DemoRun());

  RawDb raw(path);
  CHECK(raw.Query("PRAGMA journal_mode") == "wal");  // stored in the file itself
  CHECK(raw.Query("PRAGMA user_version") == std::to_string(RunStore::kSchemaVersion));
  // synchronous belongs to each connection: this one shows Debian's WAL default, which is
  // also FULL (build-facts §8); the store's own connection is read through ReadPragma.
  CHECK(raw.Query("PRAGMA synchronous") == "2");
  CHECK(*store->ReadPragma("synchronous") == "2");
  CHECK(*store->ReadPragma("foreign_keys") == "1");
  CHECK(*store->ReadPragma("journal_mode") == "wal");
  CHECK_FALSE(store->ReadPragma("synchronous = OFF").ok());
  CHECK(raw.Query("SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master WHERE "
                  "type = 'table' ORDER BY name)") ==
        "events,plan_totals,run_numbers,runs,step_duration_bounds,step_durations,steps");
}

TEST_CASE("the event log refuses updates and deletes", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  auto store = MustOpen(path);
  MustCreate(*store, DemoRun());
  RawDb raw(path);
  CHECK(raw.Query("UPDATE events SET detail = 'rewritten'") == "ERROR: events are append-only");
  CHECK(raw.Query("DELETE FROM events") == "ERROR: events are append-only");
  CHECK(MustEvents(*store, "demo-1").size() == 1);
}

TEST_CASE("values the store never writes are reported as damage", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  auto store = MustOpen(path);
  MustCreate(*store, DemoRun());
  RawDb raw(path);

  SECTION("unknown run state") {
    REQUIRE(raw.Query("UPDATE runs SET state = 'done'").empty());
    auto run = store->LoadRun("demo-1");
    REQUIRE_FALSE(run.ok());
    CHECK(run.status().message() ==
          path + ": state database is damaged (run demo-1 has unknown state 'done')");
    CHECK_FALSE(store->ListRuns(false).ok());
  }
  SECTION("unknown step state") {
    REQUIRE(raw.Query("UPDATE steps SET state = 'exploded' WHERE idx = 2").empty());
    auto run = store->LoadRun("demo-1");
    REQUIRE_FALSE(run.ok());
    CHECK(run.status().message() ==
          path +
              ": state database is damaged (step launch of run demo-1 has unknown state "
              "'exploded')");
    CHECK(store->LoadRun("demo-1", /*with_steps=*/false).ok());
    CHECK_FALSE(store->UnfinishedRuns().ok());
  }
  SECTION("vars that are not a JSON object of strings") {
    for (const char* vars : {"[1,2]", "{\"port\": 8000}", "{\"port\": \"8000\"", ""}) {
      INFO(vars);
      REQUIRE(raw.Query(std::string("UPDATE runs SET vars = '") + vars + "'").empty());
      auto run = store->LoadRun("demo-1");
      REQUIRE_FALSE(run.ok());
      CHECK(run.status().message() ==
            path +
                ": state database is damaged (run demo-1 has vars that are not a JSON object "
                "of strings)");
    }
  }
}

TEST_CASE("a newer schema is refused and left untouched", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  { MustOpen(path); }
  {
    RawDb raw(path);
    REQUIRE(
        raw.Query("PRAGMA user_version = " + std::to_string(RunStore::kSchemaVersion + 1)).empty());
  }
  const std::string before = ReadBytes(path);
  auto store = RunStore::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().message() ==
        path + ": schema version " + std::to_string(RunStore::kSchemaVersion + 1) +
            " is newer than this deployd understands (" + std::to_string(RunStore::kSchemaVersion) +
            "); run a newer "
            "deployd or move the file away");
  CHECK(ReadBytes(path) == before);
}

TEST_CASE("a file that is not a database is refused and left untouched", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  std::string garbage;
  for (int i = 0; i < 300; ++i) garbage += "this is not a database, only text " + std::to_string(i);
  WriteBytes(path, garbage);
  auto store = RunStore::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().message() ==
        path +
            ": state database is damaged (file is not a database); it was left untouched: "
            "move it away to start afresh");
  CHECK(ReadBytes(path) == garbage);
  CHECK_FALSE(Exists(path + "-wal"));
  CHECK_FALSE(Exists(path + "-shm"));
}

TEST_CASE("another program's database is refused and left untouched", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  {
    RawDb raw(path);
    REQUIRE(raw.Query("CREATE TABLE mine (x)").empty());
  }
  const std::string before = ReadBytes(path);
  auto store = RunStore::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().message() ==
        path +
            ": is not a deployd state database (it has tables but no schema version); it was "
            "left untouched");
  CHECK(ReadBytes(path) == before);
}

TEST_CASE("paths that cannot hold a database are refused clearly", "[run_store]") {
  TempDir dir;
  auto as_dir = RunStore::Open(dir.path());
  REQUIRE_FALSE(as_dir.ok());
  CHECK(as_dir.status().message() == dir.path() + ": is a directory, not a state database file");

  const std::string no_parent = dir.File("missing/deployd.db");
  auto missing = RunStore::Open(no_parent);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        no_parent +
            ": cannot open state database: unable to open database file (No such file "
            "or directory)");

  if (::geteuid() == 0) {
    WARN("running as root: file permissions cannot refuse access, unreadable-file case skipped");
  } else {
    const std::string locked = dir.File("locked.db");
    { MustOpen(locked); }
    REQUIRE(::chmod(locked.c_str(), 0) == 0);
    auto refused = RunStore::Open(locked);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message() == locked + ": cannot open state database: Permission denied");
  }
}

TEST_CASE("a zero-length file is opened as a new database", "[run_store]") {
  // SQLite creates the file empty and writes the schema later, so an empty file is what a crash
  // during the first open leaves; SQLite itself also reads an empty file as an empty database.
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  WriteBytes(path, "");
  auto store = MustOpen(path);
  CHECK(MustCreate(*store, DemoRun()) == "demo-1");
}

TEST_CASE("a write-ahead log without its database is left alone", "[run_store]") {
  // SQLite would delete it, and with it every transaction not yet checkpointed.
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  const std::string wal = path + "-wal";
  const std::string log(8192, 'w');
  WriteBytes(wal, log);
  for (bool empty_file : {false, true}) {
    INFO((empty_file ? "empty database file" : "no database file"));
    if (empty_file) WriteBytes(path, "");
    auto store = RunStore::Open(path);
    REQUIRE_FALSE(store.ok());
    CHECK(store.status().message() ==
          path + ": is missing or empty, but its write-ahead log " + wal +
              " holds 8192 bytes; it was left untouched: restore the database file or move the "
              "log away");
    CHECK(ReadBytes(wal) == log);
    CHECK(Exists(path) == empty_file);
  }
}

TEST_CASE("a database cut at any length is refused or read, and never changed", "[run_store]") {
  TempDir dir;
  const std::string whole_path = dir.File("whole.db");
  {
    auto store = MustOpen(whole_path);
    for (int r = 0; r < 3; ++r) {
      RunRecord run = DemoRun(r == 1 ? "other" : "demo");
      run.plan_text += std::string(3000, 'x');  // spill into overflow pages too
      std::string id = MustCreate(*store, run);
      for (int i = 0; i < 20; ++i) {
        MustCommit(*store, StepTransition(id, run.steps[i % 4], StepState::kRunning, i));
      }
    }
  }
  REQUIRE_FALSE(Exists(whole_path + "-wal"));  // closed cleanly: the WAL was folded in
  const std::string whole = ReadBytes(whole_path);
  const size_t page = 4096;
  REQUIRE(whole.size() % page == 0);

  // Every length through the header and the first page's start, each page boundary and its
  // neighbours, and a stride through the rest.
  std::set<size_t> cuts;
  for (size_t n = 0; n <= 256; ++n) cuts.insert(n);
  for (size_t b = page; b <= whole.size(); b += page) {
    cuts.insert(b - 1);
    cuts.insert(b);
    cuts.insert(std::min(b + 1, whole.size()));
  }
  for (size_t n = 0; n <= whole.size(); n += std::max<size_t>(1, whole.size() / 250))
    cuts.insert(n);
  cuts.insert(whole.size());

  const std::string path = dir.File("cut.db");
  int opened = 0;
  for (size_t n : cuts) {
    INFO("cut at " << n << " of " << whole.size() << " bytes");
    RemoveSideFiles(path);
    const std::string cut = whole.substr(0, n);
    WriteBytes(path, cut);
    {
      auto store = RunStore::Open(path);
      if (store.ok()) {
        ++opened;
        // Whatever was read must not crash the readers either.
        (void)(*store)->ListRuns(true);
        (void)(*store)->UnfinishedRuns();
        (void)(*store)->Events("demo-1");
      } else {
        const std::string& m = store.status().message();
        CHECK(m.rfind(path + ": state database is damaged (", 0) == 0);
        CHECK(m.find("); it was left untouched: move it away to start afresh") != m.npos);
        CHECK_FALSE(Exists(path + "-wal"));
        CHECK_FALSE(Exists(path + "-shm"));
      }
    }
    if (n == 0) continue;  // the documented exception: an empty file is a new database
    REQUIRE(ReadBytes(path) == cut);
  }
  // The only lengths that open are nothing at all and the whole file.
  CHECK(opened == 2);
}

namespace {

const char* const kTickSteps[] = {"stop", "download", "launch", "cleanup"};

// The transition the crash test's writer commits as its `i`th: the step it names carries `i`
// in every field that can, so that the parent can tell which commit each row came from.
Transition Tick(const std::string& run_id, std::int64_t i) {
  StepRecord step;
  step.index = static_cast<int>(i % 4);
  step.id = kTickSteps[step.index];
  step.phase = step.index == 3 ? "on_failure" : "main";
  step.attempts = static_cast<int>(i);
  step.started_at_ms = i;
  step.pid = 100000 + i;
  if (i % 3 == 0) step.exit_status = static_cast<int>(i % 256);
  Transition t =
      StepTransition(run_id, step, i % 2 ? StepState::kVerifying : StepState::kRunning, 1000 + i);
  t.run_state = RunState::kRunning;
  t.run_reason = "tick " + std::to_string(i);
  t.event.detail = std::to_string(i);
  return t;
}

}  // namespace

TEST_CASE("transitions committed before a SIGKILL are all there", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  {
    auto store = MustOpen(path);
    RunRecord run = DemoRun();
    REQUIRE(MustCreate(*store, run) == "demo-1");
  }
  std::random_device seed_source;
  const unsigned seed = seed_source();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  std::int64_t total_acked = 0;

  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    std::int64_t start;
    {
      // No connection may be open across fork(): SQLite's locks belong to the process.
      auto store = MustOpen(path);
      start = static_cast<std::int64_t>(MustEvents(*store, "demo-1").size()) - 1;
    }
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The writer: commit until killed, telling the parent after each commit returns.
      ::close(fds[0]);
      auto store = RunStore::Open(path);
      if (!store.ok()) ::_exit(3);
      for (std::int64_t i = start;; ++i) {
        if (!(*store)->Commit(Tick("demo-1", i)).ok()) ::_exit(4);
        if (::write(fds[1], &i, sizeof i) != sizeof i) ::_exit(5);
      }
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(30, 250)(random)));
    REQUIRE(::kill(child, SIGKILL) == 0);
    int wstatus = 0;
    REQUIRE(::waitpid(child, &wstatus, 0) == child);
    REQUIRE(WIFSIGNALED(wstatus));
    CHECK(WTERMSIG(wstatus) == SIGKILL);

    std::int64_t acked = start - 1;  // the last commit the writer saw succeed
    std::int64_t value;
    while (::read(fds[0], &value, sizeof value) == sizeof value) acked = value;
    ::close(fds[0]);
    total_acked += acked - (start - 1);

    auto store = MustOpen(path);
    auto events = MustEvents(*store, "demo-1");
    REQUIRE(events.size() >= 1);
    const std::int64_t last = static_cast<std::int64_t>(events.size()) - 2;  // last tick kept
    CHECK(last >= acked);  // acknowledged means durable
    CHECK(events[0].kind == "run.created");
    for (size_t k = 0; k < events.size(); ++k) {
      REQUIRE(events[k].seq == static_cast<std::int64_t>(k) + 1);
      if (k == 0) continue;
      const Transition want = Tick("demo-1", static_cast<std::int64_t>(k) - 1);
      REQUIRE(events[k].detail == want.event.detail);
      CHECK(events[k].step_id == want.event.step_id);
      CHECK(events[k].state == want.event.state);
      CHECK(events[k].at_ms == want.at_ms);
    }
    // Each step row is the one its last event announced.
    RunRecord run = MustLoad(*store, "demo-1");
    for (const StepRecord& step : run.steps) {
      std::int64_t latest = -1;
      for (std::int64_t i = 0; i <= last; ++i) {
        if (i % 4 == step.index) latest = i;
      }
      if (latest < 0) {
        CHECK(step.state == StepState::kPending);
        CHECK(step.attempts == 0);
        continue;
      }
      CheckSameStep(step, *Tick("demo-1", latest).step);
    }
    if (last >= 0) CHECK(run.reason == "tick " + std::to_string(last));
  }
  CHECK(total_acked > 0);
}

TEST_CASE("Commit latency", "[.bench][run_store]") {
  // Where to measure: /tmp by default; set DEPLOYD_BENCH_DIR to measure another file system.
  const char* where = std::getenv("DEPLOYD_BENCH_DIR");
  std::string dir_path;
  std::unique_ptr<TempDir> tmp;
  if (where) {
    dir_path = where;
  } else {
    tmp = std::make_unique<TempDir>();
    dir_path = tmp->path();
  }
  const std::string path = dir_path + "/bench.db";
  std::remove(path.c_str());
  RemoveSideFiles(path);
  auto store = MustOpen(path);
  RunRecord run = DemoRun();
  run.id = MustCreate(*store, run);

  std::vector<double> micros;
  for (int i = 0; i < 520; ++i) {
    StepRecord step = run.steps[i % 4];
    step.attempts = i;
    step.reason = "attempt " + std::to_string(i);
    Transition t = StepTransition(run.id, step, StepState::kRunning, i);
    t.event.detail = "fired";
    auto begin = std::chrono::steady_clock::now();
    bool ok = store->Commit(t).ok();
    auto end = std::chrono::steady_clock::now();
    REQUIRE(ok);
    if (i >= 20) micros.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
  }
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) { return micros[static_cast<size_t>(q * (micros.size() - 1))]; };
  std::printf(
      "Commit latency over %zu commits in %s: median %.0f us, p90 %.0f us, p99 %.0f us, "
      "max %.0f us\n",
      micros.size(), dir_path.c_str(), at(0.5), at(0.9), at(0.99), micros.back());
  store.reset();
  if (where) {
    std::remove(path.c_str());
    RemoveSideFiles(path);
  }
}

namespace {

// The schema exactly as version 1 of deployd created it. Databases in the field were built by
// it; this copy is frozen here (not taken from the store) so that the test also catches an
// edit of the released script.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
  id TEXT NOT NULL PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  plan_name TEXT NOT NULL,
  plan_file TEXT NOT NULL,
  plan_text TEXT NOT NULL,
  vars TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL,
  reason TEXT NOT NULL,
  evidence TEXT NOT NULL
) STRICT;
CREATE TABLE steps (
  run_id TEXT NOT NULL REFERENCES runs (id),
  idx INTEGER NOT NULL,
  id TEXT NOT NULL,
  phase TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  started_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL,
  exit_status INTEGER,
  pid INTEGER,
  reason TEXT NOT NULL,
  evidence TEXT NOT NULL,
  PRIMARY KEY (run_id, idx)
) STRICT, WITHOUT ROWID;
CREATE TABLE events (
  run_id TEXT NOT NULL REFERENCES runs (id),
  seq INTEGER NOT NULL,
  at_ms INTEGER NOT NULL,
  step_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  detail TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
)sql";

// A version 1 database holding one failed run with two steps and three events, written with
// plain SQL as deployd 1 wrote it (WAL mode, user_version 1).
void WriteV1Database(const std::string& path, const std::string& extra_sql = "") {
  RawDb raw(path);
  REQUIRE(raw.Query("PRAGMA journal_mode = WAL") == "wal");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  std::string script = std::string("BEGIN;") + kSchemaV1 + R"sql(
INSERT INTO runs VALUES ('old-3', 3, 'old', 'plans/old.yaml', 'version: 1', '{"port":"8000"}',
  'failed', 1700000000000, 1700000009000, 'step launch failed: exit status 2',
  '{"exit_status":2}');
INSERT INTO steps VALUES ('old-3', 0, 'fetch', 'main', 'succeeded', 1, 1700000000100,
  1700000000500, 0, NULL, '', '');
INSERT INTO steps VALUES ('old-3', 1, 'launch', 'main', 'failed', 2, 1700000000600,
  1700000009000, 2, 31337, 'exit status 2', '{"output_tail":["boom"]}');
INSERT INTO events VALUES ('old-3', 1, 1700000000000, '', 'run.created', 'pending', 'plan old');
INSERT INTO events VALUES ('old-3', 2, 1700000000100, 'fetch', 'step.state', 'running', 'attempt 1');
INSERT INTO events VALUES ('old-3', 3, 1700000009000, '', 'run.state', 'failed', 'step launch failed');
PRAGMA user_version = 1;
)sql" + extra_sql + "COMMIT;";
  char* error = nullptr;
  int rc = sqlite3_exec(db, script.c_str(), nullptr, nullptr, &error);
  INFO((error ? error : ""));
  sqlite3_free(error);
  sqlite3_close_v2(db);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("a version 1 database is migrated to the current version and keeps its data",
          "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  WriteV1Database(path);

  auto store = MustOpen(path);
  RunRecord run = MustLoad(*store, "old-3");
  CHECK(run.plan_name == "old");
  CHECK(run.vars == std::map<std::string, std::string>{{"port", "8000"}});
  CHECK(run.state == RunState::kFailed);
  CHECK(run.finished_at_ms == 1'700'000'009'000);
  CHECK(run.reason == "step launch failed: exit status 2");
  CHECK(run.evidence == R"({"exit_status":2})");
  REQUIRE(run.steps.size() == 2);
  CHECK(run.steps[0].id == "fetch");
  CHECK(run.steps[0].state == StepState::kSucceeded);
  CHECK(run.steps[0].exit_status == 0);
  CHECK_FALSE(run.steps[0].pid.has_value());
  CHECK(run.steps[1].id == "launch");
  CHECK(run.steps[1].attempts == 2);
  CHECK(run.steps[1].exit_status == 2);
  CHECK(run.steps[1].pid == 31337);
  CHECK(run.steps[1].reason == "exit status 2");
  CHECK(run.steps[1].evidence == R"({"output_tail":["boom"]})");
  for (const StepRecord& step : run.steps) CHECK(step.action.empty());
  auto events = MustEvents(*store, "old-3");
  REQUIRE(events.size() == 3);
  CHECK(events[1].detail == "attempt 1");
  // The metrics' counts (version 6) start from the runs that are there.
  Result<StoreMetrics> counted = store->ReadMetrics();
  REQUIRE(counted.ok());
  REQUIRE(counted->totals.size() == 2);
  CHECK(counted->totals[0].what == "failure.exit");
  CHECK(counted->totals[1].what == "run.failed");
  CHECK(counted->totals[1].last_at_ms == 1'700'000'009'000);
  REQUIRE(counted->durations.size() == 2);
  CHECK(counted->durations[0].step == "fetch");
  CHECK(counted->durations[0].sum_ms == 400);
  CHECK(counted->durations[1].step == "launch");
  CHECK(counted->durations[1].state == "failed");

  // The new column takes writes; old rows and new runs live side by side.
  StepRecord launch = run.steps[1];
  launch.action = R"({"kind":"background"})";
  MustCommit(*store, StepTransition("old-3", launch, StepState::kFailed, 1'700'000'010'000));
  CHECK(MustLoad(*store, "old-3").steps[1].action == launch.action);
  CHECK(MustLoad(*store, "old-3").steps[1].due_at_ms == 0);  // version 4's column
  launch.due_at_ms = 1'700'000'020'000;
  MustCommit(*store, StepTransition("old-3", launch, StepState::kPending, 1'700'000'011'000));
  CHECK(MustLoad(*store, "old-3").steps[1].due_at_ms == 1'700'000'020'000);
  CHECK(MustLoad(*store, "old-3").applied_by.empty());   // version 7's column
  CHECK(MustCreate(*store, DemoRun("old")) == "old-4");  // numbered after the migrated runs
  CHECK(MustEvents(*store, "old-3").size() == 5);

  RawDb raw(path);
  CHECK(raw.Query("PRAGMA user_version") == std::to_string(RunStore::kSchemaVersion));
  CHECK(raw.Query("PRAGMA journal_mode") == "wal");
  // The history is still protected: the triggers came through the migration.
  CHECK(raw.Query("DELETE FROM events") == "ERROR: events are append-only");
  CHECK(raw.Query("PRAGMA quick_check") == "ok");
  store.reset();
  // Opened again, it is current: nothing more to migrate.
  auto again = MustOpen(path);
  CHECK(MustLoad(*again, "old-3").steps[1].action == launch.action);
}

TEST_CASE("a migration that fails leaves the database at its version", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  // A column the migration means to add is already there: ALTER TABLE fails halfway.
  WriteV1Database(path, "ALTER TABLE steps ADD COLUMN action TEXT;");
  auto store = RunStore::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().message() == path + ": cannot migrate the schema from version 1 to " +
                                        std::to_string(RunStore::kSchemaVersion) +
                                        ": duplicate column name: action");
  RawDb raw(path);
  CHECK(raw.Query("PRAGMA user_version") == "1");
  CHECK(raw.Query("SELECT count(*) FROM events") == "3");
}

TEST_CASE("finished runs older than the cutoff are forgotten, and only they", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  auto store = MustOpen(path);
  std::string old_id = MustCreate(*store, DemoRun());
  std::string new_id = MustCreate(*store, DemoRun());
  std::string open_id = MustCreate(*store, DemoRun());
  auto finish = [&](const std::string& id, std::int64_t at) {
    Transition t;
    t.run_id = id;
    t.at_ms = at;
    t.run_state = RunState::kSucceeded;
    t.run_finished_at_ms = at;
    t.event.kind = "run.state";
    t.event.state = "succeeded";
    REQUIRE(store->Commit(t).ok());
  };
  finish(old_id, 1000);
  finish(new_id, 5000);
  Result<std::vector<std::string>> forgotten = store->ForgetRunsFinishedBefore(2000);
  REQUIRE(forgotten.ok());
  CHECK(forgotten.value() == std::vector<std::string>{old_id});
  CHECK_FALSE(store->LoadRun(old_id)->has_value());
  CHECK(MustEvents(*store, old_id).empty());
  CHECK(store->LoadRun(new_id)->has_value());
  CHECK(store->LoadRun(open_id)->has_value());
  // The history of a run that is not finished stays protected, whoever asks.
  RawDb raw(path);
  CHECK(raw.Query("DELETE FROM events WHERE run_id = '" + open_id + "'") ==
        "ERROR: events are append-only");
  CHECK(MustEvents(*store, open_id).size() == 1);
}
