// The requests about runs' records (control/run_records.h) — runs filtered and paged, show,
// delete, prune — and who asked, as the operator's commands record it; through the handlers,
// on a real store and run manager (control_test_daemon.h). Refusals are pinned word for word.
#include "control/run_records.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "control_test_daemon.h"

using namespace deployd;
using namespace deployd::testing;  // Daemon, Error, the plans kTwoSteps, kApproval, kFailing
namespace json = boost::json;

namespace {

const char* kSlow = R"(version: 1
name: slow
steps:
  - id: wait
    run: sleep 30
  - id: after
    run: "true"
)";

std::vector<std::string> Ids(const json::object& answer) {
  REQUIRE(answer.at("ok") == true);
  std::vector<std::string> ids;
  for (const json::value& run : answer.at("runs").as_array())
    ids.emplace_back(run.at("id").as_string());
  return ids;
}

// The details of the run's events of `kind`, in order.
std::vector<std::string> Details(Daemon& d, const std::string& run, const std::string& kind) {
  Result<std::vector<EventRecord>> events = d.store().Events(run);
  REQUIRE(events.ok());
  std::vector<std::string> details;
  for (const EventRecord& e : events.value())
    if (e.kind == kind) details.push_back(e.detail);
  return details;
}

std::string Finished(Daemon& d, const char* plan, const char* state) {
  std::string run = d.Apply(plan);
  d.RunUntilState(run, state);
  return run;
}

}  // namespace

TEST_CASE("runs: filters and pages, newest first, without gaps or repeats") {
  Daemon d;
  std::vector<std::string> all;  // oldest first
  for (int i = 0; i < 3; ++i) all.push_back(Finished(d, kTwoSteps, "succeeded"));
  all.push_back(Finished(d, kFailing, "failed"));
  all.push_back(Finished(d, kTwoSteps, "succeeded"));
  const std::vector<std::string> newest_first(all.rbegin(), all.rend());
  CHECK(Ids(d.Ask({{"op", "runs"}})) == newest_first);
  CHECK_FALSE(d.Ask({{"op", "runs"}}).contains("next"));

  // Pages of two: each "next" asks for the rest, until none is left.
  std::vector<std::string> paged;
  json::object request{{"op", "runs"}, {"limit", 2}};
  for (int pages = 1;; ++pages) {
    json::object page = d.Ask(request);
    std::vector<std::string> ids = Ids(page);
    CHECK(ids.size() <= 2);
    paged.insert(paged.end(), ids.begin(), ids.end());
    if (!page.contains("next")) {
      CHECK(pages == 3);
      break;
    }
    request["before_seq"] = page.at("next").at("before_seq");
  }
  CHECK(paged == newest_first);

  CHECK(Ids(d.Ask({{"op", "runs"}, {"plan", "two"}})) ==
        std::vector<std::string>{all[4], all[2], all[1], all[0]});
  CHECK(Ids(d.Ask({{"op", "runs"}, {"state", "failed"}})) == std::vector<std::string>{all[3]});
  CHECK(Ids(d.Ask({{"op", "runs"}, {"plan", "two"}, {"state", "failed"}})).empty());
  json::object page = d.Ask({{"op", "runs"}, {"plan", "two"}, {"limit", 1}, {"before_seq", 4}});
  CHECK(Ids(page) == std::vector<std::string>{all[2]});
  CHECK(page.at("next").at("before_seq") == 3);
  CHECK(Ids(d.Ask({{"op", "runs"}, {"since_ms", 0}})).size() == 5);
  CHECK(Ids(d.Ask({{"op", "runs"}, {"since_ms", std::int64_t{1} << 52}})).empty());
}

TEST_CASE("runs: a bad filter is refused, saying what it must be") {
  Daemon d;
  auto refused = [&](json::object request) {
    request["op"] = "runs";
    return Error(d.Ask(request));
  };
  CHECK(refused({{"state", "runing"}}) ==
        "bad request: \"state\" must be a run state (pending, running, paused, waiting, "
        "succeeded, failed or cancelled), not \"runing\"");
  CHECK(refused({{"state", 3}}) ==
        "bad request: \"state\" must be a run state (pending, running, paused, waiting, "
        "succeeded, failed or cancelled), not 3");
  CHECK(refused({{"plan", 3}}) == "bad request: \"plan\" must be a plan's name");
  for (json::value limit : {json::value(0), json::value(-5), json::value("10"), json::value(2.5)})
    CHECK(refused({{"limit", limit}}) == "bad request: \"limit\" must be a whole number from 1");
  CHECK(refused({{"since_ms", -1}}) == "bad request: \"since_ms\" must be a whole number from 0");
  CHECK(refused({{"before_seq", 0}}) ==
        "bad request: \"before_seq\" must be a whole number from 1");
}

TEST_CASE("show: a run's record, who applied it, and the plan text exactly as applied") {
  Daemon d;
  std::string run = Finished(d, kTwoSteps, "succeeded");
  json::object shown = d.Ask({{"op", "show"}, {"run", run}});
  REQUIRE(shown.at("ok") == true);
  CHECK(shown.at("run").at("applied_by") == "alice (uid 1000)");
  CHECK(shown.at("run").at("plan_file") == "p.yaml");
  CHECK_FALSE(shown.at("run").as_object().contains("steps"));
  CHECK_FALSE(shown.contains("plan_text"));
  json::object with_plan = d.Ask({{"op", "show"}, {"run", run}, {"plan_text", true}});
  CHECK(with_plan.at("plan_text") == kTwoSteps);
  CHECK(Error(d.Ask({{"op", "show"}, {"run", "nope-1"}})) == "no run 'nope-1'");
  CHECK(Error(d.Ask({{"op", "show"}})) == "bad request: show needs \"run\"");
  // The status of the run names who applied it too, and so does its first event.
  CHECK(d.Ask({{"op", "status"}, {"run", run}}).at("run").at("applied_by") == "alice (uid 1000)");
  CHECK(Details(d, run, "run.created") ==
        std::vector<std::string>{"plan two from p.yaml, applied by alice (uid 1000)"});
}

TEST_CASE("delete: a finished run is forgotten with its logs, a run going on is refused") {
  Daemon d;
  std::string done = Finished(d, kTwoSteps, "succeeded");
  std::string gated = d.Apply(kApproval);
  d.RunUntilState(gated, "waiting");
  const std::string logs = d.dir() + "/logs/" + done;
  CHECK(std::filesystem::exists(logs + "/hello.log"));

  CHECK(Error(d.Ask({{"op", "delete"}, {"run", gated}})) ==
        "run gated-2 is waiting; only a finished run (succeeded, failed or cancelled) can be "
        "deleted: `deployctl cancel gated-2` first");
  CHECK(Error(d.Ask({{"op", "delete"}, {"run", "nope-1"}})) == "no run 'nope-1'");
  CHECK(Error(d.Ask({{"op", "delete"}})) == "bad request: delete needs \"run\"");

  json::object deleted = d.Ask({{"op", "delete"}, {"run", done}});
  REQUIRE(deleted.at("ok") == true);
  CHECK(deleted.at("deleted") == json::array{json::value(done)});
  CHECK_FALSE(std::filesystem::exists(logs));
  CHECK(Error(d.Ask({{"op", "show"}, {"run", done}})) == "no run '" + done + "'");
  CHECK(Ids(d.Ask({{"op", "runs"}})) == std::vector<std::string>{gated});

  // The newest run forgotten, its number is not given again.
  REQUIRE(d.Ask({{"op", "cancel"}, {"run", gated}}).at("ok") == true);
  d.RunUntilState(gated, "cancelled");
  REQUIRE(d.Ask({{"op", "delete"}, {"run", gated}}).at("ok") == true);
  CHECK(d.Apply(kTwoSteps) == "two-3");
}

TEST_CASE("prune: the runs that finished longer ago, never one going on") {
  Daemon d;
  std::string first = Finished(d, kTwoSteps, "succeeded");
  std::string second = Finished(d, kFailing, "failed");
  std::string gated = d.Apply(kApproval);
  d.RunUntilState(gated, "waiting");
  CHECK(Error(d.Ask({{"op", "prune"}})) ==
        "bad request: prune needs \"older_than_ms\", a whole number from 0");
  CHECK(Error(d.Ask({{"op", "prune"}, {"older_than_ms", -1}})) ==
        "bad request: prune needs \"older_than_ms\", a whole number from 0");
  json::object none = d.Ask({{"op", "prune"}, {"older_than_ms", 3'600'000}});
  CHECK(none.at("deleted").as_array().empty());
  CHECK(none.at("more") == false);

  json::object pruned = d.Ask({{"op", "prune"}, {"older_than_ms", 0}});
  CHECK(pruned.at("deleted") == json::array{json::value(first), json::value(second)});
  CHECK(pruned.at("more") == false);
  CHECK(Ids(d.Ask({{"op", "runs"}})) == std::vector<std::string>{gated});
  CHECK_FALSE(std::filesystem::exists(d.dir() + "/logs/" + first));
}

TEST_CASE("the operator's commands record who asked, in the transition's own event") {
  Daemon d;
  std::string run = d.Apply(kSlow);
  d.RunUntil([&] {
    return d.Ask({{"op", "status"}, {"run", run}}).at("run").at("steps").at(0).at("state") ==
           "running";
  });
  REQUIRE(d.Ask({{"op", "pause"}, {"run", run}}).at("ok") == true);
  REQUIRE(d.Ask({{"op", "resume"}, {"run", run}}).at("ok") == true);
  REQUIRE(d.Ask({{"op", "cancel"}, {"run", run}}).at("ok") == true);
  d.RunUntilState(run, "cancelled");
  CHECK(Details(d, run, "run.state") ==
        std::vector<std::string>{"", "paused by alice (uid 1000); step wait finishes first",
                                 "resumed by alice (uid 1000)", "cancelled by alice (uid 1000)"});
  json::object status = d.Ask({{"op", "status"}, {"run", run}});
  CHECK(status.at("run").at("reason") == "cancelled by alice (uid 1000)");
  CHECK(status.at("run").at("steps").at(0).at("reason") == "cancelled by alice (uid 1000)");

  std::string failed = Finished(d, kFailing, "failed");
  REQUIRE(d.Ask({{"op", "retry"}, {"run", failed}}).at("ok") == true);
  d.RunUntilState(failed, "failed");
  REQUIRE(d.Ask({{"op", "retry"}, {"run", failed}, {"step", "fetch"}}).at("ok") == true);
  d.RunUntilState(failed, "failed");
  REQUIRE(d.Ask({{"op", "skip"}, {"run", failed}, {"step", "fetch"}}).at("ok") == true);
  d.RunUntilState(failed, "succeeded");
  std::vector<std::string> details = Details(d, failed, "run.state");
  std::set<std::string> said(details.begin(), details.end());
  for (const char* expected :
       {"retried by alice (uid 1000)", "retried from fetch by alice (uid 1000)",
        "skipped fetch by alice (uid 1000)"})
    CHECK(said.count(expected) == 1);
  CHECK(d.Ask({{"op", "status"}, {"run", failed}}).at("run").at("steps").at(0).at("reason") ==
        "skipped by alice (uid 1000)");
}
