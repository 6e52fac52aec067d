#include "store/run_store_statements.h"

#include <string>
#include <utility>

#include "deployd/states.h"

namespace deployd {

Result<std::unique_ptr<RunStore::Statements>> RunStore::Statements::Prepare(sqlite3* db) {
  auto s = std::make_unique<Statements>();
  std::string run_columns = kRunColumns;
  std::string unfinished;
  for (RunState state :
       {RunState::kPending, RunState::kRunning, RunState::kPaused, RunState::kWaiting,
        RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    if (!IsTerminal(state)) continue;
    unfinished += (unfinished.empty() ? "'" : ", '") + std::string(ToString(state)) + "'";
  }
  const std::pair<sqlite::Statement*, std::string> all[] = {
      {&s->begin, "BEGIN IMMEDIATE"},
      {&s->commit, "COMMIT"},
      {&s->rollback, "ROLLBACK"},
      // run_numbers holds the highest number given, also that of a run forgotten since.
      {&s->next_run_seq, "SELECT last + 1 FROM run_numbers"},
      {&s->insert_run,
       "INSERT INTO runs (id, seq, plan_name, plan_file, plan_text, vars, state, created_at_ms, "
       "finished_at_ms, reason, evidence, idem_key, applied_by) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"},
      {&s->insert_step,
       "INSERT INTO steps (run_id, idx, id, phase, state, attempts, started_at_ms, "
       "finished_at_ms, exit_status, pid, reason, evidence, action, due_at_ms) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"},
      // One statement finds the run's next seq, proves the run exists (no row is inserted for
      // an unknown run) and returns the seq it gave the event.
      {&s->insert_event,
       "INSERT INTO events (run_id, seq, at_ms, step_id, kind, state, detail) "
       "SELECT id, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run_id = ?1), "
       "?2, ?3, ?4, ?5, ?6 FROM runs WHERE id = ?1 RETURNING seq"},
      {&s->update_run,
       "UPDATE runs SET state = COALESCE(?2, state), reason = COALESCE(?3, reason), "
       "evidence = COALESCE(?4, evidence), finished_at_ms = COALESCE(?5, finished_at_ms) "
       "WHERE id = ?1"},
      // Parameters numbered as insert_step's, so that one BindStep serves both.
      {&s->update_step,
       "UPDATE steps SET phase = ?4, state = ?5, attempts = ?6, started_at_ms = ?7, "
       "finished_at_ms = ?8, exit_status = ?9, pid = ?10, reason = ?11, evidence = ?12, "
       "action = ?13, due_at_ms = ?14 "
       "WHERE run_id = ?1 AND idx = ?2 AND id = ?3"},
      {&s->select_run, "SELECT " + run_columns + " FROM runs WHERE id = ?1"},
      {&s->select_run_by_key, "SELECT " + run_columns + " FROM runs WHERE idem_key = ?1"},
      {&s->select_runs, "SELECT " + run_columns + " FROM runs ORDER BY seq DESC LIMIT ?1"},
      {&s->select_unfinished, "SELECT " + run_columns + " FROM runs WHERE state NOT IN (" +
                                  unfinished + ") ORDER BY seq LIMIT ?1"},
      {&s->select_steps,
       "SELECT idx, id, phase, state, attempts, started_at_ms, finished_at_ms, exit_status, "
       "pid, reason, evidence, action, due_at_ms FROM steps WHERE run_id = ?1 ORDER BY idx"},
      {&s->select_events,
       "SELECT seq, at_ms, step_id, kind, state, detail FROM events WHERE run_id = ?1 "
       "ORDER BY seq"},
  };
  for (const auto& [statement, sql] : all) {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr) !=
        SQLITE_OK) {
      return Status::Error(sqlite3_errmsg(db));
    }
    *statement = sqlite::Statement(raw);
  }
  return s;
}

}  // namespace deployd
