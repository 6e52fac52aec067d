// RunStore's idempotency keys (schema version 5): a run created under a key is found by it, and
// the database itself refuses a second run under the same key.
#include <catch2/catch.hpp>
#include <string>

#include "store/run_store.h"
#include "test_support.h"

using namespace deployd;
using deployd::testing::TempDir;

namespace {

RunRecord KeyedRun(const std::string& key) {
  RunRecord run;
  run.plan_name = "kimi";
  run.plan_file = "kimi.yaml";
  run.plan_text = "version: 1\nname: kimi\nsteps:\n  - id: a\n    run: 'true'\n";
  run.vars = {{"model_dir", "/shared/kimi"}};
  run.created_at_ms = 1'700'000'000'000;
  run.key = key;
  StepRecord step;
  step.id = "a";
  run.steps.push_back(step);
  return run;
}

}  // namespace

TEST_CASE("a run created under a key is found by it, across reopen", "[run_store]") {
  TempDir dir;
  {
    auto store = RunStore::Open(dir.File("deployd.db"));
    REQUIRE(store.ok());
    REQUIRE(store.value()->CreateRun(KeyedRun("rollout-7f3a/gpu1")).ok());
    REQUIRE(store.value()->CreateRun(KeyedRun("")).ok());
    REQUIRE(store.value()->CreateRun(KeyedRun("")).ok());  // runs without a key are many
  }
  auto store = RunStore::Open(dir.File("deployd.db"));
  REQUIRE(store.ok());
  auto found = store.value()->LoadRunByKey("rollout-7f3a/gpu1");
  REQUIRE(found.ok());
  REQUIRE(found.value().has_value());
  CHECK(found.value()->id == "kimi-1");
  CHECK(found.value()->key == "rollout-7f3a/gpu1");
  REQUIRE(found.value()->steps.size() == 1);
  auto loaded = store.value()->LoadRun("kimi-2");
  REQUIRE(loaded.ok());
  CHECK(loaded.value()->key.empty());
  auto none = store.value()->LoadRunByKey("rollout-7f3a/gpu2");
  REQUIRE(none.ok());
  CHECK_FALSE(none.value().has_value());
}

TEST_CASE("a second run under the same key is refused by the database", "[run_store]") {
  TempDir dir;
  auto store = RunStore::Open(dir.File("deployd.db"));
  REQUIRE(store.ok());
  REQUIRE(store.value()->CreateRun(KeyedRun("k")).ok());
  Result<std::string> again = store.value()->CreateRun(KeyedRun("k"));
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(again.status().message(), Catch::Contains("UNIQUE constraint failed: runs.idem_key"));
  auto listed = store.value()->ListRuns(false);
  REQUIRE(listed.ok());
  CHECK(listed.value().size() == 1);
}
