// RunStore: the files under the connection. A write that fails is told apart — the storage would
// not take it now (a full disk, an I/O error) or the files are gone — and before each write the
// database's and its write-ahead log's paths are checked to still name the files this
// connection writes to. SQLite keeps writing to a file that was deleted under it, and a crash
// then loses all of it; so deployd stops instead, after saving what the connection can still
// read.
#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "store/run_store.h"
#include "store/sqlite_statement.h"
#include "util/clock.h"

namespace deployd {
namespace {

// SQLite's result codes by what deployd can do about them.
RunStore::Failure Classify(int extended_code) {
  switch (extended_code & 0xff) {
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL:
      return RunStore::Failure::kStorage;
    case SQLITE_READONLY:
      // SQLite's own finding that the database file was deleted or renamed since it was opened.
      return extended_code == SQLITE_READONLY_DBMOVED ? RunStore::Failure::kFilesLost
                                                      : RunStore::Failure::kStorage;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return RunStore::Failure::kFilesLost;
    default:
      return RunStore::Failure::kRefused;
  }
}

}  // namespace

// What `path` names now, or nothing (deleted, renamed away). While the connection holds a file
// open its inode cannot be reused, so another pair means another file.
std::optional<RunStore::FileId> RunStore::IdOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

void RunStore::RememberFiles() {
  db_file_ = IdOf(path_);
  wal_file_ = IdOf(path_ + "-wal");
}

Status RunStore::WriteError(std::string_view what) {
  const int code = sqlite3_extended_errcode(db_);
  const int err = sqlite3_system_errno(db_);
  std::string message = path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_);
  if (err != 0) message += std::string(" (") + std::strerror(err) + ")";
  last_failure_ = Classify(code);
  if (last_failure_ == Failure::kFilesLost) {
    // Another finding of CheckFiles() explains better what happened, and saves what is left.
    if (Status files = CheckFiles(); !files.ok()) return files;
    lost_ = message + "; nothing more is written to it";
    sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  }
  return Status::Error(message);
}

Status RunStore::BeforeWrite() {
  Status s = CheckFiles();
  if (!s.ok()) last_failure_ = Failure::kFilesLost;
  return s;
}

Status RunStore::CheckFiles() {
  if (lost_) return Status::Error(*lost_);
  const std::string wal = path_ + "-wal";
  // The log is created by the first transaction when the database was new.
  if (!wal_file_) wal_file_ = IdOf(wal);
  const std::optional<FileId> db_now = IdOf(path_);
  const std::optional<FileId> wal_now = wal_file_ ? IdOf(wal) : std::nullopt;
  const bool db_gone = db_file_ && db_now != db_file_;
  const bool wal_gone = wal_file_ && wal_now != wal_file_;
  if (!db_gone && !wal_gone) return Status::Ok();
  const std::string& which = db_gone ? path_ : wal;
  const bool replaced = db_gone ? db_now.has_value() : wal_now.has_value();
  lost_ = which + (replaced ? " was replaced by another file" : " was deleted") +
          " while deployd was running; nothing more is written to the state database: " +
          SaveWhatIsLeft(db_gone);
  // Closing would checkpoint into, and then delete, files that are not this connection's.
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  return Status::Error(*lost_);
}

std::string RunStore::SaveWhatIsLeft(bool database_gone) {
  if (!database_gone) {
    // The deleted log is still open here: what it holds goes into the database file.
    int log_frames = 0, done = 0;
    int rc =
        sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log_frames, &done);
    if (rc == SQLITE_OK)
      return "everything committed until now was written into " + path_ +
             "; start deployd again to go on";
    return "what the log held could not be written into " + path_ + " (" + sqlite3_errmsg(db_) +
           "): the runs committed since the last checkpoint are lost";
  }
  // The database is still open here, deleted or not: a copy of it is what can be saved.
  const std::string saved = path_ + ".saved-" + std::to_string(NowMs());
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_, "VACUUM INTO ?1", -1, &raw, nullptr);
  sqlite::Statement vacuum(raw);
  if (rc == SQLITE_OK) {
    sqlite::Use q(vacuum.get());
    q.Bind(1, saved);
    rc = q.Step();
  }
  if (rc == SQLITE_DONE)
    return "the runs it held were saved to " + saved + ": put that file back as " + path_ +
           " and start deployd again";
  return std::string("the runs it held could not be saved (") + sqlite3_errmsg(db_) +
         "): restore " + path_ + " from a backup, or start deployd with --new-state";
}

}  // namespace deployd
