#include "checks/probe_in_child.h"

#include <boost/asio/this_coro.hpp>
#include <boost/json/parse.hpp>
#include <memory>
#include <string>

#include "checks/check_text.h"
#include "checks/probe_process.h"
#include "checks/probe_request.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// The program a probe child runs: deployd itself.
constexpr char kProbeProgram[] = "/proc/self/exe";

}  // namespace

asio::awaitable<CheckOutcome> ProbeInChild(const Check& check) {
  json::object evidence = CheckEvidence(check);
  auto ex = co_await asio::this_coro::executor;
  auto state = std::make_shared<ProbeChildExit>(ex);
  auto output = std::make_shared<std::string>();
  SpawnOptions options;
  options.argv = {kProbeProgram, std::string(kBuiltinProbeFlag), ProbeRequestJson(check)};
  Result<std::shared_ptr<ChildProcess>> started =
      StartProbeChild(ex, options, state, [output](std::string_view piece) { *output += piece; });
  if (!started.ok()) {
    evidence["error"] = started.status().message();
    co_return MakeOutcome(check, false, started.status().message(), std::move(evidence));
  }
  std::shared_ptr<ChildProcess> child = *started;
  if (!co_await WaitForProbeChild(*state, *child, check.timeout)) {
    child->Terminate(kProbeChildGrace);
    co_await WaitForProbeChild(*state, *child, kProbeChildGrace + std::chrono::seconds(1));
    std::string message =
        "no answer within " + FormatDuration(check.timeout) + " (raise the check's 'timeout')";
    evidence["error"] = message;
    co_return MakeOutcome(check, false, message, std::move(evidence));
  }
  boost::system::error_code ec;
  json::value parsed = json::parse(*output, ec);
  const json::object* answer = !ec && parsed.is_object() ? &parsed.as_object() : nullptr;
  const json::value* summary = answer ? answer->if_contains("summary") : nullptr;
  if (!summary || !summary->is_string()) {
    std::string message = "the probe gave no answer (" + state->exit->ToString() + ")";
    evidence["error"] = message;
    evidence["output"] = Utf8Excerpt(*output, kBodyExcerptBytes);
    co_return MakeOutcome(check, false, message, std::move(evidence));
  }
  CheckOutcome outcome;
  outcome.passed = state->exit->ok();
  outcome.summary = std::string(summary->as_string());
  if (const json::value* e = answer->if_contains("evidence"); e && e->is_object())
    outcome.evidence = e->as_object();
  outcome.evidence["check"] = ToString(check.kind);
  if (!outcome.evidence.contains("target")) outcome.evidence["target"] = CheckTarget(check);
  co_return outcome;
}

}  // namespace deployd
