// The wire JSON of runs, steps and progress (protocol/run_wire.h): the exact text deployd
// sends (DESIGN.md §3 calls the shape binding), and what deployctl reads back from it.
#include "protocol/run_wire.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace deployd;
namespace json = boost::json;

namespace {

WireRun Sample() {
  WireRun run;
  run.id = "demo-3";
  run.plan = "demo";
  run.plan_file = "demo.yaml";
  run.state = "failed";
  run.created_at_ms = 1000;
  run.finished_at_ms = 5000;
  run.reason = "step fetch failed: exit status 3";
  run.vars = {{"model", "m"}, {"port", "8000"}};
  WireStep fetch;
  fetch.id = "fetch";
  fetch.phase = "main";
  fetch.state = "failed";
  fetch.attempts = 2;
  fetch.started_at_ms = 1100;
  fetch.finished_at_ms = 4900;
  fetch.exit_status = 3;
  fetch.reason = "exit status 3";
  fetch.evidence = json::parse(R"({"exit_status":3})");
  WireStep report;
  report.id = "report";
  report.phase = "on_failure";
  report.state = "pending";
  run.steps = {fetch, report};
  return run;
}

}  // namespace

TEST_CASE("run wire: a run's JSON, field by field and in order") {
  CHECK(json::serialize(EncodeRun(Sample())) ==
        R"({"id":"demo-3","plan":"demo","plan_file":"demo.yaml","state":"failed",)"
        R"("created_at_ms":1000,"finished_at_ms":5000,"reason":"step fetch failed: exit status 3",)"
        R"("vars":{"model":"m","port":"8000"},"steps":[)"
        R"({"id":"fetch","phase":"main","state":"failed","attempts":2,"started_at_ms":1100,)"
        R"("finished_at_ms":4900,"exit_status":3,"reason":"exit status 3",)"
        R"("evidence":{"exit_status":3}},)"
        R"({"id":"report","phase":"on_failure","state":"pending","attempts":0,"started_at_ms":0,)"
        R"("finished_at_ms":0,"exit_status":null,"reason":""}]})");
}

TEST_CASE("run wire: optional fields appear only when known") {
  WireRun run = Sample();
  run.evidence = json::parse(R"({"check":"http GET /"})");
  run.steps[0].pid = 4242;
  run.steps[0].action = json::parse(R"({"status_file":"/s"})");
  run.steps[0].evidence.reset();
  WireProgress progress;
  progress.bytes = 1024;
  run.steps[0].progress = progress;
  json::object o = EncodeRun(run);
  CHECK(json::serialize(o.at("evidence")) == R"({"check":"http GET /"})");
  const json::object& step = o.at("steps").as_array()[0].as_object();
  CHECK(json::serialize(step) ==
        R"({"id":"fetch","phase":"main","state":"failed","attempts":2,"started_at_ms":1100,)"
        R"("finished_at_ms":4900,"exit_status":3,"pid":4242,"action":{"status_file":"/s"},)"
        R"("reason":"exit status 3","progress":{"bytes":1024,"total_bytes":null,"done":null,)"
        R"("total":null,"fraction":null,"rate_bps":null,"eta_s":null,"last_progress_at_ms":0,)"
        R"("at_ms":0}})");
  // A run listed without its steps has no "steps".
  run.steps.clear();
  CHECK_FALSE(EncodeRun(run).contains("steps"));
}

TEST_CASE("run wire: what is encoded decodes to the same values") {
  WireRun run = Sample();
  run.steps[0].pid = 77;
  WireRun back = DecodeRun(EncodeRun(run));
  CHECK(json::serialize(EncodeRun(back)) == json::serialize(EncodeRun(run)));
  CHECK(back.vars == run.vars);
  REQUIRE(back.steps.size() == 2);
  CHECK(back.steps[0].exit_status == 3);
  CHECK(back.steps[0].pid == 77);
  CHECK_FALSE(back.steps[1].exit_status);
  CHECK_FALSE(back.steps[1].pid);
  CHECK(back.steps[1].phase == "on_failure");
}

TEST_CASE("run wire: decoding is lenient: what is missing or mistyped reads as empty") {
  WireRun run = DecodeRun(json::parse(R"({"id": "x-1", "created_at_ms": 1.5e3, "state": 7,
      "vars": {"a": "b", "n": 1}, "steps": [3, {"id": "s", "attempts": "two",
      "progress": {"bytes": 10, "fraction": 0.25}}]})")
                              .as_object());
  CHECK(run.id == "x-1");
  CHECK(run.created_at_ms == 1500);
  CHECK(run.state == "");
  CHECK(run.vars == std::map<std::string, std::string>{{"a", "b"}});
  REQUIRE(run.steps.size() == 1);
  CHECK(run.steps[0].id == "s");
  CHECK(run.steps[0].attempts == 0);
  REQUIRE(run.steps[0].progress);
  CHECK(run.steps[0].progress->bytes == 10);
  CHECK(run.steps[0].progress->fraction == 0.25);
  CHECK_FALSE(run.steps[0].progress->rate_bps);
  CHECK(DecodeRun(json::object{}).steps.empty());
}

TEST_CASE("run wire: progress goes out rounded, whole numbers as integers") {
  WireProgress p;
  p.bytes = 1288490188;
  p.total_bytes = 3221225472;
  p.done = 27.5;
  p.fraction = 0.123456;
  p.rate_bps = 1234.6;
  p.eta_s = 30.2;
  p.last_progress_at_ms = 1700000000000;
  p.at_ms = 1700000001000;
  CHECK(json::serialize(EncodeProgress(p)) ==
        R"({"bytes":1288490188,"total_bytes":3221225472,"done":2.75E1,"total":null,)"
        R"("fraction":1.235E-1,"rate_bps":1235,"eta_s":31,"last_progress_at_ms":1700000000000,)"
        R"("at_ms":1700000001000})");
  WireProgress back = DecodeProgress(EncodeProgress(p));
  CHECK(back.bytes == 1288490188);
  CHECK(back.fraction == Approx(0.1235));
  CHECK(back.eta_s == 31);
  CHECK(back.at_ms == 1700000001000);
}
