// A plan's history (store/run_store_history.cc, control/history_report.h,
// engine/benchmark_baseline.h): the runs of a plan in order, the figures a step recorded in the
// last run that succeeded (a benchmark's baseline), and the `history` request, on a real
// SQLite file.
#include "control/history_report.h"

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "engine/benchmark_baseline.h"
#include "protocol/answer.h"
#include "test_support.h"

using namespace deployd;
using deployd::testing::TempDir;
namespace json = boost::json;

namespace {

std::string Figures(double rate) {
  return json::serialize(json::object{{"tokens_per_s", rate},
                                      {"load", "8 requests, concurrency 1"},
                                      {"requests", 8},
                                      {"ttft_p95_ms", 310.5}});
}

// A run of `plan` that ended `state`; its one step "bench" ended `step_state` with `evidence`.
std::string AddRun(RunStore& store, const std::string& plan, RunState state, StepState step_state,
                   const std::string& evidence, std::int64_t at_ms) {
  RunRecord run;
  run.plan_name = plan;
  run.plan_file = plan + ".yaml";
  run.plan_text = "version: 1";
  run.created_at_ms = at_ms;
  for (const char* id : {"upgrade", "bench"}) {
    StepRecord step;
    step.index = static_cast<int>(run.steps.size());
    step.id = id;
    run.steps.push_back(step);
  }
  Result<std::string> id = store.CreateRun(run);
  REQUIRE(id.ok());
  Transition upgrade;
  upgrade.run_id = *id;
  upgrade.step = run.steps[0];
  upgrade.step->state = StepState::kSucceeded;
  upgrade.step->evidence = R"({"version":"0.16.0rc2"})";
  upgrade.event = {0, at_ms, "upgrade", "step.state", "succeeded", ""};
  REQUIRE(store.Commit(upgrade).ok());
  Transition t;
  t.run_id = *id;
  t.run_state = state;
  t.run_finished_at_ms = at_ms + 1000;
  t.step = run.steps[1];
  t.step->state = step_state;
  t.step->evidence = evidence;
  t.event = {0, at_ms + 1000, "bench", "step.state", std::string(ToString(step_state)), ""};
  REQUIRE(store.Commit(t).ok());
  return *id;
}

std::unique_ptr<RunStore> Open(const TempDir& dir) {
  Result<std::unique_ptr<RunStore>> store = RunStore::Open(dir.File("deployd.db"));
  REQUIRE(store.ok());
  return std::move(store.value());
}

}  // namespace

TEST_CASE("history: a baseline is the newest succeeded run whose step recorded figures",
          "[history]") {
  TempDir dir;
  auto store = Open(dir);
  // None yet: the first run sets it.
  BenchmarkBaseline none = FindBaseline(*store, "kimi", "bench");
  CHECK(none.run.empty());
  CHECK_FALSE(none.figures.has_value());
  CHECK(none.problem.empty());
  CHECK(none.plan == "kimi");
  CHECK(none.step == "bench");

  std::string first = "{\"benchmark\":" + Figures(57.3) + "}";
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSucceeded, first, 1000);
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSucceeded,
         "{\"benchmark\":" + Figures(58.1) + "}", 2000);
  // Not baselines: a failed run (a regression), a succeeded run whose step was skipped after
  // failing, one whose step recorded nothing, another plan's run.
  AddRun(*store, "kimi", RunState::kFailed, StepState::kFailed,
         "{\"benchmark\":" + Figures(40.0) + "}", 3000);
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSkipped,
         "{\"benchmark\":" + Figures(39.0) + "}", 4000);
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSucceeded, "", 5000);
  AddRun(*store, "glm5", RunState::kSucceeded, StepState::kSucceeded,
         "{\"benchmark\":" + Figures(12.0) + "}", 6000);

  BenchmarkBaseline b = FindBaseline(*store, "kimi", "bench");
  CHECK(b.run == "kimi-2");
  REQUIRE(b.figures.has_value());
  CHECK(b.figures->tokens_per_s == 58.1);
  CHECK(b.figures->load == "8 requests, concurrency 1");
  CHECK(FindBaseline(*store, "glm5", "bench").run == "glm5-6");
  CHECK(FindBaseline(*store, "kimi", "upgrade").run.empty());

  // Figures that cannot be read are said, not taken for none.
  AddRun(*store, "broken", RunState::kSucceeded, StepState::kSucceeded,
         R"({"benchmark":{"load":"x"}})", 7000);
  BenchmarkBaseline broken = FindBaseline(*store, "broken", "bench");
  CHECK(broken.problem == "run broken-7 recorded figures that cannot be read");
  CHECK_FALSE(broken.figures.has_value());
}

TEST_CASE("history: a plan's runs, newest first, with versions and figures", "[history]") {
  TempDir dir;
  auto store = Open(dir);
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSucceeded,
         "{\"benchmark\":" + Figures(57.3) + R"(,"baseline":{"run":null,"note":"first"}})", 1000);
  AddRun(*store, "other", RunState::kSucceeded, StepState::kSucceeded, "", 1500);
  AddRun(*store, "kimi", RunState::kFailed, StepState::kFailed, "", 2000);

  Result<std::vector<RunRecord>> runs = store->RunsOfPlan("kimi", 0);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  CHECK((*runs)[0].id == "kimi-3");
  CHECK((*runs)[1].id == "kimi-1");
  CHECK((*runs)[1].steps.size() == 2);
  Result<std::vector<RunRecord>> one = store->RunsOfPlan("kimi", 1);
  REQUIRE(one.ok());
  CHECK(one->size() == 1);
  CHECK(store->RunsOfPlan("nope", 0)->empty());

  json::object report = HistoryReport("kimi", runs.value());
  CHECK(report.at("plan") == "kimi");
  const json::array& list = report.at("runs").as_array();
  REQUIRE(list.size() == 2);
  const json::object& newest = list[0].as_object();
  CHECK(newest.at("run") == "kimi-3");
  CHECK(newest.at("state") == "failed");
  CHECK(newest.at("version") == "0.16.0rc2");
  CHECK(newest.at("benchmarks").as_array().empty());
  const json::object& oldest = list[1].as_object();
  CHECK(oldest.at("created_at_ms") == 1000);
  CHECK(oldest.at("finished_at_ms") == 2000);
  const json::array& benchmarks = oldest.at("benchmarks").as_array();
  REQUIRE(benchmarks.size() == 1);
  const json::object& b = benchmarks[0].as_object();
  CHECK(b.at("step") == "bench");
  CHECK(b.at("state") == "succeeded");
  CHECK(b.at("benchmark").at("tokens_per_s") == 57.3);
  CHECK(b.at("baseline").at("note") == "first");
}

TEST_CASE("history: the request, and its refusals", "[history]") {
  TempDir dir;
  auto store = Open(dir);
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSucceeded, "", 1000);
  AddRun(*store, "kimi", RunState::kSucceeded, StepState::kSucceeded, "", 2000);
  boost::asio::io_context io;
  RunManagerOptions options;
  options.state_dir = dir.path();
  RunManager runs(io.get_executor(), *store, options);
  RequestContext context{runs, *store, "alice (uid 1000)"};

  json::object answer = HandleHistory(context, {{"op", "history"}, {"plan", "kimi"}});
  CHECK(answer.at("ok") == true);
  CHECK(answer.at("history").at("runs").as_array().size() == 2);
  answer = HandleHistory(context, {{"op", "history"}, {"plan", "kimi"}, {"limit", 1}});
  CHECK(answer.at("history").at("runs").as_array().size() == 1);
  answer = HandleHistory(context, {{"op", "history"}, {"plan", "nope"}});
  CHECK(answer.at("history").at("runs").as_array().empty());

  CHECK(HandleHistory(context, {{"op", "history"}}) ==
        ErrorAnswer("bad request: history needs \"plan\""));
  CHECK(HandleHistory(context, {{"op", "history"}, {"plan", "kimi"}, {"limit", -1}}) ==
        ErrorAnswer("bad request: \"limit\" must be a whole number from 0"));
  CHECK(HandleHistory(context, {{"op", "history"}, {"plan", "kimi"}, {"limit", "2"}}) ==
        ErrorAnswer("bad request: \"limit\" must be a whole number from 0"));
  runs.Shutdown();
}
