// The control protocol's request decoding (control/request_handlers.h, answer_streams.h) on
// any request line, answered as ControlServer answers it but without a socket: a real RunStore
// on a temporary SQLite file and a real RunManager, made once. The store stays empty (no run
// is started), so every request that names a run is refused after its decoding; `apply` and
// `plan` are decoded and their plan parsed as the parsing thread parses it, but no run starts
// and no check is probed (a fuzzed preflight could name any command).
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "control/answer_streams.h"
#include "control/request_handlers.h"
#include "plan/plan_parser.h"
#include "protocol/answer.h"

using namespace deployd;
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// Made once and never destroyed: a run manager outlives every request, as in the daemon.
struct Daemon {
  std::string dir;
  asio::io_context io;
  std::unique_ptr<RunStore> store;
  std::unique_ptr<RunManager> runs;

  Daemon() {
    std::string pattern = std::filesystem::temp_directory_path() / "deployd_control_fuzz.XXXXXX";
    if (!::mkdtemp(pattern.data())) std::abort();
    dir = pattern;
    Result<std::unique_ptr<RunStore>> opened = RunStore::Open(dir + "/deployd.db");
    if (!opened.ok()) std::abort();
    store = std::move(opened.value());
    RunManagerOptions options;
    options.state_dir = dir;
    options.supervisor_exe = "/bin/false";
    options.unit_dir = dir + "/units";
    runs = std::make_unique<RunManager>(io.get_executor(), *store, options);
  }
};

Daemon& TheDaemon() {
  static Daemon* daemon = [] {
    Daemon* d = new Daemon;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(TheDaemon().dir, ec);
    });
    return d;
  }();
  return *daemon;
}

void AnswerLine(Daemon& daemon, const std::string& line) {
  Result<json::object> request = DecodeRequest(line);
  if (!request.ok()) {
    (void)json::serialize(ErrorAnswer(request.status().message()));
    return;
  }
  const json::object& req = request.value();
  const std::string op = RequestOp(req);
  RequestContext context{*daemon.runs, *daemon.store, "fuzz (uid 0)"};
  if (op == "apply" || op == "plan") {
    Result<PlanSubmission> plan = DecodePlanSubmission(req, op);
    if (plan.ok()) (void)ParsePlan(plan->text, plan->file, plan->vars);
    return;
  }
  if (op == "follow") {
    (void)FollowRun(context, req, [] {});
    return;
  }
  if (const json::value* f = req.if_contains("follow"); op == "logs" && f && *f == true) {
    (void)FollowLog(context, req, daemon.io.get_executor(), [] {});
    daemon.io.restart();
    daemon.io.poll();
    return;
  }
  std::optional<json::object> answer;
  Answer(context, req, [&](json::object a) { answer = std::move(a); });
  daemon.io.restart();
  daemon.io.poll();
  if (!answer) std::abort();  // with no run, every answer is due at once
  (void)json::serialize(*answer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // ControlServer hands on a line without its '\n'; the input is one line, its first.
  std::string text(reinterpret_cast<const char*>(data), size);
  AnswerLine(TheDaemon(), text.substr(0, text.find('\n')));
  return 0;
}
