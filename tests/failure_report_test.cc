#include "control/failure_report.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace deployd;
namespace json = boost::json;

namespace {

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/failure-report-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string File(const std::string& name, const std::string& text) const {
    std::string p = path + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string path;
};

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("LogTail: the last lines, progress bars as a terminal shows them") {
  TempDir dir;
  CHECK(LogTail(dir.path + "/none.log", 3) == Lines{});
  std::string log = dir.File("a.log", "one\ntwo\r\nthree\n 10%\r 50%\r 90%\nfour");
  CHECK(LogTail(log, 3) == Lines{"three", " 90%", "four"});
  CHECK(LogTail(log, 10) == Lines{"one", "two", "three", " 90%", "four"});
}

TEST_CASE("LogTail: the rotated file supplies what the current one lacks") {
  TempDir dir;
  std::string log = dir.File("b.log", "new1\nnew2\n");
  dir.File("b.log.1", "old1\nold2\nold3\n");
  CHECK(LogTail(log, 4) == Lines{"old2", "old3", "new1", "new2"});
  CHECK(LogTail(log, 2) == Lines{"new1", "new2"});
}

TEST_CASE("LogTail: a large log is read from its end, starting at a whole line") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i) + "\n";
  std::string log = dir.File("c.log", text);
  CHECK(LogTail(log, 2) == Lines{"line 19998", "line 19999"});
  Lines all = LogTail(log, 100000);
  REQUIRE(!all.empty());
  CHECK(all.front().rfind("line ", 0) == 0);
  CHECK(all.size() < 20000);  // at most 64 KiB was read
}

TEST_CASE("FailureReport: the failing step, its evidence and the timeline") {
  TempDir dir;
  RunRecord run;
  run.id = "demo-3";
  run.plan_name = "demo";
  run.state = RunState::kFailed;
  run.reason = "step serve failed: exit status 3";
  run.created_at_ms = 1000;
  run.finished_at_ms = 5000;
  StepRecord ok;
  ok.id = "setup";
  ok.state = StepState::kSucceeded;
  StepRecord bad;
  bad.index = 1;
  bad.id = "serve";
  bad.state = StepState::kFailed;
  bad.attempts = 2;
  bad.exit_status = 3;
  bad.reason = "exit status 3";
  bad.evidence = R"({"exit_status": 3})";
  StepRecord report;
  report.index = 2;
  report.id = "report";
  report.phase = "on_failure";
  report.state = StepState::kFailed;
  run.steps = {ok, bad, report};
  dir.File("serve.log", "loading\nCUDA error\n");
  std::vector<EventRecord> events(2);
  events[0].seq = 1;
  events[0].at_ms = 1000;
  events[0].kind = "run.created";
  events[1].seq = 2;
  events[1].at_ms = 3500;
  events[1].step_id = "serve";
  events[1].kind = "step.state";
  events[1].state = "failed";
  events[1].detail = "exit status 3";

  json::object why = FailureReport(
      run, events, [&](const std::string& step) { return dir.path + "/" + step + ".log"; });
  CHECK(why.at("failed").as_bool());
  const json::object& step = why.at("failing_step").as_object();
  CHECK(step.at("id") == "serve");  // a main step before an on_failure one
  CHECK(step.at("attempts") == 2);
  CHECK(step.at("exit_status") == 3);
  CHECK(step.at("evidence") == json::parse(R"({"exit_status": 3})"));
  CHECK(step.at("log_tail") == json::parse(R"(["loading", "CUDA error"])"));
  CHECK(!why.contains("preflight"));
  const json::array& timeline = why.at("timeline").as_array();
  REQUIRE(timeline.size() == 2);
  CHECK(timeline[1].as_object().at("offset_ms") == 2500);
  CHECK(timeline[1].as_object().at("step") == "serve");

  // A run that did not fail has no failing step.
  run.state = RunState::kCancelled;
  why = FailureReport(run, events, [](const std::string&) { return std::string("/nonexistent"); });
  CHECK_FALSE(why.at("failed").as_bool());
  CHECK(why.at("failing_step").is_null());

  // A failed preflight: its evidence, no step.
  run.state = RunState::kFailed;
  run.steps = {ok};
  run.steps[0].state = StepState::kPending;
  run.evidence = R"({"check": "file /x"})";
  why = FailureReport(run, {}, [](const std::string&) { return std::string("/nonexistent"); });
  CHECK(why.at("failing_step").is_null());
  CHECK(why.at("preflight") == json::parse(R"({"check": "file /x"})"));
}
