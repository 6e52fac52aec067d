// The reads of a plan's history: its runs in order, and the figures a step recorded in the
// last run that succeeded (a benchmark's baseline). Statements prepared per call: they serve
// `deployctl history` and one lookup per benchmark, not the daemon's critical path.
#include <sqlite3.h>

#include "store/run_store.h"
#include "store/sqlite_statement.h"
#include "store/store_errors.h"

namespace deployd {
namespace {

using sqlite::SqlError;
using sqlite::Statement;
using sqlite::Use;

Result<Statement> Prepare(const std::string& path, sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK)
    return SqlError(path, db, "cannot read the history");
  return Statement(stmt);
}

}  // namespace

Result<std::vector<RunRecord>> RunStore::RunsOfPlan(const std::string& plan, int limit) {
  return ExceptionsAsStatus(
      path_, "cannot read the history", [&]() -> Result<std::vector<RunRecord>> {
        Result<Statement> select = Prepare(
            path_, db_, "SELECT id FROM runs WHERE plan_name = ?1 ORDER BY seq DESC LIMIT ?2");
        if (!select.ok()) return select.status();
        std::vector<std::string> ids;
        {
          Use q(select->get());
          q.Bind(1, plan).Bind(2, std::int64_t{limit > 0 ? limit : -1});
          int rc;
          while ((rc = q.Step()) == SQLITE_ROW) ids.push_back(q.Text(0));
          if (rc != SQLITE_DONE) return SqlError(path_, db_, "cannot read the runs of " + plan);
        }
        std::vector<RunRecord> runs;
        for (const std::string& id : ids) {
          Result<std::optional<RunRecord>> run = LoadRun(id, true);
          if (!run.ok()) return run.status();
          if (*run) runs.push_back(std::move(**run));
        }
        return runs;
      });
}

Result<std::optional<RunStore::StepEvidence>> RunStore::LastSucceededEvidence(
    const std::string& plan, const std::string& step_id, const std::string& key) {
  return ExceptionsAsStatus(path_, "cannot read the history",
                            [&]() -> Result<std::optional<StepEvidence>> {
                              // CASE: json_type() of text that is not JSON (a step's evidence may
                              // be '') is an error.
                              Result<Statement> select = Prepare(path_, db_, R"sql(
SELECT r.id, s.evidence FROM runs r JOIN steps s ON s.run_id = r.id
WHERE r.plan_name = ?1 AND r.state = 'succeeded' AND s.id = ?2 AND s.state = 'succeeded'
  AND CASE WHEN json_valid(s.evidence) THEN json_type(s.evidence, ?3) END IS NOT NULL
ORDER BY r.seq DESC LIMIT 1)sql");
                              if (!select.ok()) return select.status();
                              Use q(select->get());
                              q.Bind(1, plan).Bind(2, step_id).Bind(3, "$." + key);
                              int rc = q.Step();
                              std::optional<StepEvidence> found;
                              if (rc == SQLITE_ROW) {
                                found = StepEvidence{q.Text(0), q.Text(1)};
                              } else if (rc != SQLITE_DONE) {
                                return SqlError(path_, db_, "cannot read the last run of " + plan);
                              }
                              return found;
                            });
}

}  // namespace deployd
