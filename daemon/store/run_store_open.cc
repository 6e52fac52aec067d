// RunStore::Open: a state database file checked before anything is written to it — what the
// path is, a write-ahead log without its database, the schema version, quick_check, a file cut
// short inside a page, the statements against a current schema — and only then switched to WAL,
// configured and migrated. A refused file is left exactly as it was found.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "store/run_store.h"
#include "store/run_store_statements.h"
#include "store/schema.h"
#include "store/sqlite_statement.h"
#include "store/store_errors.h"

namespace deployd {
namespace {

using sqlite::DbHandle;
using sqlite::Exec;
using sqlite::QueryColumn;
using sqlite::QueryInt;

// Only an operator holding the file open in the sqlite3 shell can make us wait; a short wait
// rides that out without stalling the daemon's one thread for long.
constexpr int kBusyTimeoutMs = 1000;

// What the path is, before SQLite touches it: its own messages for these are vague ("unable to
// open database file").
Status CheckPath(const std::string& path) {
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
  return Status::Ok();
}

// A connection that cannot change the file until the checks have passed.
Result<DbHandle> Connect(const std::string& path) {
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
  return db;
}

// The file's schema version, once the file has passed every read-only check.
Result<std::int64_t> CheckIntact(const std::string& path, sqlite3* raw) {
  // Read-only checks first; nothing is written until all have passed. quick_check reads every
  // page, a few milliseconds for a state database of a few megabytes.
  auto version = QueryInt(raw, "PRAGMA user_version");
  if (!version.ok()) return StoreDamageAtOpen(path, version.status().message());
  if (*version > RunStore::kSchemaVersion) {
    return Status::Error(path + ": schema version " + std::to_string(*version) +
                         " is newer than this deployd understands (" +
                         std::to_string(RunStore::kSchemaVersion) +
                         "); run a newer deployd or move the file away");
  }
  if (*version < 0) {
    return StoreDamageAtOpen(path, "schema version " + std::to_string(*version) + " is not valid");
  }
  auto objects = QueryInt(raw, "SELECT count(*) FROM sqlite_master");
  if (!objects.ok()) return StoreDamageAtOpen(path, objects.status().message());
  auto check = QueryColumn(raw, "PRAGMA quick_check(5)");
  if (!check.ok()) return StoreDamageAtOpen(path, check.status().message());
  if (check->size() != 1 || check->front() != "ok") {
    std::string problems;
    for (std::string line : *check) {
      for (char& c : line) c = c == '\n' ? ' ' : c;
      problems += (problems.empty() ? "" : "; ") + line;
    }
    return StoreDamageAtOpen(path, problems);
  }
  // SQLite reads a missing tail as zeros, which quick_check cannot always tell from data;
  // but it only ever writes whole pages, so a file that ends inside a page was cut short.
  auto page_size = QueryInt(raw, "PRAGMA page_size");
  if (!page_size.ok()) return StoreDamageAtOpen(path, page_size.status().message());
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::Error(path + ": cannot open state database: " + std::strerror(errno));
  }
  if (*page_size <= 0 || st.st_size % *page_size != 0) {
    return StoreDamageAtOpen(
        path, "it is " + std::to_string(st.st_size) + " bytes, not a whole number of " +
                  std::to_string(*page_size) + "-byte pages: it was cut short");
  }
  if (*version == 0 && *objects > 0) {
    return Status::Error(path +
                         ": is not a deployd state database (it has tables but no schema "
                         "version); it was left untouched");
  }
  return *version;
}

// WAL, synchronous=FULL, foreign keys: what every connection to the file runs with.
Status Configure(const std::string& path, sqlite3* raw) {
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
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<RunStore>> RunStore::Open(const std::string& path) {
  return ExceptionsAsStatus(path, "cannot open state database", [&] {
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
  if (Status s = CheckPath(path); !s.ok()) return s;
  auto db = Connect(path);
  if (!db.ok()) return db.status();
  sqlite3* raw = db->get();
  auto version = CheckIntact(path, raw);
  if (!version.ok()) return version.status();

  // A current schema is checked by preparing every statement against it, still read-only.
  std::unique_ptr<Statements> statements;
  if (*version == kSchemaVersion) {
    auto prepared = Statements::Prepare(raw);
    if (!prepared.ok()) return StoreDamageAtOpen(path, prepared.status().message());
    statements = std::move(*prepared);
  }

  if (Status s = Configure(path, raw); !s.ok()) return s;
  if (*version < kSchemaVersion) {
    if (Status s = MigrateSchema(raw, static_cast<int>(*version)); !s.ok()) {
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
  return std::unique_ptr<RunStore>(new RunStore(path, db->release(), std::move(statements)));
}

}  // namespace deployd
