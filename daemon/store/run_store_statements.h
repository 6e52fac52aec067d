// The prepared statements of a RunStore, cached for the connection's life: the SQL of every
// read and write of runs, steps and events. Preparing them all is also how a current schema is
// checked at open. Owned by the RunStore, on its one thread.
#ifndef DEPLOYD_STORE_RUN_STORE_STATEMENTS_H_
#define DEPLOYD_STORE_RUN_STORE_STATEMENTS_H_

#include <sqlite3.h>

#include <memory>

#include "deployd/status.h"
#include "store/run_store.h"
#include "store/sqlite_statement.h"

namespace deployd {

struct RunStore::Statements {
  sqlite::Statement begin, commit, rollback;
  sqlite::Statement next_run_seq, insert_run, insert_step, insert_event, update_run, update_step;
  sqlite::Statement select_run, select_runs, select_unfinished, select_steps, select_events;
  sqlite::Statement select_run_by_key;

  // Fails with sqlite's message when the schema is not the one these statements expect.
  static Result<std::unique_ptr<Statements>> Prepare(sqlite3* db);
};

// The columns every select_run* statement returns, in order (run_store.cc reads them).
inline constexpr const char* kRunColumns =
    "id, plan_name, plan_file, plan_text, vars, state, created_at_ms, finished_at_ms, reason, "
    "evidence, idem_key, applied_by";

}  // namespace deployd

#endif  // DEPLOYD_STORE_RUN_STORE_STATEMENTS_H_
