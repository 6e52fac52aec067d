#include "store/schema.h"

#include <array>
#include <string>

#include "store/run_store.h"
#include "store/sqlite_statement.h"

namespace deployd {
namespace {

using sqlite::Exec;

// The schema, one script per version: kMigrations[i] takes a database from user_version i to
// i + 1. Scripts are only ever appended; a released one is never edited, because databases in
// the field were built by it.
constexpr std::array<const char*, 5> kMigrations = {
    // Version 1. STRICT tables so that a value of the wrong type is refused on write rather
    // than stored and misread later. Times are milliseconds since the epoch; 0 means "not yet".
    R"sql(
CREATE TABLE runs (
  id TEXT NOT NULL PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,       -- 1, 2, 3, ... over the database's life; the id's suffix
  plan_name TEXT NOT NULL,
  plan_file TEXT NOT NULL,
  plan_text TEXT NOT NULL,
  vars TEXT NOT NULL,                -- JSON object of strings
  state TEXT NOT NULL,               -- a RunState name
  created_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL,
  reason TEXT NOT NULL,
  evidence TEXT NOT NULL             -- JSON object text or ''
) STRICT;

CREATE TABLE steps (
  run_id TEXT NOT NULL REFERENCES runs (id),
  idx INTEGER NOT NULL,
  id TEXT NOT NULL,
  phase TEXT NOT NULL,
  state TEXT NOT NULL,               -- a StepState name
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
  seq INTEGER NOT NULL,              -- per run, 1, 2, 3, ... without gaps
  at_ms INTEGER NOT NULL,
  step_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  detail TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

-- The event log is history: the database itself refuses to rewrite it, whoever asks.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
)sql",
    // Version 2: what a step's action needs to be found again after a restart (a background
    // action's processes and supervisor files), JSON object text or ''.
    R"sql(
ALTER TABLE steps ADD COLUMN action TEXT NOT NULL DEFAULT '';
)sql",
    // Version 3: a finished run may be forgotten as a whole (the `retention` setting); the
    // history of a run that is not finished stays untouchable.
    R"sql(
DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN (SELECT state FROM runs WHERE id = OLD.run_id) NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
)sql",
    // Version 4: when a step's next attempt is due (a retry delay outlives a restart).
    R"sql(
ALTER TABLE steps ADD COLUMN due_at_ms INTEGER NOT NULL DEFAULT 0;
)sql",
    // Version 5: a run may be created under an idempotency key ('' = none), so that an apply
    // sent again (a rollout's coordinator after a crash, a client after a lost connection) finds
    // the run the first one created instead of starting another.
    R"sql(
ALTER TABLE runs ADD COLUMN idem_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX runs_by_idem_key ON runs (idem_key) WHERE idem_key <> '';
)sql",
};
static_assert(kMigrations.size() == RunStore::kSchemaVersion,
              "kSchemaVersion must be the number of migrations");

}  // namespace

Status MigrateSchema(sqlite3* db, int from) {
  Status s = Exec(db, "BEGIN IMMEDIATE");
  for (int v = from; s.ok() && v < RunStore::kSchemaVersion; ++v) s = Exec(db, kMigrations[v]);
  if (s.ok()) {
    s = Exec(db, ("PRAGMA user_version = " + std::to_string(RunStore::kSchemaVersion)).c_str());
  }
  if (s.ok()) s = Exec(db, "COMMIT");
  if (!s.ok() && !sqlite3_get_autocommit(db)) Exec(db, "ROLLBACK");
  return s;
}

}  // namespace deployd
