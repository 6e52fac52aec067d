// deployctl runs and status: the list of runs (ctl_records.cc asks for them), and one run with
// its steps, as tables (or the JSON deployd answered with).
#include <algorithm>
#include <boost/json.hpp>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/terminal_screen.h"
#include "ctl/watch_view.h"
#include "deployd/protocol.h"
#include "protocol/run_wire.h"
#include "util/clock.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// The widest a column of ids gets on a terminal (a longer id is cut, with "…").
constexpr size_t kStepColumn = 24;
constexpr size_t kRunColumn = 28;
constexpr size_t kPlanColumn = 20;

// A table's line: each cell fitted to its width, then the last column as it is. The cell at
// `state` (if any) holds a state, painted when colours may be used.
std::string Row(const std::vector<std::pair<std::string, size_t>>& cells, const std::string& last,
                int state = -1) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string cell = FitCell(cells[i].first, cells[i].second);
    if (static_cast<int>(i) == state && StdoutStyle().color) cell = Paint(cell, cells[i].first);
    line += cell + " ";
  }
  line += last;
  line.erase(line.find_last_not_of(' ') + 1);
  return line;
}

void PrintRun(const WireRun& run) {
  std::cout << "run:     " << run.id << " (plan " << run.plan << ", from " << run.plan_file
            << ")\n";
  std::cout << "state:   " << (StdoutStyle().color ? Paint(run.state, run.state) : run.state);
  if (!run.reason.empty()) std::cout << ": " << run.reason;
  if (!run.storage_fault.empty()) std::cout << "\nstorage: deployd " << run.storage_fault;
  const std::int64_t now = NowMs();
  std::cout << "\ncreated: " << When(run.created_at_ms, now);
  if (run.finished_at_ms)
    std::cout << ", took " << FormatElapsed(run.finished_at_ms - run.created_at_ms);
  std::cout << "\n\n";
  size_t longest = 4;
  for (const WireStep& s : run.steps) longest = std::max(longest, TextWidth(s.id));
  // STATE, ATTEMPTS and TIME, and a little of DETAIL, stay on a narrow terminal.
  size_t id = IdColumnWidth(longest, kStepColumn, ScreenWidth(), 10 + 8 + 8 + 4 + 12);
  std::cout << Row({{"STEP", id}, {"STATE", 10}, {"ATTEMPTS", 8}, {"TIME", 8}}, "DETAIL") << "\n";
  for (const WireStep& s : run.steps) {
    std::int64_t start = s.started_at_ms;
    std::int64_t end = s.finished_at_ms;
    // A step that has not ended yet: its time so far.
    std::string time =
        start ? FormatElapsed(std::max<std::int64_t>(0, (end ? end : now) - start)) : "-";
    std::string detail = s.reason;
    // Who runs a running step: the pid to look at with ps, strace or py-spy.
    if (s.state == "running" && s.pid)
      detail = "pid " + std::to_string(*s.pid) + (detail.empty() ? "" : "; " + detail);
    if (s.phase == "on_failure") detail = "(on_failure) " + detail;
    std::cout << Row({{s.id, id}, {s.state, 10}, {std::to_string(s.attempts), 8}, {time, 8}},
                     detail, 1)
              << "\n";
  }
  for (const WireStep& s : run.steps) {
    if (!s.evidence || !s.evidence->is_object()) continue;
    std::string line = BenchmarkLine(s.evidence->as_object());
    if (!line.empty()) std::cout << "\nbenchmark of " << s.id << ": " << line << "\n";
  }
  std::cout.flush();
}

void PrintRuns(const json::array& listed) {
  std::vector<WireRun> runs;
  size_t longest_run = 3, longest_plan = 4;
  for (const auto& rv : listed) {
    runs.push_back(DecodeRun(rv.as_object()));
    longest_run = std::max(longest_run, TextWidth(runs.back().id));
    longest_plan = std::max(longest_plan, TextWidth(runs.back().plan));
  }
  // STATE and CREATED, and a little of REASON, stay on a narrow terminal; RUN and PLAN share
  // what is left, each by what it would take.
  constexpr size_t kCreated = 30;  // "2026-11-30 17:01:51 (12m ago)"
  constexpr size_t kRest = 10 + kCreated + 4 + 12;
  int width = ScreenWidth();
  size_t id = IdColumnWidth(longest_run, kRunColumn, width, kRest);
  size_t plan = IdColumnWidth(longest_plan, kPlanColumn, width, kRest);
  if (width > 0 && id + 1 + plan + kRest > static_cast<size_t>(width)) {
    size_t both = static_cast<size_t>(width) > kRest + 17 ? width - kRest - 1 : 16;
    size_t plan_share = both * plan / (id + plan);
    id = std::max<size_t>(8, both - plan_share);
    plan = std::max<size_t>(8, plan_share);
  }
  const std::int64_t now = NowMs();
  std::cout << Row({{"RUN", id}, {"PLAN", plan}, {"STATE", 10}, {"CREATED", kCreated}}, "REASON")
            << "\n";
  for (const WireRun& r : runs)
    std::cout
        << Row({{r.id, id}, {r.plan, plan}, {r.state, 10}, {When(r.created_at_ms, now), kCreated}},
               r.reason, 2)
        << "\n";
}

}  // namespace

int ListRuns(Client& client, const RunsQuery& query, bool json_out) {
  RunsFound found = FindRuns(client, query);
  if (json_out) {
    std::cout << json::serialize(found.runs) << "\n";
  } else {
    PrintRuns(found.runs);
  }
  // How to see more goes to stderr, after the list: what a script reads stays the list.
  std::cout.flush();
  if (found.next) std::cerr << MoreRunsHint(query, found.next) << "\n";
  return kExitOk;
}

int ShowStatus(Client& client, const std::string& run_id, bool json_out) {
  json::object answer = client.Call({{"op", "status"}, {"run", run_id}});
  const json::object& run_json = answer["run"].as_object();
  WireRun run = DecodeRun(run_json);
  if (json_out) {
    std::cout << json::serialize(run_json) << "\n";
  } else {
    PrintRun(run);
  }
  return ExitFor(run.state);
}

}  // namespace deployd::ctl
