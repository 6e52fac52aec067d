// The control protocol's request handlers (control/request_handlers.h, answer_streams.h),
// driven without a socket: a real RunStore on a temporary SQLite file and a real RunManager on
// an io_context run by the test. The refusals of bad requests are pinned word for word.
#include "control/request_handlers.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "control/answer_streams.h"
#include "control_test_daemon.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"

using namespace deployd;
using deployd::testing::Daemon;
using deployd::testing::Error;
using deployd::testing::kApproval;
using deployd::testing::kFailing;
using deployd::testing::kTwoSteps;
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

std::string Refusal(const StreamAnswer& answer) {
  REQUIRE(std::holds_alternative<json::object>(answer));
  return Error(std::get<json::object>(answer));
}

AnswerStream& Stream(StreamAnswer& answer) {
  REQUIRE(std::holds_alternative<std::unique_ptr<AnswerStream>>(answer));
  return *std::get<std::unique_ptr<AnswerStream>>(answer);
}

json::object PlanAnswer(Daemon& d, json::object request) {
  json::object answer;
  asio::co_spawn(d.io(), HandlePlan(std::move(request)),
                 [&](std::exception_ptr, json::object o) { answer = std::move(o); });
  d.RunUntil([&] { return !answer.empty(); });
  return answer;
}

}  // namespace

TEST_CASE("request handlers: a line that is not a request is refused, saying why") {
  auto refused = [](const std::string& line) {
    Result<json::object> r = DecodeRequest(line);
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  CHECK(refused("this is not json") == "bad request: not a JSON object");
  CHECK(refused(R"(["v", 1])") == "bad request: not a JSON object");
  CHECK(refused(R"({"op": "ping"})") == "bad request: missing protocol version \"v\"");
  CHECK(refused(R"({"v": "1", "op": "ping"})") == "bad request: missing protocol version \"v\"");
  CHECK(refused(R"({"v": 2, "op": "ping"})") ==
        std::string("protocol version 2 is not supported (deployd ") + DEPLOYD_VERSION +
            " speaks 1)");
  CHECK(refused(R"({"v": 1})") == "bad request: missing \"op\"");
  CHECK(refused(R"({"v": 1, "op": 7})") == "bad request: missing \"op\"");
  Result<json::object> ok = DecodeRequest(R"({"v": 1, "op": "ping"})");
  REQUIRE(ok.ok());
  CHECK(RequestOp(ok.value()) == "ping");
}

TEST_CASE("request handlers: ping names the daemon's version and protocol") {
  Daemon d;
  json::object ping = d.AskLine(R"({"v": 1, "op": "ping"})");
  CHECK(json::serialize(ping) ==
        std::string(R"({"ok":true,"version":")") + DEPLOYD_VERSION + R"(","protocol":1})");
}

TEST_CASE("request handlers: a request without what it needs is refused, saying what") {
  Daemon d;
  CHECK(Error(d.Ask({{"op", "frobnicate"}})) == "bad request: unknown op 'frobnicate'");
  CHECK(Error(d.Ask({{"op", "follow"}})) == "bad request: unknown op 'follow'");  // a stream
  for (const char* op :
       {"status", "logs", "why", "cancel", "pause", "resume", "retry", "skip", "approve"}) {
    INFO(op);
    CHECK(Error(d.Ask({{"op", op}})) == std::string("bad request: ") + op + " needs \"run\"");
    CHECK(Error(d.Ask({{"op", op}, {"run", 3}})) ==
          std::string("bad request: ") + op + " needs \"run\"");
  }
  CHECK(Error(d.Ask({{"op", "skip"}, {"run", "x-1"}})) == "bad request: skip needs \"step\"");
  CHECK(Error(d.Ask({{"op", "approve"}, {"run", "x-1"}})) == "bad request: approve needs \"step\"");
  CHECK(Error(d.Ask({{"op", "apply"}})) == "bad request: apply needs \"plan_text\"");
  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"vars", "a=b"}})) ==
        "bad request: \"vars\" must be an object");
  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"vars", {{"a", 1}}}})) ==
        "bad request: variable values must be strings");
  CHECK(Error(PlanAnswer(d, {{"op", "plan"}})) == "bad request: plan needs \"plan_text\"");
  CHECK(Error(PlanAnswer(d, {{"op", "plan"}, {"plan_text", kTwoSteps}, {"vars", json::array()}})) ==
        "bad request: \"vars\" must be an object");
}

TEST_CASE("request handlers: a run that does not exist") {
  Daemon d;
  for (const char* op : {"status", "logs", "why", "cancel", "pause", "resume", "retry"}) {
    INFO(op);
    CHECK(Error(d.Ask({{"op", op}, {"run", "nope-1"}})) == "no run 'nope-1'");
  }
  for (const char* op : {"skip", "approve"}) {
    INFO(op);
    CHECK(Error(d.Ask({{"op", op}, {"run", "nope-1"}, {"step", "a"}})) == "no run 'nope-1'");
  }
  RequestContext context = d.Context();
  CHECK(Refusal(FollowRun(context, {{"run", "nope-1"}}, [] {})) == "no run 'nope-1'");
  CHECK(Refusal(FollowLog(context, {{"run", "nope-1"}, {"step", "a"}}, d.io().get_executor(),
                          [] {})) == "no run 'nope-1'");
}

TEST_CASE("request handlers: an invalid plan is refused with its diagnostics") {
  Daemon d;
  json::object answer =
      d.Ask({{"op", "apply"},
             {"plan_file", "raw.yaml"},
             {"plan_text", "version: 1\nname: raw\nsteps:\n  - id: a\n    rnu: x\n"}});
  CHECK(Error(answer) == "invalid plan raw.yaml");
  const json::array& diagnostics = answer.at("diagnostics").as_array();
  REQUIRE_FALSE(diagnostics.empty());
  for (const json::value& line : diagnostics)
    CHECK(std::string(line.as_string()).rfind("raw.yaml:", 0) == 0);
  // Without a file name the plan is called "plan".
  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", "version: 1\n"}})) == "invalid plan plan");
}

TEST_CASE("request handlers: apply, then runs, status, logs and why of the run") {
  Daemon d;
  std::string run = d.Apply(kTwoSteps);
  CHECK(run == "two-1");
  d.RunUntilState(run, "succeeded");

  json::object runs = d.Ask({{"op", "runs"}});
  REQUIRE(runs.at("ok") == true);
  REQUIRE(runs.at("runs").as_array().size() == 1);
  CHECK(runs.at("runs").at(0).at("id") == "two-1");

  json::object status = d.Ask({{"op", "status"}, {"run", run}});
  const json::object& r = status.at("run").as_object();
  CHECK(r.at("plan") == "two");
  CHECK(r.at("plan_file") == "p.yaml");
  CHECK(r.at("steps").as_array().size() == 2);
  CHECK(r.at("steps").at(0).at("state") == "succeeded");
  CHECK(r.at("steps").at(0).at("exit_status") == 0);

  json::object logs = d.Ask({{"op", "logs"}, {"run", run}, {"step", "hello"}});
  REQUIRE(logs.at("ok") == true);
  REQUIRE(logs.at("logs").as_array().size() == 1);
  CHECK(logs.at("logs").at(0).at("step") == "hello");
  CHECK(logs.at("logs").at(0).at("text") == "hello from the first step\n");
  CHECK(Error(d.Ask({{"op", "logs"}, {"run", run}, {"step", "zz"}})) ==
        "run two-1 has no step 'zz'");

  json::object why = d.Ask({{"op", "why"}, {"run", run}});
  CHECK(why.at("why").at("failed") == false);
  CHECK(why.at("why").at("failing_step").is_null());
}

TEST_CASE("request handlers: the operator's commands on a run that has finished") {
  Daemon d;
  std::string run = d.Apply(kTwoSteps);
  d.RunUntilState(run, "succeeded");
  CHECK(Error(d.Ask({{"op", "cancel"}, {"run", run}})) ==
        "run two-1 has already finished (succeeded)");
  CHECK(Error(d.Ask({{"op", "pause"}, {"run", run}})) ==
        "run two-1 has already finished (succeeded); only a running run can be paused");
  CHECK(Error(d.Ask({{"op", "resume"}, {"run", run}})) ==
        "run two-1 has already finished (succeeded); only a paused run can be resumed");
  CHECK(Error(d.Ask({{"op", "approve"}, {"run", run}, {"step", "hello"}})) ==
        "run two-1 has already finished (succeeded); there is nothing to approve");
  CHECK(Error(d.Ask({{"op", "retry"}, {"run", run}})) ==
        "run two-1 is succeeded; only a failed or cancelled run can be retried");
  CHECK(Error(d.Ask({{"op", "skip"}, {"run", run}, {"step", "hello"}})) ==
        "run two-1 is succeeded; only steps of a running, failed or cancelled run can be skipped");
}

TEST_CASE("request handlers: why a run failed, and a retry of it") {
  Daemon d;
  std::string run = d.Apply(kFailing);
  d.RunUntilState(run, "failed");
  json::object why = d.Ask({{"op", "why"}, {"run", run}});
  const json::object& report = why.at("why").as_object();
  CHECK(report.at("failed") == true);
  CHECK(report.at("reason") == "step fetch failed: exit status 3");
  CHECK(report.at("failing_step").at("id") == "fetch");
  CHECK(report.at("failing_step").at("exit_status") == 3);
  CHECK(report.at("failing_step").at("log_tail").at(0) == "fetching");

  CHECK(Error(d.Ask({{"op", "retry"}, {"run", run}, {"step", "zz"}})) ==
        "run failing-1 has no step 'zz'");
  CHECK(d.Ask({{"op", "retry"}, {"run", run}}).at("ok") == true);
  CHECK(Error(d.Ask({{"op", "retry"}, {"run", run}})) == "run failing-1 is still running");
  d.RunUntilState(run, "failed");
  json::object status = d.Ask({{"op", "status"}, {"run", run}});
  CHECK(status.at("run").at("steps").at(0).at("attempts") == 1);
  CHECK(Error(d.Ask({{"op", "skip"}, {"run", run}, {"step", "zz"}})) ==
        "run failing-1 has no step 'zz'");
  CHECK(d.Ask({{"op", "skip"}, {"run", run}, {"step", "fetch"}}).at("ok") == true);
  d.RunUntilState(run, "succeeded");
}

TEST_CASE("request handlers: an approval step waits for approve, which names who approved") {
  Daemon d;
  std::string run = d.Apply(kApproval);
  d.RunUntilState(run, "waiting");
  CHECK(Error(d.Ask({{"op", "pause"}, {"run", run}})) ==
        "run gated-1 is waiting for approval of step confirm; nothing starts until it is "
        "approved");
  CHECK(Error(d.Ask({{"op", "resume"}, {"run", run}})) ==
        "run gated-1 is not paused (it is waiting)");
  CHECK(Error(d.Ask({{"op", "approve"}, {"run", run}, {"step", "prepare"}})) ==
        "step prepare is not an approval step");
  CHECK(Error(d.Ask({{"op", "approve"}, {"run", run}, {"step", "zz"}})) ==
        "run gated-1 has no step 'zz'");
  CHECK(Error(d.Ask({{"op", "skip"}, {"run", run}, {"step", "prepare"}})) ==
        "step prepare is succeeded; only a step that has not started, or has failed, can be "
        "skipped");
  CHECK(d.Ask({{"op", "approve"}, {"run", run}, {"step", "confirm"}}).at("ok") == true);
  d.RunUntilState(run, "succeeded");
  json::object status = d.Ask({{"op", "status"}, {"run", run}});
  CHECK(status.at("run").at("steps").at(1).at("reason") == "approved by alice (uid 1000)");
}

TEST_CASE("request handlers: follow streams the snapshot, the past, what comes, then the end") {
  Daemon d;
  RequestContext context = d.Context();
  CHECK(Refusal(FollowRun(context, json::object{}, [] {})) == "bad request: follow needs \"run\"");

  std::string run = d.Apply(kTwoSteps);
  int wakes = 0;
  StreamAnswer answer = FollowRun(context, {{"run", run}}, [&] { ++wakes; });
  AnswerStream& stream = Stream(answer);
  std::vector<json::object> lines;
  auto take = [&] {
    for (StreamLine& line : stream.Take()) lines.push_back(json::parse(line.text).as_object());
    return !lines.empty() && LineType(lines.back()) == "end";
  };
  d.RunUntil(take);
  CHECK(wakes > 0);
  CHECK(lines.front().at("ok") == true);
  CHECK(LineType(lines.front()) == "snapshot");
  CHECK(LineRun(lines.front()).state == "pending");
  CHECK(DecodeEvent(lines[1]).kind == "run.created");
  std::vector<std::string> states;
  for (const json::object& line : lines)
    if (LineType(line) == "event") states.push_back(DecodeEvent(line).state);
  CHECK(states == std::vector<std::string>{"pending", "running", "running", "succeeded", "running",
                                           "succeeded", "succeeded"});
  CHECK(LineRun(lines.back()).state == "succeeded");
  CHECK_FALSE(stream.Ready());

  // A finished run's stream is complete at once.
  StreamAnswer again = FollowRun(context, {{"run", run}}, [] {});
  std::deque<StreamLine> all = Stream(again).Take();
  CHECK(LineType(json::parse(all.front().text).as_object()) == "snapshot");
  CHECK(all.back().last);
  CHECK(all.size() == lines.size());
}

TEST_CASE("request handlers: logs -f streams a step's output until its processes are gone") {
  Daemon d;
  RequestContext context = d.Context();
  auto ex = d.io().get_executor();
  CHECK(Refusal(FollowLog(context, {{"run", "x-1"}}, ex, [] {})) ==
        "bad request: following logs needs \"run\" and \"step\"");
  std::string run = d.Apply(kTwoSteps);
  CHECK(Refusal(FollowLog(context, {{"run", run}, {"step", "zz"}}, ex, [] {})) ==
        "run two-1 has no step 'zz'");

  StreamAnswer answer = FollowLog(context, {{"run", run}, {"step", "hello"}}, ex, [] {});
  AnswerStream& stream = Stream(answer);
  std::vector<json::object> lines;
  d.RunUntil([&] {
    for (StreamLine& line : stream.Take()) lines.push_back(json::parse(line.text).as_object());
    return !lines.empty() && LineType(lines.back()) == "end";
  });
  CHECK(json::serialize(lines.front()) ==
        R"({"ok":true,"type":"start","run":"two-1","step":"hello","path":")" +
            d.Context().runs.LogPath(run, "hello") + R"("})");
  std::string text;
  for (const json::object& line : lines)
    if (LineType(line) == "data") text += LogDataText(line);
  CHECK(text == "hello from the first step\n");
  CHECK(json::serialize(lines.back()) ==
        R"({"type":"end","run":"two-1","step":"hello","state":"succeeded"})");
}

TEST_CASE("request handlers: apply with an idempotency key creates one run, then finds it") {
  Daemon d;
  json::object first = d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"key", "r1/gpu1"}});
  REQUIRE(first.at("ok") == true);
  CHECK(first.at("existing") == false);
  std::string run(first.at("run").as_string());
  d.RunUntilState(run, "succeeded");
  // The same apply again, even after the run has finished: the same run, nothing started.
  json::object again = d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"key", "r1/gpu1"}});
  REQUIRE(again.at("ok") == true);
  CHECK(again.at("run").as_string() == run);
  CHECK(again.at("existing") == true);
  CHECK(d.Ask({{"op", "runs"}}).at("runs").as_array().size() == 1);
  json::object status = d.Ask({{"op", "status"}, {"key", "r1/gpu1"}});
  REQUIRE(status.at("ok") == true);
  CHECK(status.at("run").at("id").as_string() == run);
  CHECK(status.at("run").at("key") == "r1/gpu1");
  CHECK(d.Ask({{"op", "status"}, {"run", "two-1"}}).at("run").at("key") == "r1/gpu1");

  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", kFailing}, {"key", "r1/gpu1"}})) ==
        "idempotency key 'r1/gpu1' already names run two-1, created from another plan text or "
        "other variables");
  CHECK(Error(d.Ask({{"op", "status"}, {"key", "r1/gpu2"}})) == "no run has key 'r1/gpu2'");
  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"key", ""}})) ==
        "bad request: apply's \"key\" must be a string of 1 to 256 bytes");
  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"key", 7}})) ==
        "bad request: apply's \"key\" must be a string of 1 to 256 bytes");
  CHECK(Error(d.Ask({{"op", "apply"}, {"plan_text", kTwoSteps}, {"key", "a\nb"}})) ==
        "bad request: apply's \"key\" must not hold control characters");
  CHECK(d.Ask({{"op", "runs"}}).at("runs").as_array().size() == 1);
}
