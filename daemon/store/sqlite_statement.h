// Thin ownership over SQLite's C API for the store: a connection handle, prepared statements,
// one use of a statement (bind, step, read columns, reset), a write transaction that rolls back
// unless committed, and one-off queries. Not thread-safe: like the connection it is used on,
// it belongs to one thread.
#ifndef DEPLOYD_STORE_SQLITE_STATEMENT_H_
#define DEPLOYD_STORE_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deployd/status.h"

namespace deployd::sqlite {

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

// The first column of every row of `sql`, as text; on failure, sqlite's message.
Result<std::vector<std::string>> QueryColumn(sqlite3* db, const std::string& sql);
// The one value `sql` returns, as an integer.
Result<std::int64_t> QueryInt(sqlite3* db, const std::string& sql);
// Runs `sql` (one or more statements) for its effect; on failure, sqlite's message.
Status Exec(sqlite3* db, const char* sql);

// "<path>: <what>: <sqlite's message>"; call before anything else touches the connection.
Status SqlError(const std::string& path, sqlite3* db, std::string_view what);

}  // namespace deployd::sqlite

#endif  // DEPLOYD_STORE_SQLITE_STATEMENT_H_
