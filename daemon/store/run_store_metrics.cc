// The reads of deployd's metrics (store_metrics.h): the counts the triggers keep, the unfinished
// runs (by index), and the benchmark steps of each plan's newest succeeded run (by index). One
// thread writes, and it is the one reading, so the reads agree with each other. Statements
// prepared per call: a scrape comes every few seconds at most, not on the critical path.
#include <sqlite3.h>

#include <algorithm>
#include <functional>

#include "store/run_store.h"
#include "store/sqlite_statement.h"
#include "store/store_errors.h"

namespace deployd {
namespace {

using sqlite::SqlError;
using sqlite::Statement;
using sqlite::Use;

constexpr const char* kWhat = "cannot read the metrics";

// Runs `sql` and calls `row` with each row.
Status EachRow(const std::string& path, sqlite3* db, const std::string& sql,
               const std::function<void(const Use&)>& row) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK)
    return SqlError(path, db, kWhat);
  Statement statement(raw);
  Use q(statement.get());
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) row(q);
  if (rc != SQLITE_DONE) return SqlError(path, db, kWhat);
  return Status::Ok();
}

// 'pending', 'running', … : the states of runs that have not finished.
std::string UnfinishedStates() {
  std::string list;
  for (RunState state :
       {RunState::kPending, RunState::kRunning, RunState::kPaused, RunState::kWaiting,
        RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    if (IsTerminal(state)) continue;
    list += (list.empty() ? "'" : ", '") + std::string(ToString(state)) + "'";
  }
  return list;
}

// The rows of step_durations, one bucket each, ordered by series, become series with
// cumulative counts over `bounds`.
void AddDurationRow(const Use& q, const std::vector<std::int64_t>& bounds,
                    std::vector<StoreMetrics::StepDurations>& series) {
  std::string plan = q.Text(0), step = q.Text(1), state = q.Text(2);
  if (series.empty() || series.back().plan != plan || series.back().step != step ||
      series.back().state != state)
    series.push_back({plan, step, state, std::vector<std::int64_t>(bounds.size(), 0), 0, 0});
  StoreMetrics::StepDurations& s = series.back();
  const std::int64_t le_ms = q.Int(3), count = q.Int(4);
  s.count += count;
  s.sum_ms += q.Int(5);
  if (le_ms < 0) return;  // above every bound: only in the +Inf bucket
  for (size_t i = std::lower_bound(bounds.begin(), bounds.end(), le_ms) - bounds.begin();
       i < bounds.size(); ++i)
    s.cumulative[i] += count;
}

}  // namespace

Result<StoreMetrics> RunStore::ReadMetrics() {
  return ExceptionsAsStatus(path_, kWhat, [&]() -> Result<StoreMetrics> {
    StoreMetrics m;
    Status s = EachRow(path_, db_, "SELECT le_ms FROM step_duration_bounds ORDER BY le_ms",
                       [&](const Use& q) { m.duration_bounds_ms.push_back(q.Int(0)); });
    if (s.ok())
      s = EachRow(path_, db_,
                  "SELECT plan_name, what, count, last_at_ms FROM plan_totals "
                  "ORDER BY plan_name, what",
                  [&](const Use& q) {
                    m.totals.push_back({q.Text(0), q.Text(1), q.Int(2), q.Int(3)});
                  });
    if (s.ok())
      s = EachRow(path_, db_,
                  "SELECT plan_name, step_id, state, le_ms, count, sum_ms FROM step_durations "
                  "ORDER BY plan_name, step_id, state, le_ms",
                  [&](const Use& q) { AddDurationRow(q, m.duration_bounds_ms, m.durations); });
    if (s.ok())
      s = EachRow(path_, db_,
                  "SELECT plan_name, state, COUNT(*) FROM runs WHERE state IN (" +
                      UnfinishedStates() + ") GROUP BY plan_name, state ORDER BY plan_name, state",
                  [&](const Use& q) {
                    m.active.push_back({q.Text(0), q.Text(1), q.Int(2)});
                  });
    // CASE: json_type() of text that is not JSON (a step's evidence may be '') is an error.
    if (s.ok())
      s = EachRow(path_, db_, R"sql(
SELECT r.plan_name, s.id, r.id, r.finished_at_ms, s.evidence
FROM (SELECT plan_name FROM plan_totals WHERE what = 'run.succeeded') p
JOIN runs r ON r.id = (SELECT id FROM runs WHERE plan_name = p.plan_name AND state = 'succeeded'
                       ORDER BY seq DESC LIMIT 1)
JOIN steps s ON s.run_id = r.id
WHERE s.state = 'succeeded'
  AND CASE WHEN json_valid(s.evidence) THEN json_type(s.evidence, '$.benchmark') END = 'object'
ORDER BY r.plan_name, s.idx)sql",
                  [&](const Use& q) {
                    m.benchmarks.push_back({q.Text(0), q.Text(1), q.Text(2), q.Int(3), q.Text(4)});
                  });
    if (!s.ok()) return s;
    return m;
  });
}

}  // namespace deployd
