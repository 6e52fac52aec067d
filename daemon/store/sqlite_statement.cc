#include "store/sqlite_statement.h"

#include <cstdlib>

namespace deployd::sqlite {

Status SqlError(const std::string& path, sqlite3* db, std::string_view what) {
  return Status::Error(path + ": " + std::string(what) + ": " + sqlite3_errmsg(db));
}

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

}  // namespace deployd::sqlite
