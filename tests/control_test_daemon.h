// What the tests of the control protocol's handlers share (request_handlers_test.cc,
// run_records_test.cc): a daemon without its socket — a real RunStore on a temporary SQLite
// file and a real RunManager on an io_context run by the test — that answers request lines as
// ControlServer does, its peer "alice (uid 1000)". Needs DEPLOYD_TEST_BIN, the real deployd (the
// supervisor of every action).
#ifndef DEPLOYD_TESTS_CONTROL_TEST_DAEMON_H_
#define DEPLOYD_TESTS_CONTROL_TEST_DAEMON_H_

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "control/request_handlers.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "test_support.h"

namespace deployd::testing {

namespace asio = boost::asio;
namespace json = boost::json;

// A plan of two steps that succeed, the first saying "hello from the first step".
inline constexpr const char* kTwoSteps = R"(version: 1
name: two
steps:
  - id: hello
    run: echo hello from the first step
  - id: second
    run: "true"
)";

// A plan that waits for the approval of its step "confirm", after "prepare".
inline constexpr const char* kApproval = R"(version: 1
name: gated
steps:
  - id: prepare
    run: "true"
  - id: confirm
    approval: the dashboard is green
  - id: finish
    run: "true"
)";

// A plan whose one step fails (exit status 3, after printing "fetching").
inline constexpr const char* kFailing = R"(version: 1
name: failing
steps:
  - id: fetch
    run: [sh, -c, "echo fetching; exit 3"]
)";

// A daemon without its socket: the store, the run manager, the io_context they run on.
class Daemon {
 public:
  Daemon() {
    Result<std::unique_ptr<RunStore>> store = RunStore::Open(dir_.File("deployd.db"));
    REQUIRE(store.ok());
    store_ = std::move(store.value());
    RunManagerOptions options;
    options.state_dir = dir_.path();
    options.supervisor_exe = DEPLOYD_TEST_BIN;  // every action runs under the real supervisor
    runs_ = std::make_unique<RunManager>(io_.get_executor(), *store_, options);
  }
  ~Daemon() {
    runs_->Shutdown();
    runs_.reset();
  }

  RequestContext Context() { return {*runs_, *store_, "alice (uid 1000)"}; }
  asio::io_context& io() { return io_; }
  RunStore& store() { return *store_; }
  const std::string& dir() const { return dir_.path(); }

  // A request line answered as ControlServer answers it (neither a stream nor `plan`).
  json::object AskLine(const std::string& line) {
    Result<json::object> request = DecodeRequest(line);
    if (!request.ok()) return ErrorAnswer(request.status().message());
    RequestContext context = Context();
    std::optional<json::object> answer;
    if (RequestOp(request.value()) == "apply") {
      // The server sends the answer before the run's first step can start: so does this.
      asio::co_spawn(io_, HandleApply(context, request.value()),
                     [&](std::exception_ptr, json::object a) {
                       answer = std::move(a);
                       io_.stop();
                     });
    } else {
      Answer(context, request.value(), [&](json::object a) { answer = std::move(a); });
    }
    RunUntil([&] { return answer.has_value(); });
    return *answer;
  }
  json::object Ask(json::object request) {
    request["v"] = kProtocolVersion;
    return AskLine(json::serialize(request));
  }

  std::string Apply(const std::string& plan_text) {
    json::object answer = Ask({{"op", "apply"}, {"plan_text", plan_text}, {"plan_file", "p.yaml"}});
    REQUIRE(answer.at("ok") == true);
    return std::string(answer.at("run").as_string());
  }

  std::string RunState(const std::string& run) {
    json::object answer = Ask({{"op", "status"}, {"run", run}});
    REQUIRE(answer.at("ok") == true);
    return std::string(answer.at("run").at("state").as_string());
  }

  // Runs the io_context until `done` holds (at most 20 s).
  template <typename Done>
  void RunUntil(Done done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(10));
    }
    REQUIRE(done());
  }
  // A run that has finished has also left the run manager's memory (which is posted).
  void RunUntilState(const std::string& run, const std::string& state) {
    bool finished = state == "succeeded" || state == "failed" || state == "cancelled";
    RunUntil([&] { return RunState(run) == state && (!finished || runs_->active_runs() == 0); });
  }

 private:
  TempDir dir_;  // removed last, once nothing runs in it
  asio::io_context io_;
  std::unique_ptr<RunStore> store_;
  std::unique_ptr<RunManager> runs_;
};

// The message of a refusal.
inline std::string Error(const json::object& answer) {
  REQUIRE(answer.at("ok") == false);
  return std::string(answer.at("error").as_string());
}

}  // namespace deployd::testing

#endif  // DEPLOYD_TESTS_CONTROL_TEST_DAEMON_H_
