#include "store/run_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <boost/json.hpp>
#include <utility>

#include "store/run_store_statements.h"
#include "store/sqlite_statement.h"
#include "store/store_errors.h"

namespace deployd {
namespace {

using sqlite::QueryColumn;
using sqlite::SqlError;
using sqlite::Use;
using sqlite::WriteTransaction;

std::string SerializeVars(const std::map<std::string, std::string>& vars) {
  boost::json::object object;
  for (const auto& [name, value] : vars) object[name] = value;
  return boost::json::serialize(object);
}

std::optional<std::map<std::string, std::string>> ParseVars(const std::string& text) {
  boost::system::error_code ec;
  boost::json::value value = boost::json::parse(text, ec);
  if (ec || !value.is_object()) return std::nullopt;
  std::map<std::string, std::string> vars;
  for (const auto& [name, v] : value.as_object()) {
    if (!v.is_string()) return std::nullopt;
    vars.emplace(std::string(name), std::string(v.as_string()));
  }
  return vars;
}

// Reads a row of `SELECT kRunColumns ...`.
Result<RunRecord> ReadRun(const std::string& path, const Use& q) {
  RunRecord run;
  run.id = q.Text(0);
  run.plan_name = q.Text(1);
  run.plan_file = q.Text(2);
  run.plan_text = q.Text(3);
  auto vars = ParseVars(q.Text(4));
  if (!vars) {
    return StoreDamage(path, "run " + run.id + " has vars that are not a JSON object of strings");
  }
  run.vars = std::move(*vars);
  std::string state = q.Text(5);
  auto parsed = ParseRunState(state);
  if (!parsed) return StoreDamage(path, "run " + run.id + " has unknown state '" + state + "'");
  run.state = *parsed;
  run.created_at_ms = q.Int(6);
  run.finished_at_ms = q.Int(7);
  run.reason = q.Text(8);
  run.evidence = q.Text(9);
  run.key = q.Text(10);
  run.applied_by = q.Text(11);
  return run;
}

Result<StepRecord> ReadStep(const std::string& path, const std::string& run_id, const Use& q) {
  StepRecord step;
  step.index = static_cast<int>(q.Int(0));
  step.id = q.Text(1);
  step.phase = q.Text(2);
  std::string state = q.Text(3);
  auto parsed = ParseStepState(state);
  if (!parsed) {
    return StoreDamage(
        path, "step " + step.id + " of run " + run_id + " has unknown state '" + state + "'");
  }
  step.state = *parsed;
  step.attempts = static_cast<int>(q.Int(4));
  step.started_at_ms = q.Int(5);
  step.finished_at_ms = q.Int(6);
  if (!q.IsNull(7)) step.exit_status = static_cast<int>(q.Int(7));
  if (!q.IsNull(8)) step.pid = q.Int(8);
  step.reason = q.Text(9);
  step.evidence = q.Text(10);
  step.action = q.Text(11);
  step.due_at_ms = q.Int(12);
  return step;
}

// insert_step and update_step number their parameters alike.
void BindStep(Use& q, const std::string& run_id, const StepRecord& step) {
  q.Bind(1, run_id)
      .Bind(2, step.index)
      .Bind(3, step.id)
      .Bind(4, step.phase)
      .Bind(5, ToString(step.state))
      .Bind(6, step.attempts)
      .Bind(7, step.started_at_ms)
      .Bind(8, step.finished_at_ms)
      .Bind(9, step.exit_status)
      .Bind(10, step.pid)
      .Bind(11, step.reason)
      .Bind(12, step.evidence)
      .Bind(13, step.action)
      .Bind(14, step.due_at_ms);
}

}  // namespace

RunStore::RunStore(std::string path, sqlite3* db, std::unique_ptr<Statements> statements)
    : path_(std::move(path)), db_(db), stmts_(std::move(statements)) {
  RememberFiles();
}

RunStore::~RunStore() {
  stmts_.reset();
  // The last connection to close checkpoints the WAL into the main file and removes it.
  sqlite3_close_v2(db_);
}

Result<std::string> RunStore::CreateRun(RunRecord run) {
  return ExceptionsAsStatus(path_, "cannot create a run", [&] { return DoCreateRun(run); });
}

Result<std::string> RunStore::DoCreateRun(RunRecord& run) {
  auto fail = [&] { return WriteError("cannot create a run of " + run.plan_name); };
  last_failure_ = Failure::kRefused;
  if (run.plan_name.empty()) return Status::Error(path_ + ": cannot create a run: no plan name");
  std::string vars = SerializeVars(run.vars);
  // The JSON parser refuses what the serializer lets through; refuse it now, not at every load.
  if (!ParseVars(vars)) {
    return Status::Error(path_ + ": cannot create a run of " + run.plan_name +
                         ": a variable is not valid UTF-8");
  }

  if (Status s = BeforeWrite(); !s.ok()) return s;
  WriteTransaction txn(db_, stmts_->begin.get(), stmts_->commit.get(), stmts_->rollback.get());
  if (!txn.begun()) return fail();
  std::int64_t seq;
  {
    Use q(stmts_->next_run_seq.get());
    if (q.Step() != SQLITE_ROW) return fail();
    seq = std::max(q.Int(0), first_run_number_ + 1);
  }
  run.id = run.plan_name + "-" + std::to_string(seq);
  {
    Use q(stmts_->insert_run.get());
    q.Bind(1, run.id)
        .Bind(2, seq)
        .Bind(3, run.plan_name)
        .Bind(4, run.plan_file)
        .Bind(5, run.plan_text)
        .Bind(6, vars)
        .Bind(7, ToString(run.state))
        .Bind(8, run.created_at_ms)
        .Bind(9, run.finished_at_ms)
        .Bind(10, run.reason)
        .Bind(11, run.evidence)
        .Bind(12, run.key)
        .Bind(13, run.applied_by);
    if (q.Step() != SQLITE_DONE) return fail();
  }
  for (const StepRecord& step : run.steps) {
    Use q(stmts_->insert_step.get());
    BindStep(q, run.id, step);
    if (q.Step() != SQLITE_DONE)
      return WriteError("cannot create a run of " + run.plan_name + ": step " + step.id);
  }
  {
    Use q(stmts_->insert_event.get());
    q.Bind(1, run.id)
        .Bind(2, run.created_at_ms)
        .Bind(3, std::string_view())
        .Bind(4, std::string_view("run.created"))
        .Bind(5, ToString(run.state))
        .Bind(6, "plan " + run.plan_name + " from " + run.plan_file +
                     (run.applied_by.empty() ? "" : ", applied by " + run.applied_by));
    if (q.Step() != SQLITE_ROW || q.Step() != SQLITE_DONE) return fail();
  }
  if (!txn.Commit()) return fail();
  return run.id;
}

Result<EventRecord> RunStore::Commit(const Transition& t) {
  return ExceptionsAsStatus(path_, "cannot commit a transition", [&] { return DoCommit(t); });
}

Result<EventRecord> RunStore::DoCommit(const Transition& t) {
  last_failure_ = Failure::kRefused;
  // Built only on failure: Commit is on the daemon's critical path.
  auto what = [&] { return "cannot commit " + t.event.kind + " to run " + t.run_id; };
  if (t.event.kind.empty()) {
    return Status::Error(path_ + ": cannot commit to run " + t.run_id + ": the event has no kind");
  }
  if (Status s = BeforeWrite(); !s.ok()) return s;

  EventRecord stored = t.event;
  if (t.at_ms != 0) stored.at_ms = t.at_ms;
  WriteTransaction txn(db_, stmts_->begin.get(), stmts_->commit.get(), stmts_->rollback.get());
  if (!txn.begun()) return WriteError(what());
  {
    Use q(stmts_->insert_event.get());
    q.Bind(1, t.run_id)
        .Bind(2, stored.at_ms)
        .Bind(3, t.event.step_id)
        .Bind(4, t.event.kind)
        .Bind(5, t.event.state)
        .Bind(6, t.event.detail);
    int rc = q.Step();
    if (rc == SQLITE_DONE) return Status::Error(path_ + ": " + what() + ": no such run");
    if (rc != SQLITE_ROW) return WriteError(what());
    stored.seq = q.Int(0);
    if (q.Step() != SQLITE_DONE) return WriteError(what());
  }
  if (t.run_state || t.run_reason || t.run_evidence || t.run_finished_at_ms) {
    Use q(stmts_->update_run.get());
    q.Bind(1, t.run_id)
        .Bind(2,
              t.run_state ? std::optional<std::string_view>(ToString(*t.run_state)) : std::nullopt)
        .Bind(3, t.run_reason)
        .Bind(4, t.run_evidence)
        .Bind(5, t.run_finished_at_ms);
    if (q.Step() != SQLITE_DONE) return WriteError(what());
  }
  if (t.step) {
    const StepRecord& step = *t.step;
    Use q(stmts_->update_step.get());
    BindStep(q, t.run_id, step);
    if (q.Step() != SQLITE_DONE) return WriteError(what());
    if (sqlite3_changes(db_) != 1) {
      return Status::Error(path_ + ": " + what() + ": it has no step " + step.id + " at index " +
                           std::to_string(step.index));
    }
  }
  if (!txn.Commit()) return WriteError(what());
  return stored;
}

namespace {

Status LoadSteps(const std::string& path, sqlite3* db, sqlite3_stmt* select_steps, RunRecord& run) {
  Use q(select_steps);
  q.Bind(1, run.id);
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    auto step = ReadStep(path, run.id, q);
    if (!step.ok()) return step.status();
    run.steps.push_back(std::move(*step));
  }
  if (rc != SQLITE_DONE) return SqlError(path, db, "cannot load the steps of run " + run.id);
  return Status::Ok();
}

// The run of a bound `SELECT kRunColumns` that finds at most one, with its steps if asked.
Result<std::optional<RunRecord>> LoadOneRun(const std::string& path, sqlite3* db,
                                            sqlite3_stmt* select_steps, Use& q,
                                            const std::string& what, bool with_steps) {
  std::optional<RunRecord> run;
  int rc = q.Step();
  if (rc == SQLITE_DONE) return run;
  if (rc != SQLITE_ROW) return SqlError(path, db, "cannot load " + what);
  auto read = ReadRun(path, q);
  if (!read.ok()) return read.status();
  run = std::move(*read);
  if (with_steps) {
    if (Status s = LoadSteps(path, db, select_steps, *run); !s.ok()) return s;
  }
  return run;
}

}  // namespace

Result<std::optional<RunRecord>> RunStore::LoadRun(const std::string& id, bool with_steps) {
  return ExceptionsAsStatus(path_, "cannot load a run", [&]() -> Result<std::optional<RunRecord>> {
    Use q(stmts_->select_run.get());
    q.Bind(1, id);
    return LoadOneRun(path_, db_, stmts_->select_steps.get(), q, "run " + id, with_steps);
  });
}

Result<std::optional<RunRecord>> RunStore::LoadRunByKey(const std::string& key, bool with_steps) {
  return ExceptionsAsStatus(path_, "cannot load a run", [&]() -> Result<std::optional<RunRecord>> {
    Use q(stmts_->select_run_by_key.get());
    q.Bind(1, key);
    return LoadOneRun(path_, db_, stmts_->select_steps.get(), q, "the run of key '" + key + "'",
                      with_steps);
  });
}

Result<std::vector<RunRecord>> RunStore::DoListRuns(sqlite3_stmt* query, std::int64_t limit,
                                                    bool with_steps) {
  std::vector<RunRecord> runs;
  {
    Use q(query);
    q.Bind(1, limit > 0 ? limit : -1);  // SQLite reads a negative LIMIT as none
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      auto run = ReadRun(path_, q);
      if (!run.ok()) return run.status();
      runs.push_back(std::move(*run));
    }
    if (rc != SQLITE_DONE) return SqlError(path_, db_, "cannot list runs");
  }
  if (with_steps) {
    for (RunRecord& run : runs) {
      if (Status s = LoadSteps(path_, db_, stmts_->select_steps.get(), run); !s.ok()) return s;
    }
  }
  return runs;
}

Result<std::vector<RunRecord>> RunStore::ListRuns(bool with_steps, int limit) {
  return ExceptionsAsStatus(path_, "cannot list runs", [&] {
    return DoListRuns(stmts_->select_runs.get(), limit, with_steps);
  });
}

Result<std::vector<RunRecord>> RunStore::UnfinishedRuns() {
  return ExceptionsAsStatus(path_, "cannot list unfinished runs",
                            [&] { return DoListRuns(stmts_->select_unfinished.get(), 0, true); });
}

Result<std::vector<std::string>> RunStore::ForgetRunsFinishedBefore(std::int64_t cutoff_ms,
                                                                    int limit) {
  return ForgetFinished(
      "finished_at_ms > 0 AND finished_at_ms < ?2", [&](Use& q) { q.Bind(2, cutoff_ms); }, limit);
}

Result<std::vector<std::string>> RunStore::ForgetRun(const std::string& id) {
  return ForgetFinished(
      "id = ?2", [&](Use& q) { q.Bind(2, id); }, 1);
}

// Retention, `deployctl delete` and `prune` forget runs alike: the whole run at once, and only
// a finished one (the events' trigger refuses the history of any other, schema version 3).
Result<std::vector<std::string>> RunStore::ForgetFinished(const std::string& which,
                                                          const std::function<void(Use&)>& bind,
                                                          std::int64_t limit) {
  return ExceptionsAsStatus(path_, "cannot forget runs", [&]() -> Result<std::vector<std::string>> {
    last_failure_ = Failure::kRefused;
    auto fail = [&] { return WriteError("cannot forget runs"); };
    if (Status s = BeforeWrite(); !s.ok()) return s;
    WriteTransaction txn(db_, stmts_->begin.get(), stmts_->commit.get(), stmts_->rollback.get());
    if (!txn.begun()) return fail();
    std::vector<std::string> ids;
    {
      sqlite3_stmt* raw = nullptr;
      const std::string sql =
          "SELECT id FROM runs WHERE state IN ('succeeded', 'failed', 'cancelled') AND " + which +
          " ORDER BY seq LIMIT ?1";
      if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) return fail();
      sqlite::Statement select(raw);
      Use q(raw);
      q.Bind(1, limit > 0 ? limit : -1);  // SQLite reads a negative LIMIT as none
      bind(q);
      int rc;
      while ((rc = q.Step()) == SQLITE_ROW) ids.push_back(q.Text(0));
      if (rc != SQLITE_DONE) return fail();
    }
    for (const char* sql :
         {"DELETE FROM events WHERE run_id = ?1", "DELETE FROM steps WHERE run_id = ?1",
          "DELETE FROM runs WHERE id = ?1"}) {
      sqlite3_stmt* raw = nullptr;
      if (sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr) != SQLITE_OK) return fail();
      sqlite::Statement remove(raw);
      for (const std::string& id : ids) {
        Use q(raw);
        q.Bind(1, id);
        if (q.Step() != SQLITE_DONE) return fail();
      }
    }
    if (!txn.Commit()) return fail();
    return ids;
  });
}

Result<std::vector<EventRecord>> RunStore::Events(const std::string& run_id) {
  return ExceptionsAsStatus(path_, "cannot load events", [&]() -> Result<std::vector<EventRecord>> {
    std::vector<EventRecord> events;
    Use q(stmts_->select_events.get());
    q.Bind(1, run_id);
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      EventRecord e;
      e.seq = q.Int(0);
      e.at_ms = q.Int(1);
      e.step_id = q.Text(2);
      e.kind = q.Text(3);
      e.state = q.Text(4);
      e.detail = q.Text(5);
      // The store never leaves a gap, so a gap means the file was altered.
      if (e.seq != static_cast<std::int64_t>(events.size()) + 1) {
        return StoreDamage(path_, "run " + run_id + " has event " + std::to_string(e.seq) +
                                      " where " + std::to_string(events.size() + 1) +
                                      " was expected");
      }
      events.push_back(std::move(e));
    }
    if (rc != SQLITE_DONE) return SqlError(path_, db_, "cannot load the events of run " + run_id);
    return events;
  });
}

Result<std::string> RunStore::ReadPragma(std::string_view name) {
  return ExceptionsAsStatus(path_, "cannot read a pragma", [&]() -> Result<std::string> {
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != name.npos) {
      return Status::Error(path_ + ": not a pragma name: '" + std::string(name) + "'");
    }
    auto rows = QueryColumn(db_, "PRAGMA " + std::string(name));
    if (!rows.ok()) {
      return Status::Error(path_ + ": cannot read PRAGMA " + std::string(name) + ": " +
                           rows.status().message());
    }
    return rows->empty() ? std::string() : rows->front();
  });
}

}  // namespace deployd
