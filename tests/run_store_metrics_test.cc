// What the state database counts for deployd's metrics (store/store_metrics.h): the triggers of
// schema version 6, through real transitions committed to a real SQLite file.
#include <catch2/catch.hpp>
#include <map>

#include "store/run_store.h"
#include "store_test_support.h"
#include "test_support.h"

using namespace deployd;
using deployd::testing::MustOpen;
using deployd::testing::TempDir;

namespace {

// A run of `plan` with steps a, b, c.
std::string Create(RunStore& store, const std::string& plan) {
  RunRecord run;
  run.plan_name = plan;
  run.plan_file = plan + ".yaml";
  run.plan_text = "version: 1";
  for (const char* id : {"a", "b", "c"}) {
    StepRecord step;
    step.index = static_cast<int>(run.steps.size());
    step.id = id;
    run.steps.push_back(step);
  }
  Result<std::string> id = store.CreateRun(run);
  REQUIRE(id.ok());
  return id.value();
}

void Commit(RunStore& store, Transition t) {
  t.event.kind = t.step ? "step.state" : "run.state";
  if (t.step) t.event.step_id = t.step->id;
  Result<EventRecord> stored = store.Commit(t);
  INFO((stored.ok() ? std::string() : stored.status().message()));
  REQUIRE(stored.ok());
}

// Step `index` of the run (as "a", "b", "c") moves to `state`.
StepRecord Step(int index, StepState state, std::int64_t started, std::int64_t finished,
                std::string reason = "", std::string evidence = "",
                std::optional<int> exit_status = std::nullopt) {
  StepRecord s;
  s.index = index;
  s.id = std::string(1, static_cast<char>('a' + index));
  s.state = state;
  s.attempts = 1;
  s.started_at_ms = started;
  s.finished_at_ms = finished;
  s.reason = std::move(reason);
  s.evidence = std::move(evidence);
  s.exit_status = exit_status;
  return s;
}

void StepTo(RunStore& store, const std::string& run, StepRecord step) {
  Transition t;
  t.run_id = run;
  t.step = std::move(step);
  Commit(store, std::move(t));
}

void RunTo(RunStore& store, const std::string& run, RunState state, std::int64_t at,
           std::string reason = "") {
  Transition t;
  t.run_id = run;
  t.at_ms = at;
  t.run_state = state;
  t.run_reason = std::move(reason);
  if (IsTerminal(state)) t.run_finished_at_ms = at;
  Commit(store, std::move(t));
}

StoreMetrics Read(RunStore& store) {
  Result<StoreMetrics> m = store.ReadMetrics();
  INFO((m.ok() ? std::string() : m.status().message()));
  REQUIRE(m.ok());
  return m.value();
}

// "plan what" → count, of the counts that are there.
std::map<std::string, std::int64_t> Totals(const StoreMetrics& m) {
  std::map<std::string, std::int64_t> out;
  for (const auto& t : m.totals) out[t.plan + " " + t.what] = t.count;
  return out;
}

const StoreMetrics::StepDurations* Durations(const StoreMetrics& m, const std::string& step,
                                             const std::string& state) {
  for (const auto& d : m.durations)
    if (d.step == step && d.state == state) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("runs that end are counted by plan and state, and the last success's time kept",
          "[run_store][metrics]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  std::string r1 = Create(*store, "kimi"), r2 = Create(*store, "kimi"), r3 = Create(*store, "glm");
  RunTo(*store, r1, RunState::kRunning, 100);
  RunTo(*store, r1, RunState::kSucceeded, 1000);
  RunTo(*store, r2, RunState::kRunning, 1100);
  RunTo(*store, r2, RunState::kFailed, 2000, "preflight failed: command hf: not found on PATH");
  // A retried run counts again when it ends again; a state written twice counts once.
  RunTo(*store, r2, RunState::kRunning, 2100);
  RunTo(*store, r2, RunState::kSucceeded, 3000);
  RunTo(*store, r2, RunState::kSucceeded, 3000);
  RunTo(*store, r3, RunState::kPaused, 3100);

  StoreMetrics m = Read(*store);
  CHECK(Totals(m) == std::map<std::string, std::int64_t>{{"kimi failure.preflight", 1},
                                                         {"kimi run.failed", 1},
                                                         {"kimi run.succeeded", 2}});
  for (const auto& t : m.totals)
    if (t.what == "run.succeeded") CHECK(t.last_at_ms == 3000);
  REQUIRE(m.active.size() == 1);
  CHECK(m.active[0].plan == "glm");
  CHECK(m.active[0].state == "paused");
  CHECK(m.active[0].count == 1);
}

TEST_CASE("steps that fail are counted by why, from their record", "[run_store][metrics]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  auto fail = [&](const std::string& reason, const std::string& evidence,
                  std::optional<int> exit_status) {
    std::string run = Create(*store, "p");
    StepTo(*store, run, Step(0, StepState::kRunning, 10, 0));
    StepTo(*store, run, Step(0, StepState::kFailed, 10, 20, reason, evidence, exit_status));
  };
  fail("exit status 3", R"({"exit_status":3,"output_tail":[]})", 3);
  fail("background action exit status 1", "", 1);
  fail("timed out after 1s", R"({"timeout_ms":1000,"exit_status":143})", 143);
  fail("no progress for 2s (bytes under /w stuck at 1.0KiB)", R"({"stalled_for_ms":2100})", 143);
  fail("CUDA out of memory: torch.OutOfMemoryError", R"({"fail_on":"CUDA out of memory"})", 143);
  fail("verify failed: http GET http://127.0.0.1:1/: status 503 (expected 200)",
       R"({"check":"run","exit_status":1})", 0);
  fail("interrupted by a restart of deployd; not safe to repeat: …", "", std::nullopt);
  fail("cannot read secret HF_TOKEN", "", std::nullopt);
  fail("exit status 2", "not JSON", 2);
  CHECK(Totals(Read(*store)) == std::map<std::string, std::int64_t>{{"p failure.exit", 3},
                                                                    {"p failure.fail_on", 1},
                                                                    {"p failure.interrupted", 1},
                                                                    {"p failure.other", 1},
                                                                    {"p failure.stall", 1},
                                                                    {"p failure.timeout", 1},
                                                                    {"p failure.verify", 1},
                                                                    {"p stall", 1}});
}

TEST_CASE("every stall is counted, also one the step is retried after", "[run_store][metrics]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  std::string run = Create(*store, "dl");
  const std::string stalled = R"({"stalled_for_ms":3000,"stall_after_ms":3000})";
  StepTo(*store, run, Step(1, StepState::kRunning, 10, 0));
  // The stop is committed first, in the same state: it counts nothing yet.
  StepTo(*store, run, Step(1, StepState::kRunning, 10, 0, "", stalled));
  StepTo(*store, run, Step(1, StepState::kPending, 10, 0, "no progress for 3s", stalled));
  StepTo(*store, run, Step(1, StepState::kRunning, 10, 0));
  StepTo(*store, run, Step(1, StepState::kVerifying, 10, 0));
  StepTo(*store, run, Step(1, StepState::kPending, 10, 0, "no progress for 3s", stalled));
  StepTo(*store, run, Step(1, StepState::kRunning, 10, 0));
  StepTo(*store, run, Step(1, StepState::kSucceeded, 10, 9000));
  CHECK(Totals(Read(*store)) == std::map<std::string, std::int64_t>{{"dl stall", 2}});
}

TEST_CASE("step durations fall in buckets from 10ms to 8h, by plan, step and state",
          "[run_store][metrics]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  auto took = [&](int index, StepState state, std::int64_t ms) {
    std::string run = Create(*store, "p");
    StepTo(*store, run, Step(index, StepState::kRunning, 1000, 0));
    StepTo(*store, run, Step(index, state, 1000, 1000 + ms, "", "", 0));
  };
  took(0, StepState::kSucceeded, 10);        // on a bound: in its bucket
  took(0, StepState::kSucceeded, 11);        // just above: the next
  took(0, StepState::kSucceeded, 3600000);   // an hour
  took(0, StepState::kSucceeded, 40000000);  // above 8h: +Inf only
  took(1, StepState::kFailed, 0);
  {
    // Skipped or cancelled steps, and a step that never fired, have no duration.
    std::string run = Create(*store, "p");
    StepTo(*store, run, Step(2, StepState::kSkipped, 0, 500));
    StepTo(*store, run, Step(1, StepState::kRunning, 100, 0));
    StepTo(*store, run, Step(1, StepState::kCancelled, 100, 900));
    StepTo(*store, run, Step(0, StepState::kFailed, 0, 900, "cannot start"));
  }
  StoreMetrics m = Read(*store);
  const std::vector<std::int64_t> bounds = {10,      50,      250,      1000,    5000,   15000,
                                            30000,   60000,   120000,   300000,  600000, 1800000,
                                            3600000, 7200000, 14400000, 28800000};
  CHECK(m.duration_bounds_ms == bounds);
  const StoreMetrics::StepDurations* a = Durations(m, "a", "succeeded");
  REQUIRE(a != nullptr);
  CHECK(a->plan == "p");
  CHECK(a->count == 4);
  CHECK(a->sum_ms == 10 + 11 + 3600000 + 40000000);
  CHECK(a->cumulative == std::vector<std::int64_t>{1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3});
  const StoreMetrics::StepDurations* b = Durations(m, "b", "failed");
  REQUIRE(b != nullptr);
  CHECK(b->count == 1);
  CHECK(b->cumulative.front() == 1);
  CHECK(m.durations.size() == 2);
}

TEST_CASE("the benchmark figures are those of each plan's newest succeeded run",
          "[run_store][metrics]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  auto run_with = [&](const std::string& plan, double rate, RunState end, std::int64_t at) {
    std::string run = Create(*store, plan);
    std::string evidence =
        R"({"benchmark":{"tokens_per_s":)" + std::to_string(rate) + R"(},"baseline":{}})";
    StepTo(*store, run, Step(0, StepState::kRunning, 10, 0));
    StepTo(*store, run, Step(0, StepState::kSucceeded, 10, 20, "ok", ""));
    StepTo(*store, run, Step(1, StepState::kRunning, 10, 0));
    StepTo(*store, run, Step(1, StepState::kSucceeded, 10, 20, "ok", evidence));
    RunTo(*store, run, end, at);
    return run;
  };
  run_with("kimi", 50, RunState::kSucceeded, 1000);
  std::string newest = run_with("kimi", 57.5, RunState::kSucceeded, 2000);
  run_with("kimi", 20, RunState::kFailed, 3000);  // a failed run is never the figures' source
  run_with("glm", 30, RunState::kFailed, 3000);
  StoreMetrics m = Read(*store);
  REQUIRE(m.benchmarks.size() == 1);
  CHECK(m.benchmarks[0].plan == "kimi");
  CHECK(m.benchmarks[0].step == "b");
  CHECK(m.benchmarks[0].run == newest);
  CHECK(m.benchmarks[0].finished_at_ms == 2000);
  CHECK(m.benchmarks[0].evidence.find("57.5") != std::string::npos);
}

TEST_CASE("a plan's counts are forgotten with its last run, and only then",
          "[run_store][metrics]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  std::string old_run = Create(*store, "old");
  StepTo(*store, old_run, Step(0, StepState::kRunning, 10, 0));
  StepTo(*store, old_run, Step(0, StepState::kSucceeded, 10, 20));
  RunTo(*store, old_run, RunState::kSucceeded, 1000);
  std::string kept1 = Create(*store, "kept"), kept2 = Create(*store, "kept");
  RunTo(*store, kept1, RunState::kFailed, 1000, "step a failed");
  RunTo(*store, kept2, RunState::kSucceeded, 5000);
  REQUIRE(store->ForgetRunsFinishedBefore(2000).ok());
  StoreMetrics m = Read(*store);
  // The kept plan's counts survive the run that retention forgot.
  CHECK(Totals(m) ==
        std::map<std::string, std::int64_t>{{"kept run.failed", 1}, {"kept run.succeeded", 1}});
  CHECK(m.durations.empty());
}
