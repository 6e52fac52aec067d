// RunStore: the durable record of every run, its steps and an append-only event log, in one
// SQLite file (WAL, synchronous=FULL). The database is the truth; the run manager's memory is
// a cache of it.
//
// Every mutation is one transaction that is committed (fsync'd) before the call returns, so a
// caller commits its intent first and acts after. Not thread-safe: owned by the daemon's one
// thread.
//
// Opening, and the checks that refuse a damaged or cut file, are in run_store_open.cc; the
// schema and its migrations in schema.h; the SQL of the row reads and writes in
// run_store_statements.h.
#ifndef DEPLOYD_STORE_RUN_STORE_H_
#define DEPLOYD_STORE_RUN_STORE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/states.h"
#include "deployd/status.h"
#include "store/store_metrics.h"

struct sqlite3;
struct sqlite3_stmt;

namespace deployd {

namespace sqlite {
class Use;
}

struct StepRecord {
  int index = 0;  // position in the run: main steps first, then on_failure steps
  std::string id;
  std::string phase = "main";  // "main" or "on_failure"
  StepState state = StepState::kPending;
  int attempts = 0;
  std::int64_t started_at_ms = 0;   // first fire; 0 = never
  std::int64_t finished_at_ms = 0;  // reached a terminal state; 0 = not yet
  std::optional<int> exit_status;   // of the last attempt's action; 128+N when killed by signal N
  std::optional<std::int64_t> pid;  // of the last attempt's action while it may be alive
  std::string reason;               // one line: why the step is in its state ("exit status 3", …)
  std::string evidence;             // JSON object text, "" when none
  // JSON object text, "" when none: what is needed to find the last attempt's action again
  // after a restart (engine/attempt_record.h).
  std::string action;
  // A pending step waiting out its retry delay: when the next attempt is due (0: not waiting),
  // so that a restart waits out what remains.
  std::int64_t due_at_ms = 0;
};

struct RunRecord {
  std::string id;  // assigned by CreateRun: "<plan name>-<sequence>"
  std::string plan_name;
  std::string plan_file;                    // as given to apply (for display)
  std::string plan_text;                    // the plan exactly as submitted
  std::map<std::string, std::string> vars;  // --var overrides as submitted
  RunState state = RunState::kPending;
  std::int64_t created_at_ms = 0;
  std::int64_t finished_at_ms = 0;
  std::string reason;             // why the run ended as it did
  std::string evidence;           // JSON object text (e.g. the failed preflight), "" when none
  std::vector<StepRecord> steps;  // ordered by index; empty when loaded without steps
  // The idempotency key it was created under ("" = none); no two runs share one.
  std::string key;
  // Who applied it, as the control socket's peer: "alice (uid 1000)"; "" when not known (a run
  // of a deployd before schema version 7).
  std::string applied_by;
};

// Which runs `deployctl runs` asks for, newest first (run_store_pages.cc).
struct RunFilter {
  std::optional<std::string> plan;  // of this plan name only
  std::optional<RunState> state;    // in this state only
  std::int64_t since_ms = 0;        // created at or after this time; 0: whenever
  std::int64_t before_seq = 0;      // numbered below this (the next page's cursor); 0: any
  int limit = 1;                    // at most this many (REQUIRES: 1 or more)
};

// A page of them, and where the next page starts.
struct RunPage {
  std::vector<RunRecord> runs;
  std::int64_t next_before_seq = 0;  // more match, numbered below this; 0: none
};

struct EventRecord {
  std::int64_t seq = 0;  // per run, 1, 2, 3, … without gaps
  std::int64_t at_ms = 0;
  std::string step_id;  // "" for run-level events
  std::string kind;     // "run.created", "run.state", "step.state", "step.attempt", …
  std::string state;    // the state entered, when kind ends in ".state"
  std::string detail;   // free text for humans
};

// One state change: the run's new state and/or one step's full new record, and the event that
// announces it. Committed as one transaction.
struct Transition {
  std::string run_id;
  std::int64_t at_ms = 0;  // stored as the event's at_ms; event.at_ms is used only when this is 0
  std::optional<RunState> run_state;
  std::optional<std::string> run_reason;
  std::optional<std::string> run_evidence;
  std::optional<std::int64_t> run_finished_at_ms;
  // Replaces the stored record with the same index, whose id must be step->id.
  std::optional<StepRecord> step;
  EventRecord event;  // seq is assigned by the store
};

class RunStore {
 public:
  // Opens or creates the database at `path`. An older schema is migrated; a newer one is
  // refused; a damaged file is reported and left untouched (never recreated). A file of zero
  // bytes counts as a new database: SQLite creates the file empty before it writes the schema,
  // so that is what a crash during the very first open leaves behind.
  static Result<std::unique_ptr<RunStore>> Open(const std::string& path);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // Inserts the run and its steps and the "run.created" event. Assigns and returns run.id:
  // its number is the next of the database's, and never below SetFirstRunNumber's.
  Result<std::string> CreateRun(RunRecord run);
  // Applies `t` and appends its event with the run's next seq, all or nothing; returns the event
  // as stored (its seq and at_ms). Fails, changing nothing, when the run or the step does not
  // exist, or when the storage does not take the write (last_failure() says which).
  Result<EventRecord> Commit(const Transition& t);

  // Why the last write (CreateRun, Commit, ForgetRun…) that failed did:
  //   kStorage:   the disk is full, an I/O error, a read-only file system: the same write may
  //               well succeed later, and nothing was changed;
  //   kFilesLost: the database file or its write-ahead log was deleted or replaced under this
  //               connection, or is damaged: nothing more may be written (FilesLost());
  //   kRefused:   the write itself was wrong (no such run, …).
  enum class Failure { kStorage, kFilesLost, kRefused };
  Failure last_failure() const { return last_failure_; }

  // Checks that the path still names the file this connection writes to, and so does the
  // write-ahead log's (two stat calls; every write checks first). When one was deleted or
  // replaced, what the connection can still read is saved first — the log checkpointed into
  // the database, or a deleted database copied to a file beside it — and the error says what
  // was found and where the runs are now; it stays the answer to every write from then on.
  Status CheckFiles();

  // Run numbers start above `n`: the runs of an earlier database whose logs are still in the
  // state directory (store/state_dir.h), so that no id and no log directory is used twice.
  void SetFirstRunNumber(std::int64_t n) { first_run_number_ = n; }

  Result<std::optional<RunRecord>> LoadRun(const std::string& id, bool with_steps = true);
  // The run created under idempotency key `key` (not ""), if any.
  Result<std::optional<RunRecord>> LoadRunByKey(const std::string& key, bool with_steps = true);
  // Newest first. `limit` 0 = all.
  Result<std::vector<RunRecord>> ListRuns(bool with_steps, int limit = 0);
  // The runs `filter` selects, newest first, a page of at most filter.limit: read by the
  // index of the run numbers (or of the plan, state or creation time it filters by), so that
  // a page costs what it holds, not the whole table.
  Result<RunPage> FindRuns(const RunFilter& filter, bool with_steps);
  // Runs whose state is not terminal, oldest first, with their steps.
  Result<std::vector<RunRecord>> UnfinishedRuns();
  // Ordered by seq; empty when there is no such run (every run has at least "run.created").
  Result<std::vector<EventRecord>> Events(const std::string& run_id);
  // Deletes the runs that finished before `cutoff_ms` — their steps and events too — in one
  // transaction, oldest first and at most `limit` of them (0: all), and returns their ids.
  // Runs that have not finished are never touched.
  Result<std::vector<std::string>> ForgetRunsFinishedBefore(std::int64_t cutoff_ms, int limit = 0);
  // The same for run `id`: its id when it was deleted, nothing when there is no such run or it
  // has not finished (LoadRun tells which).
  Result<std::vector<std::string>> ForgetRun(const std::string& id);

  // The runs of plan `plan`, newest first, with their steps; `limit` 0 = all
  // (run_store_history.cc, like the next one).
  Result<std::vector<RunRecord>> RunsOfPlan(const std::string& plan, int limit);
  // What step `step_id` recorded in the newest succeeded run of plan `plan` in which it
  // succeeded with `key` among its evidence's members (a benchmark's "benchmark" figures).
  struct StepEvidence {
    std::string run_id;
    std::string evidence;  // JSON object text
  };
  Result<std::optional<StepEvidence>> LastSucceededEvidence(const std::string& plan,
                                                            const std::string& step_id,
                                                            const std::string& key);

  // What the database counts for deployd's metrics (run_store_metrics.cc).
  Result<StoreMetrics> ReadMetrics();

  // For diagnostics and tests: the value of `PRAGMA <name>` ([a-z_]+) on this store's own
  // connection, e.g. "synchronous" -> "2". Per-connection settings cannot be read from another.
  Result<std::string> ReadPragma(std::string_view name);

  static constexpr int kSchemaVersion = 7;

 private:
  struct Statements;  // the prepared statements, cached for the connection's life

  // A file as stat(2) names it: the same pair means the same file while it is held open.
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    bool operator==(const FileId&) const = default;
  };

  RunStore(std::string path, sqlite3* db, std::unique_ptr<Statements> statements);
  static Result<std::unique_ptr<RunStore>> OpenFile(const std::string& path);
  Result<std::string> DoCreateRun(RunRecord& run);
  Result<EventRecord> DoCommit(const Transition& t);
  // The error of a failed write, "<path>: <what>: <sqlite's message>", with last_failure()
  // set from SQLite's error code.
  Status WriteError(std::string_view what);
  // Refuses a write (kFilesLost) once CheckFiles() has found the files gone.
  Status BeforeWrite();
  // store_files.cc: which files the connection has open (at open); what CheckFiles() saves
  // when they are gone.
  static std::optional<FileId> IdOf(const std::string& path);
  void RememberFiles();
  std::string SaveWhatIsLeft(bool database_gone);
  Result<std::vector<RunRecord>> DoListRuns(sqlite3_stmt* query, std::int64_t limit,
                                            bool with_steps);
  // Deletes, in one transaction, the finished runs that `which` selects (SQL after "WHERE …
  // AND", its parameters from ?2 on: ?1 is the limit) with `bind`.
  Result<std::vector<std::string>> ForgetFinished(const std::string& which,
                                                  const std::function<void(sqlite::Use&)>& bind,
                                                  std::int64_t limit);

  std::string path_;
  sqlite3* db_;
  std::unique_ptr<Statements> stmts_;
  Failure last_failure_ = Failure::kRefused;
  std::int64_t first_run_number_ = 0;
  std::optional<FileId> db_file_, wal_file_;  // as opened; the log's once it exists
  std::optional<std::string> lost_;           // CheckFiles()'s finding, once the files are gone
};

}  // namespace deployd

#endif  // DEPLOYD_STORE_RUN_STORE_H_
