// RunStore's pages of runs (run_store_pages.cc) and its forgetting of one run or of the runs
// that finished before a time (schema version 7): filters, pages without gaps or repeats while
// runs are created between them, who applied a run, and run numbers never given twice.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "store/run_store.h"
#include "store_test_support.h"
#include "test_support.h"

using namespace deployd;
using deployd::testing::MustOpen;
using deployd::testing::TempDir;

namespace {

// A run of `plan` created at `created_at_ms`, of one step; its id.
std::string Create(RunStore& store, const std::string& plan, std::int64_t created_at_ms) {
  RunRecord run;
  run.plan_name = plan;
  run.plan_file = plan + ".yaml";
  run.plan_text = "version: 1\nname: " + plan + "\nsteps:\n  - id: a\n    run: 'true'\n";
  run.created_at_ms = created_at_ms;
  run.applied_by = "alice (uid 1000)";
  StepRecord step;
  step.id = "a";
  run.steps.push_back(step);
  Result<std::string> id = store.CreateRun(run);
  REQUIRE(id.ok());
  return id.value();
}

void Finish(RunStore& store, const std::string& id, RunState state, std::int64_t at_ms) {
  Transition t;
  t.run_id = id;
  t.at_ms = at_ms;
  t.run_state = state;
  t.run_finished_at_ms = at_ms;
  t.event.kind = "run.state";
  t.event.state = std::string(ToString(state));
  REQUIRE(store.Commit(t).ok());
}

std::vector<std::string> Ids(const RunPage& page) {
  std::vector<std::string> ids;
  for (const RunRecord& run : page.runs) ids.push_back(run.id);
  return ids;
}

RunPage MustFind(RunStore& store, const RunFilter& filter) {
  Result<RunPage> page = store.FindRuns(filter, false);
  INFO((page.ok() ? std::string() : page.status().message()));
  REQUIRE(page.ok());
  return std::move(page.value());
}

}  // namespace

TEST_CASE("runs are found newest first, by plan, state and creation time", "[run_store]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  for (int i = 1; i <= 6; ++i) Create(*store, i % 2 ? "kimi" : "glm", 1000 * i);
  Finish(*store, "kimi-1", RunState::kFailed, 1500);
  Finish(*store, "kimi-5", RunState::kFailed, 5500);
  Finish(*store, "glm-2", RunState::kSucceeded, 2500);

  RunFilter all;
  all.limit = 10;
  RunPage page = MustFind(*store, all);
  CHECK(Ids(page) ==
        std::vector<std::string>{"glm-6", "kimi-5", "glm-4", "kimi-3", "glm-2", "kimi-1"});
  CHECK(page.next_before_seq == 0);
  CHECK(page.runs[0].applied_by == "alice (uid 1000)");
  CHECK(page.runs[0].steps.empty());  // asked without them

  RunFilter kimi = all;
  kimi.plan = "kimi";
  CHECK(Ids(MustFind(*store, kimi)) == std::vector<std::string>{"kimi-5", "kimi-3", "kimi-1"});
  kimi.state = RunState::kFailed;
  CHECK(Ids(MustFind(*store, kimi)) == std::vector<std::string>{"kimi-5", "kimi-1"});
  RunFilter failed = all;
  failed.state = RunState::kFailed;
  failed.since_ms = 2000;
  CHECK(Ids(MustFind(*store, failed)) == std::vector<std::string>{"kimi-5"});
  RunFilter pending = all;
  pending.state = RunState::kPending;
  pending.before_seq = 4;
  CHECK(Ids(MustFind(*store, pending)) == std::vector<std::string>{"kimi-3"});
  RunFilter nothing = all;
  nothing.plan = "nope";
  CHECK(MustFind(*store, nothing).runs.empty());
}

TEST_CASE("pages follow one another without gaps or repeats", "[run_store]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  for (int i = 1; i <= 7; ++i) Create(*store, "demo", 1000 * i);
  RunFilter filter;
  filter.limit = 3;
  std::vector<std::string> seen;
  for (int pages = 0; pages < 10; ++pages) {
    RunPage page = MustFind(*store, filter);
    for (const RunRecord& run : page.runs) seen.push_back(run.id);
    // A run created meanwhile is newer than every page: it changes none of those to come.
    Create(*store, "demo", 100'000 + pages);
    if (page.next_before_seq == 0) break;
    CHECK(page.runs.size() == 3);
    filter.before_seq = page.next_before_seq;
  }
  CHECK(seen == std::vector<std::string>{"demo-7", "demo-6", "demo-5", "demo-4", "demo-3", "demo-2",
                                         "demo-1"});
}

TEST_CASE("one finished run is forgotten by id, one going on never is", "[run_store]") {
  TempDir dir;
  const std::string path = dir.File("deployd.db");
  {
    auto store = MustOpen(path);
    Create(*store, "demo", 1000);
    Create(*store, "demo", 2000);
    Create(*store, "demo", 3000);
    Finish(*store, "demo-1", RunState::kSucceeded, 1500);
    Finish(*store, "demo-3", RunState::kCancelled, 3500);

    Result<std::vector<std::string>> open = store->ForgetRun("demo-2");
    REQUIRE(open.ok());
    CHECK(open.value().empty());
    CHECK(store->LoadRun("demo-2")->has_value());
    Result<std::vector<std::string>> none = store->ForgetRun("nope-1");
    REQUIRE(none.ok());
    CHECK(none.value().empty());

    Result<std::vector<std::string>> newest = store->ForgetRun("demo-3");
    REQUIRE(newest.ok());
    CHECK(newest.value() == std::vector<std::string>{"demo-3"});
    CHECK_FALSE(store->LoadRun("demo-3")->has_value());
    CHECK(store->Events("demo-3")->empty());
    // The newest run forgotten, its number is not given to the next one.
    CHECK(Create(*store, "demo", 4000) == "demo-4");
  }
  // Nor after a restart.
  auto store = MustOpen(path);
  CHECK(Create(*store, "demo", 5000) == "demo-5");
}

TEST_CASE("the runs finished before a cutoff are forgotten oldest first, a batch at a time",
          "[run_store]") {
  TempDir dir;
  auto store = MustOpen(dir.File("deployd.db"));
  for (int i = 1; i <= 5; ++i) Create(*store, "demo", 1000 * i);
  for (int i = 1; i <= 4; ++i)
    Finish(*store, "demo-" + std::to_string(i), RunState::kFailed, 10'000);
  Result<std::vector<std::string>> first = store->ForgetRunsFinishedBefore(20'000, 3);
  REQUIRE(first.ok());
  CHECK(first.value() == std::vector<std::string>{"demo-1", "demo-2", "demo-3"});
  Result<std::vector<std::string>> rest = store->ForgetRunsFinishedBefore(20'000, 3);
  REQUIRE(rest.ok());
  CHECK(rest.value() == std::vector<std::string>{"demo-4"});
  RunFilter all;
  all.limit = 10;
  CHECK(Ids(MustFind(*store, all)) == std::vector<std::string>{"demo-5"});
}
