// The pages of `deployctl runs`: the runs a filter selects, newest first, a page at a time.
// The statement is written for the filters given, so that SQLite reads the index that fits
// (schema version 7: by plan, by state, by creation time; the run numbers' own otherwise)
// rather than every row; prepared per call, since it serves deployctl, not the daemon's
// critical path.
#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include "store/run_store.h"
#include "store/sqlite_statement.h"
#include "store/store_errors.h"

namespace deployd {

using sqlite::SqlError;
using sqlite::Statement;
using sqlite::Use;

Result<RunPage> RunStore::FindRuns(const RunFilter& filter, bool with_steps) {
  return ExceptionsAsStatus(path_, "cannot list runs", [&]() -> Result<RunPage> {
    // Only the run numbers are read here; the page's runs are loaded by id after.
    std::string sql = "SELECT id, seq FROM runs WHERE 1";
    if (filter.plan) sql += " AND plan_name = ?2";
    if (filter.state) sql += " AND state = ?3";
    if (filter.since_ms > 0) sql += " AND created_at_ms >= ?4";
    if (filter.before_seq > 0) sql += " AND seq < ?5";
    // One more than the page holds says whether another page follows.
    sql += " ORDER BY seq DESC LIMIT ?1";
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK)
      return SqlError(path_, db_, "cannot list runs");
    Statement select(raw);
    std::vector<std::pair<std::string, std::int64_t>> found;
    {
      Use q(raw);
      q.Bind(1, std::int64_t{filter.limit} + 1);
      if (filter.plan) q.Bind(2, *filter.plan);
      if (filter.state) q.Bind(3, ToString(*filter.state));
      if (filter.since_ms > 0) q.Bind(4, filter.since_ms);
      if (filter.before_seq > 0) q.Bind(5, filter.before_seq);
      int rc;
      while ((rc = q.Step()) == SQLITE_ROW) found.emplace_back(q.Text(0), q.Int(1));
      if (rc != SQLITE_DONE) return SqlError(path_, db_, "cannot list runs");
    }
    RunPage page;
    if (found.size() > static_cast<size_t>(filter.limit)) {
      found.pop_back();
      page.next_before_seq = found.back().second;
    }
    for (const auto& [id, seq] : found) {
      Result<std::optional<RunRecord>> run = LoadRun(id, with_steps);
      if (!run.ok()) return run.status();
      if (*run) page.runs.push_back(std::move(**run));
    }
    return page;
  });
}

}  // namespace deployd
