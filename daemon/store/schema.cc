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
constexpr std::array<const char*, 7> kMigrations = {
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
    // Version 6: what deployd's metrics count (`deployctl metrics`), kept by triggers in the
    // transaction of the transition they count, so that the counts survive restarts and the
    // runs that retention forgets, and a scrape reads a few rows a plan, not every run and event.
    // A plan's counts go with its last run. The counts start from the runs already recorded.
    R"sql(
CREATE TABLE plan_totals (
  plan_name TEXT NOT NULL,
  what TEXT NOT NULL,                -- 'run.STATE': runs that ended so; 'failure.CLASS': steps
                                     -- that failed (and failed preflights), by why; 'stall'
  count INTEGER NOT NULL,
  last_at_ms INTEGER NOT NULL,       -- when the last one was counted
  PRIMARY KEY (plan_name, what)
) STRICT, WITHOUT ROWID;

-- The upper bounds of the step durations' histogram buckets, from 10 ms to 8 h.
CREATE TABLE step_duration_bounds (le_ms INTEGER NOT NULL PRIMARY KEY) STRICT;
INSERT INTO step_duration_bounds VALUES (10), (50), (250), (1000), (5000), (15000), (30000),
  (60000), (120000), (300000), (600000), (1800000), (3600000), (7200000), (14400000), (28800000);

-- Steps that ended succeeded or failed, by how long from their first fire: each row counts
-- the durations up to le_ms above the next lower bound (-1: above every bound).
CREATE TABLE step_durations (
  plan_name TEXT NOT NULL,
  step_id TEXT NOT NULL,
  state TEXT NOT NULL,
  le_ms INTEGER NOT NULL,
  count INTEGER NOT NULL,
  sum_ms INTEGER NOT NULL,
  PRIMARY KEY (plan_name, step_id, state, le_ms)
) STRICT, WITHOUT ROWID;

-- What a step's record counts for, in one place for the triggers and the first counts: its
-- duration's bucket, whether its last attempt stalled, and why it failed: what deployd put in
-- its reason and evidence, then its action's exit status (json_type() of text that is not JSON
-- would be an error, hence ev).
CREATE VIEW step_counts AS
SELECT run_id, idx, plan_name, step_id, state, finished_at_ms, timed, duration_ms,
  COALESCE((SELECT MIN(le_ms) FROM step_duration_bounds WHERE le_ms >= duration_ms), -1) AS le_ms,
  json_type(ev, '$.stalled_for_ms') IS NOT NULL AS stalled,
  CASE
    WHEN reason GLOB 'verify failed: *' THEN 'verify'
    WHEN reason GLOB 'interrupted by a restart of deployd*' THEN 'interrupted'
    WHEN json_type(ev, '$.stalled_for_ms') IS NOT NULL THEN 'stall'
    WHEN json_type(ev, '$.timeout_ms') IS NOT NULL THEN 'timeout'
    WHEN json_type(ev, '$.fail_on') IS NOT NULL THEN 'fail_on'
    WHEN exit_status IS NOT NULL THEN 'exit'
    ELSE 'other'
  END AS failure_class
FROM (SELECT s.run_id, s.idx, r.plan_name, s.id AS step_id, s.state, s.reason, s.exit_status,
        s.finished_at_ms,
        s.started_at_ms > 0 AND s.state IN ('succeeded', 'failed') AS timed,
        s.finished_at_ms - s.started_at_ms AS duration_ms,
        CASE WHEN json_valid(s.evidence) THEN s.evidence ELSE '{}' END AS ev
      FROM steps s JOIN runs r ON r.id = s.run_id);

CREATE TRIGGER runs_counted AFTER UPDATE OF state ON runs
WHEN OLD.state <> NEW.state AND NEW.state IN ('succeeded', 'failed', 'cancelled')
BEGIN
  INSERT INTO plan_totals VALUES (NEW.plan_name, 'run.' || NEW.state, 1, NEW.finished_at_ms)
    ON CONFLICT DO UPDATE SET count = count + 1, last_at_ms = excluded.last_at_ms;
  INSERT INTO plan_totals SELECT NEW.plan_name, 'failure.preflight', 1, NEW.finished_at_ms
    WHERE NEW.state = 'failed' AND NEW.reason GLOB 'preflight failed: *'
    ON CONFLICT DO UPDATE SET count = count + 1, last_at_ms = excluded.last_at_ms;
END;

CREATE TRIGGER steps_counted AFTER UPDATE OF state ON steps
WHEN OLD.state <> NEW.state
BEGIN
  INSERT INTO step_durations
    SELECT plan_name, step_id, state, le_ms, 1, duration_ms FROM step_counts
    WHERE run_id = NEW.run_id AND idx = NEW.idx AND timed
    ON CONFLICT DO UPDATE SET count = count + 1, sum_ms = sum_ms + excluded.sum_ms;
  INSERT INTO plan_totals
    SELECT plan_name, 'failure.' || failure_class, 1, finished_at_ms FROM step_counts
    WHERE run_id = NEW.run_id AND idx = NEW.idx AND state = 'failed'
    ON CONFLICT DO UPDATE SET count = count + 1, last_at_ms = excluded.last_at_ms;
  -- A stall stops the attempt: the step is then failed, or pending for its next attempt.
  INSERT INTO plan_totals
    SELECT plan_name, 'stall', 1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM step_counts
    WHERE run_id = NEW.run_id AND idx = NEW.idx AND stalled
      AND OLD.state IN ('running', 'verifying') AND NEW.state IN ('pending', 'failed')
    ON CONFLICT DO UPDATE SET count = count + 1, last_at_ms = excluded.last_at_ms;
END;

CREATE TRIGGER runs_forgotten AFTER DELETE ON runs
WHEN NOT EXISTS (SELECT 1 FROM runs WHERE plan_name = OLD.plan_name)
BEGIN
  DELETE FROM plan_totals WHERE plan_name = OLD.plan_name;
  DELETE FROM step_durations WHERE plan_name = OLD.plan_name;
END;

-- A scrape counts the unfinished runs, and finds each plan's last succeeded run, by index.
CREATE INDEX runs_by_state ON runs (state, plan_name);
CREATE INDEX runs_by_plan ON runs (plan_name, state, seq);

INSERT INTO plan_totals
  SELECT plan_name, 'run.' || state, COUNT(*), MAX(finished_at_ms) FROM runs
  WHERE state IN ('succeeded', 'failed', 'cancelled') GROUP BY plan_name, state;
INSERT INTO plan_totals
  SELECT plan_name, 'failure.preflight', COUNT(*), MAX(finished_at_ms) FROM runs
  WHERE state = 'failed' AND reason GLOB 'preflight failed: *' GROUP BY plan_name;
INSERT INTO plan_totals
  SELECT plan_name, 'failure.' || failure_class, COUNT(*), MAX(finished_at_ms) FROM step_counts
  WHERE state = 'failed' GROUP BY plan_name, failure_class;
INSERT INTO plan_totals
  SELECT plan_name, 'stall', COUNT(*), MAX(finished_at_ms) FROM step_counts
  WHERE stalled AND state IN ('pending', 'failed') GROUP BY plan_name;
INSERT INTO step_durations
  SELECT plan_name, step_id, state, le_ms, COUNT(*), SUM(duration_ms) FROM step_counts
  WHERE timed GROUP BY plan_name, step_id, state, le_ms;
)sql",
    // Version 7: who applied a run ("alice (uid 1000)"; '' for the runs of earlier versions);
    // the indexes `deployctl runs` pages by, newest first, whichever filters it is given; and
    // the highest run number given, so that a run forgotten (retention, delete, prune) never
    // has its id given to another.
    R"sql(
ALTER TABLE runs ADD COLUMN applied_by TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_by_plan_seq ON runs (plan_name, seq);
CREATE INDEX runs_by_state_seq ON runs (state, seq);
CREATE INDEX runs_by_created ON runs (created_at_ms);

CREATE TABLE run_numbers (last INTEGER NOT NULL) STRICT;
INSERT INTO run_numbers SELECT COALESCE(MAX(seq), 0) FROM runs;
CREATE TRIGGER runs_numbered AFTER INSERT ON runs
BEGIN UPDATE run_numbers SET last = MAX(last, NEW.seq); END;
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
