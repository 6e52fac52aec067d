#include "store/run_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/json.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

namespace deployd {
namespace {

// The schema, one script per version: kMigrations[i] takes a database from user_version i to
// i + 1. Scripts are only ever appended; a released one is never edited, because databases in
// the field were built by it.
constexpr std::array<const char*, 3> kMigrations = {
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
};
static_assert(kMigrations.size() == RunStore::kSchemaVersion,
              "kSchemaVersion must be the number of migrations");

// Only an operator holding the file open in the sqlite3 shell can make us wait; a short wait
// rides that out without stalling the daemon's one thread for long.
constexpr int kBusyTimeoutMs = 1000;

constexpr const char* kRunColumns =
    "id, plan_name, plan_file, plan_text, vars, state, created_at_ms, finished_at_ms, reason, "
    "evidence";

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;

// Owns one prepared statement.
class Statement {
 public:
  Statement() = default;
  explicit Statement(sqlite3_stmt* s) : s_(s) {}
  Statement(Statement&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
  Statement& operator=(Statement&& other) noexcept {
    std::swap(s_, other.s_);
    return *this;
  }
  ~Statement() { sqlite3_finalize(s_); }
  sqlite3_stmt* get() const { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// One use of a (cached) statement. Resetting when done matters: a statement left mid-result
// keeps its read transaction open, which pins the WAL and stops checkpoints.
class Use {
 public:
  explicit Use(sqlite3_stmt* s) : s_(s) {}
  ~Use() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

  Use& Bind(int i, std::string_view v) {
    // A null pointer would bind NULL, which the NOT NULL columns refuse; "" is meant.
    Check(sqlite3_bind_text64(s_, i, v.data() ? v.data() : "", v.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
    return *this;
  }
  Use& Bind(int i, std::int64_t v) {
    Check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  template <typename T>
  Use& Bind(int i, const std::optional<T>& v) {
    if (v) return Bind(i, *v);
    Check(sqlite3_bind_null(s_, i));
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code (also a failed Bind's).
  int Step() { return bind_rc_ != SQLITE_OK ? bind_rc_ : sqlite3_step(s_); }

  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  std::int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, sqlite3_column_bytes(s_, col)) : std::string();
  }

 private:
  void Check(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }
  sqlite3_stmt* s_;
  int bind_rc_ = SQLITE_OK;
};

// BEGIN IMMEDIATE takes the write lock at the start, so the transaction can never fail halfway
// for want of it. Rolls back on destruction unless committed, including when an exception
// unwinds through it.
class WriteTransaction {
 public:
  WriteTransaction(sqlite3* db, sqlite3_stmt* begin, sqlite3_stmt* commit, sqlite3_stmt* rollback)
      : db_(db), commit_(commit), rollback_(rollback) {
    begun_ = Use(begin).Step() == SQLITE_DONE;
  }
  ~WriteTransaction() {
    // Some errors (I/O, disk full) already rolled back by themselves.
    if (begun_ && !committed_ && !sqlite3_get_autocommit(db_)) Use(rollback_).Step();
  }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;

  bool begun() const { return begun_; }
  bool Commit() {
    committed_ = Use(commit_).Step() == SQLITE_DONE;
    return committed_;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* commit_;
  sqlite3_stmt* rollback_;
  bool begun_ = false;
  bool committed_ = false;
};

// "<path>: <what>: <sqlite's message>"; call before anything else touches the connection.
Status SqlError(const std::string& path, sqlite3* db, std::string_view what) {
  return Status::Error(path + ": " + std::string(what) + ": " + sqlite3_errmsg(db));
}

Status Damage(const std::string& path, std::string_view what) {
  return Status::Error(path + ": state database is damaged (" + std::string(what) + ")");
}

// At open the promise is stronger: nothing has been written yet, and nothing will be.
Status DamageAtOpen(const std::string& path, std::string_view what) {
  return Status::Error(path + ": state database is damaged (" + std::string(what) +
                       "); it was left untouched: move it away to start afresh");
}

// The first column of every row of `sql`, as text; on failure, sqlite's message.
Result<std::vector<std::string>> QueryColumn(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    return Status::Error(sqlite3_errmsg(db));
  }
  Statement stmt(raw);
  Use q(stmt.get());
  std::vector<std::string> rows;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) rows.push_back(q.Text(0));
  if (rc != SQLITE_DONE) return Status::Error(sqlite3_errmsg(db));
  return rows;
}

Result<std::int64_t> QueryInt(sqlite3* db, const std::string& sql) {
  auto rows = QueryColumn(db, sql);
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) return Status::Error("'" + sql + "' returned no value");
  return static_cast<std::int64_t>(std::strtoll(rows->front().c_str(), nullptr, 10));
}

Status Exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Status::Error(sqlite3_errmsg(db));
  }
  return Status::Ok();
}

// Runs the migrations from `from` up to kSchemaVersion and records the new version, all in one
// transaction: a crash leaves the old version intact, never a half-built schema.
Status Migrate(sqlite3* db, int from) {
  Status s = Exec(db, "BEGIN IMMEDIATE");
  for (int v = from; s.ok() && v < RunStore::kSchemaVersion; ++v) s = Exec(db, kMigrations[v]);
  if (s.ok()) {
    s = Exec(db, ("PRAGMA user_version = " + std::to_string(RunStore::kSchemaVersion)).c_str());
  }
  if (s.ok()) s = Exec(db, "COMMIT");
  if (!s.ok() && !sqlite3_get_autocommit(db)) Exec(db, "ROLLBACK");
  return s;
}

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
    return Damage(path, "run " + run.id + " has vars that are not a JSON object of strings");
  }
  run.vars = std::move(*vars);
  std::string state = q.Text(5);
  auto parsed = ParseRunState(state);
  if (!parsed) return Damage(path, "run " + run.id + " has unknown state '" + state + "'");
  run.state = *parsed;
  run.created_at_ms = q.Int(6);
  run.finished_at_ms = q.Int(7);
  run.reason = q.Text(8);
  run.evidence = q.Text(9);
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
    return Damage(path,
                  "step " + step.id + " of run " + run_id + " has unknown state '" + state + "'");
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
      .Bind(13, step.action);
}

// Exceptions (in practice only std::bad_alloc) become a Status at the store's edge.
template <typename F>
auto Guard(const std::string& path, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::Error(path + ": " + what + ": " + e.what());
  }
}

}  // namespace

struct RunStore::Statements {
  Statement begin, commit, rollback;
  Statement next_run_seq, insert_run, insert_step, insert_event, update_run, update_step;
  Statement select_run, select_runs, select_unfinished, select_steps, select_events;

  // Fails with sqlite's message when the schema is not the one these statements expect.
  static Result<std::unique_ptr<Statements>> Prepare(sqlite3* db) {
    auto s = std::make_unique<Statements>();
    std::string run_columns = kRunColumns;
    std::string unfinished;
    for (RunState state :
         {RunState::kPending, RunState::kRunning, RunState::kPaused, RunState::kWaiting,
          RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
      if (!IsTerminal(state)) continue;
      unfinished += (unfinished.empty() ? "'" : ", '") + std::string(ToString(state)) + "'";
    }
    const std::pair<Statement*, std::string> all[] = {
        {&s->begin, "BEGIN IMMEDIATE"},
        {&s->commit, "COMMIT"},
        {&s->rollback, "ROLLBACK"},
        {&s->next_run_seq, "SELECT COALESCE(MAX(seq), 0) + 1 FROM runs"},
        {&s->insert_run,
         "INSERT INTO runs (id, seq, plan_name, plan_file, plan_text, vars, state, created_at_ms, "
         "finished_at_ms, reason, evidence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"},
        {&s->insert_step,
         "INSERT INTO steps (run_id, idx, id, phase, state, attempts, started_at_ms, "
         "finished_at_ms, exit_status, pid, reason, evidence, action) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"},
        // One statement both finds the run's next seq and proves the run exists: no row is
        // inserted for an unknown run.
        {&s->insert_event,
         "INSERT INTO events (run_id, seq, at_ms, step_id, kind, state, detail) "
         "SELECT id, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run_id = ?1), "
         "?2, ?3, ?4, ?5, ?6 FROM runs WHERE id = ?1"},
        {&s->update_run,
         "UPDATE runs SET state = COALESCE(?2, state), reason = COALESCE(?3, reason), "
         "evidence = COALESCE(?4, evidence), finished_at_ms = COALESCE(?5, finished_at_ms) "
         "WHERE id = ?1"},
        // Parameters numbered as insert_step's, so that one BindStep serves both.
        {&s->update_step,
         "UPDATE steps SET phase = ?4, state = ?5, attempts = ?6, started_at_ms = ?7, "
         "finished_at_ms = ?8, exit_status = ?9, pid = ?10, reason = ?11, evidence = ?12, "
         "action = ?13 "
         "WHERE run_id = ?1 AND idx = ?2 AND id = ?3"},
        {&s->select_run, "SELECT " + run_columns + " FROM runs WHERE id = ?1"},
        {&s->select_runs, "SELECT " + run_columns + " FROM runs ORDER BY seq DESC LIMIT ?1"},
        {&s->select_unfinished, "SELECT " + run_columns + " FROM runs WHERE state NOT IN (" +
                                    unfinished + ") ORDER BY seq LIMIT ?1"},
        {&s->select_steps,
         "SELECT idx, id, phase, state, attempts, started_at_ms, finished_at_ms, exit_status, "
         "pid, reason, evidence, action FROM steps WHERE run_id = ?1 ORDER BY idx"},
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
      *statement = Statement(raw);
    }
    return s;
  }
};

RunStore::RunStore(std::string path, sqlite3* db, std::unique_ptr<Statements> statements)
    : path_(std::move(path)), db_(db), stmts_(std::move(statements)) {}

RunStore::~RunStore() {
  stmts_.reset();
  // The last connection to close checkpoints the WAL into the main file and removes it.
  sqlite3_close_v2(db_);
}

Result<std::unique_ptr<RunStore>> RunStore::Open(const std::string& path) {
  return Guard(path, "cannot open state database", [&] {
    // A refused file is left as it was found, and so is its directory: reading a WAL-mode file
    // makes SQLite create an empty log and a shared-memory index beside it, removed again here.
    const std::string wal = path + "-wal", shm = path + "-shm";
    const bool had_wal = ::access(wal.c_str(), F_OK) == 0;
    const bool had_shm = ::access(shm.c_str(), F_OK) == 0;
    auto opened = OpenFile(path);  // closes the connection of a refused file before returning
    if (!opened.ok()) {
      struct stat st;
      if (!had_wal && ::stat(wal.c_str(), &st) == 0 && st.st_size == 0) {
        ::unlink(wal.c_str());
        if (!had_shm) ::unlink(shm.c_str());
      }
    }
    return opened;
  });
}

Result<std::unique_ptr<RunStore>> RunStore::OpenFile(const std::string& path) {
  // SQLite's own messages for these are vague ("unable to open database file").
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists) {
    if (S_ISDIR(st.st_mode)) {
      return Status::Error(path + ": is a directory, not a state database file");
    }
    if (!S_ISREG(st.st_mode)) {
      return Status::Error(path + ": is not a regular file, so not a state database");
    }
    if (::access(path.c_str(), R_OK | W_OK) != 0) {
      return Status::Error(path + ": cannot open state database: " + std::strerror(errno));
    }
  } else if (errno != ENOENT) {
    return Status::Error(path + ": cannot open state database: " + std::strerror(errno));
  }
  // SQLite deletes the write-ahead log of a database file that is empty or missing, and with
  // it every transaction not yet checkpointed. Only an operator's mistake leaves that pair.
  if (!exists || st.st_size == 0) {
    const std::string wal = path + "-wal";
    struct stat wal_st;
    if (::stat(wal.c_str(), &wal_st) == 0 && wal_st.st_size > 0) {
      return Status::Error(path + ": is missing or empty, but its write-ahead log " + wal +
                           " holds " + std::to_string(wal_st.st_size) +
                           " bytes; it was left untouched: restore the database file or move "
                           "the log away");
    }
  }

  // NOMUTEX: the connection belongs to the daemon's one thread.
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  DbHandle db(raw);
  if (rc != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    int err = raw ? sqlite3_system_errno(raw) : 0;
    if (err != 0) message += std::string(" (") + std::strerror(err) + ")";
    return Status::Error(path + ": cannot open state database: " + message);
  }
  // Until the file has passed every check, closing must not checkpoint a WAL into it: a
  // damaged file is to be left exactly as it was found.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  // No SQL this connection runs may alter the file's structure behind SQLite's back.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);

  // Read-only checks first; nothing is written until all have passed. quick_check reads every
  // page, a few milliseconds for a state database of a few megabytes.
  auto version = QueryInt(raw, "PRAGMA user_version");
  if (!version.ok()) return DamageAtOpen(path, version.status().message());
  if (*version > kSchemaVersion) {
    return Status::Error(path + ": schema version " + std::to_string(*version) +
                         " is newer than this deployd understands (" +
                         std::to_string(kSchemaVersion) +
                         "); run a newer deployd or move the file away");
  }
  if (*version < 0) {
    return DamageAtOpen(path, "schema version " + std::to_string(*version) + " is not valid");
  }
  auto objects = QueryInt(raw, "SELECT count(*) FROM sqlite_master");
  if (!objects.ok()) return DamageAtOpen(path, objects.status().message());
  auto check = QueryColumn(raw, "PRAGMA quick_check(5)");
  if (!check.ok()) return DamageAtOpen(path, check.status().message());
  if (check->size() != 1 || check->front() != "ok") {
    std::string problems;
    for (std::string line : *check) {
      for (char& c : line) c = c == '\n' ? ' ' : c;
      problems += (problems.empty() ? "" : "; ") + line;
    }
    return DamageAtOpen(path, problems);
  }
  // SQLite reads a missing tail as zeros, which quick_check cannot always tell from data;
  // but it only ever writes whole pages, so a file that ends inside a page was cut short.
  auto page_size = QueryInt(raw, "PRAGMA page_size");
  if (!page_size.ok()) return DamageAtOpen(path, page_size.status().message());
  if (::stat(path.c_str(), &st) != 0) {
    return Status::Error(path + ": cannot open state database: " + std::strerror(errno));
  }
  if (*page_size <= 0 || st.st_size % *page_size != 0) {
    return DamageAtOpen(path, "it is " + std::to_string(st.st_size) +
                                  " bytes, not a whole number of " + std::to_string(*page_size) +
                                  "-byte pages: it was cut short");
  }
  if (*version == 0 && *objects > 0) {
    return Status::Error(path +
                         ": is not a deployd state database (it has tables but no schema "
                         "version); it was left untouched");
  }

  // A current schema is checked by preparing every statement against it, still read-only.
  std::unique_ptr<Statements> statements;
  if (*version == kSchemaVersion) {
    auto prepared = Statements::Prepare(raw);
    if (!prepared.ok()) return DamageAtOpen(path, prepared.status().message());
    statements = std::move(*prepared);
  }

  auto journal = QueryColumn(raw, "PRAGMA journal_mode = WAL");
  if (!journal.ok()) {
    return Status::Error(path +
                         ": cannot switch to WAL journal mode: " + journal.status().message());
  }
  if (journal->size() != 1 || journal->front() != "wal") {
    return Status::Error(path + ": cannot switch to WAL journal mode: it stays '" +
                         (journal->empty() ? std::string() : journal->front()) + "'");
  }
  // synchronous and foreign_keys belong to the connection, not the file: set them each time.
  for (const char* pragma : {"PRAGMA synchronous = FULL", "PRAGMA foreign_keys = ON"}) {
    if (Status s = Exec(raw, pragma); !s.ok()) {
      return Status::Error(path + ": cannot set " + pragma + ": " + s.message());
    }
  }

  if (*version < kSchemaVersion) {
    if (Status s = Migrate(raw, static_cast<int>(*version)); !s.ok()) {
      return Status::Error(path + ": cannot " +
                           (*version == 0
                                ? std::string("create the schema")
                                : "migrate the schema from version " + std::to_string(*version) +
                                      " to " + std::to_string(kSchemaVersion)) +
                           ": " + s.message());
    }
    auto prepared = Statements::Prepare(raw);
    if (!prepared.ok()) {
      return Status::Error(path +
                           ": the schema just created is unusable: " + prepared.status().message());
    }
    statements = std::move(*prepared);
  }

  sqlite3_db_config(raw, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, nullptr);
  return std::unique_ptr<RunStore>(new RunStore(path, db.release(), std::move(statements)));
}

Result<std::string> RunStore::CreateRun(RunRecord run) {
  return Guard(path_, "cannot create a run", [&] { return DoCreateRun(run); });
}

Result<std::string> RunStore::DoCreateRun(RunRecord& run) {
  auto fail = [&] { return SqlError(path_, db_, "cannot create a run of " + run.plan_name); };
  if (run.plan_name.empty()) return Status::Error(path_ + ": cannot create a run: no plan name");
  std::string vars = SerializeVars(run.vars);
  // The JSON parser refuses what the serializer lets through; refuse it now, not at every load.
  if (!ParseVars(vars)) {
    return Status::Error(path_ + ": cannot create a run of " + run.plan_name +
                         ": a variable is not valid UTF-8");
  }

  WriteTransaction txn(db_, stmts_->begin.get(), stmts_->commit.get(), stmts_->rollback.get());
  if (!txn.begun()) return fail();
  std::int64_t seq;
  {
    Use q(stmts_->next_run_seq.get());
    if (q.Step() != SQLITE_ROW) return fail();
    seq = q.Int(0);
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
        .Bind(11, run.evidence);
    if (q.Step() != SQLITE_DONE) return fail();
  }
  for (const StepRecord& step : run.steps) {
    Use q(stmts_->insert_step.get());
    BindStep(q, run.id, step);
    if (q.Step() != SQLITE_DONE) {
      return SqlError(path_, db_, "cannot create a run of " + run.plan_name + ": step " + step.id);
    }
  }
  {
    Use q(stmts_->insert_event.get());
    q.Bind(1, run.id)
        .Bind(2, run.created_at_ms)
        .Bind(3, std::string_view())
        .Bind(4, std::string_view("run.created"))
        .Bind(5, ToString(run.state))
        .Bind(6, "plan " + run.plan_name + " from " + run.plan_file);
    if (q.Step() != SQLITE_DONE) return fail();
  }
  if (!txn.Commit()) return fail();
  return run.id;
}

Status RunStore::Commit(const Transition& t) {
  return Guard(path_, "cannot commit a transition", [&] { return DoCommit(t); });
}

Status RunStore::DoCommit(const Transition& t) {
  // Built only on failure: Commit is on the daemon's critical path.
  auto what = [&] { return "cannot commit " + t.event.kind + " to run " + t.run_id; };
  if (t.event.kind.empty()) {
    return Status::Error(path_ + ": cannot commit to run " + t.run_id + ": the event has no kind");
  }

  WriteTransaction txn(db_, stmts_->begin.get(), stmts_->commit.get(), stmts_->rollback.get());
  if (!txn.begun()) return SqlError(path_, db_, what());
  {
    Use q(stmts_->insert_event.get());
    q.Bind(1, t.run_id)
        .Bind(2, t.at_ms != 0 ? t.at_ms : t.event.at_ms)
        .Bind(3, t.event.step_id)
        .Bind(4, t.event.kind)
        .Bind(5, t.event.state)
        .Bind(6, t.event.detail);
    if (q.Step() != SQLITE_DONE) return SqlError(path_, db_, what());
    if (sqlite3_changes(db_) != 1) return Status::Error(path_ + ": " + what() + ": no such run");
  }
  if (t.run_state || t.run_reason || t.run_evidence || t.run_finished_at_ms) {
    Use q(stmts_->update_run.get());
    q.Bind(1, t.run_id)
        .Bind(2,
              t.run_state ? std::optional<std::string_view>(ToString(*t.run_state)) : std::nullopt)
        .Bind(3, t.run_reason)
        .Bind(4, t.run_evidence)
        .Bind(5, t.run_finished_at_ms);
    if (q.Step() != SQLITE_DONE) return SqlError(path_, db_, what());
  }
  if (t.step) {
    const StepRecord& step = *t.step;
    Use q(stmts_->update_step.get());
    BindStep(q, t.run_id, step);
    if (q.Step() != SQLITE_DONE) return SqlError(path_, db_, what());
    if (sqlite3_changes(db_) != 1) {
      return Status::Error(path_ + ": " + what() + ": it has no step " + step.id + " at index " +
                           std::to_string(step.index));
    }
  }
  if (!txn.Commit()) return SqlError(path_, db_, what());
  return Status::Ok();
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

}  // namespace

Result<std::optional<RunRecord>> RunStore::LoadRun(const std::string& id, bool with_steps) {
  return Guard(path_, "cannot load a run", [&]() -> Result<std::optional<RunRecord>> {
    std::optional<RunRecord> run;
    {
      Use q(stmts_->select_run.get());
      q.Bind(1, id);
      int rc = q.Step();
      if (rc == SQLITE_DONE) return run;
      if (rc != SQLITE_ROW) return SqlError(path_, db_, "cannot load run " + id);
      auto read = ReadRun(path_, q);
      if (!read.ok()) return read.status();
      run = std::move(*read);
    }
    if (with_steps) {
      if (Status s = LoadSteps(path_, db_, stmts_->select_steps.get(), *run); !s.ok()) return s;
    }
    return run;
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
  return Guard(path_, "cannot list runs",
               [&] { return DoListRuns(stmts_->select_runs.get(), limit, with_steps); });
}

Result<std::vector<RunRecord>> RunStore::UnfinishedRuns() {
  return Guard(path_, "cannot list unfinished runs",
               [&] { return DoListRuns(stmts_->select_unfinished.get(), 0, true); });
}

Result<std::vector<std::string>> RunStore::ForgetRunsFinishedBefore(std::int64_t cutoff_ms) {
  return Guard(path_, "cannot forget old runs", [&]() -> Result<std::vector<std::string>> {
    auto fail = [&] { return SqlError(path_, db_, "cannot forget old runs"); };
    WriteTransaction txn(db_, stmts_->begin.get(), stmts_->commit.get(), stmts_->rollback.get());
    if (!txn.begun()) return fail();
    std::vector<std::string> ids;
    {
      sqlite3_stmt* raw = nullptr;
      if (sqlite3_prepare_v2(db_,
                             "SELECT id FROM runs WHERE state IN ('succeeded', 'failed', "
                             "'cancelled') AND finished_at_ms > 0 AND finished_at_ms < ?1",
                             -1, &raw, nullptr) != SQLITE_OK)
        return fail();
      std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> select(raw, sqlite3_finalize);
      sqlite3_bind_int64(raw, 1, cutoff_ms);
      int rc;
      while ((rc = sqlite3_step(raw)) == SQLITE_ROW)
        ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(raw, 0)));
      if (rc != SQLITE_DONE) return fail();
    }
    for (const char* sql :
         {"DELETE FROM events WHERE run_id = ?1", "DELETE FROM steps WHERE run_id = ?1",
          "DELETE FROM runs WHERE id = ?1"}) {
      sqlite3_stmt* raw = nullptr;
      if (sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr) != SQLITE_OK) return fail();
      std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> remove(raw, sqlite3_finalize);
      for (const std::string& id : ids) {
        sqlite3_bind_text(raw, 1, id.c_str(), -1, SQLITE_TRANSIENT);
        if (sqlite3_step(raw) != SQLITE_DONE) return fail();
        sqlite3_reset(raw);
      }
    }
    if (!txn.Commit()) return fail();
    return ids;
  });
}

Result<std::vector<EventRecord>> RunStore::Events(const std::string& run_id) {
  return Guard(path_, "cannot load events", [&]() -> Result<std::vector<EventRecord>> {
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
        return Damage(path_, "run " + run_id + " has event " + std::to_string(e.seq) + " where " +
                                 std::to_string(events.size() + 1) + " was expected");
      }
      events.push_back(std::move(e));
    }
    if (rc != SQLITE_DONE) return SqlError(path_, db_, "cannot load the events of run " + run_id);
    return events;
  });
}

Result<std::string> RunStore::ReadPragma(std::string_view name) {
  return Guard(path_, "cannot read a pragma", [&]() -> Result<std::string> {
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
