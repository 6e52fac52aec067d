#include "control/request_handlers.h"

#include <algorithm>
#include <boost/json.hpp>
#include <fstream>

#include "control/failure_report.h"
#include "control/history_report.h"
#include "control/metrics_report.h"
#include "control/plan_parsing.h"
#include "control/plan_preview.h"
#include "control/run_records.h"
#include "deployd/protocol.h"
#include "engine/wire_records.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "util/log_marks.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::uintmax_t kMaxLogBytes = 1u << 20;  // per file, per answer: the newest MiB

const json::string* StringField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

// The newest MiB of a log file, from a line's start: `text`, whose bytes from `body` on are
// the file's from offset `from` to `end`.
struct LogPart {
  std::string text;
  size_t body = 0;
  std::uint64_t from = 0;
  std::uint64_t end = 0;
};

LogPart ReadTail(const std::string& path) {
  LogPart part;
  std::ifstream in(path, std::ios::binary);
  if (!in) return part;
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(kMaxLogBytes)
                             ? size - static_cast<std::streamoff>(kMaxLogBytes)
                             : 0;
  in.seekg(start);
  part.text.assign(static_cast<size_t>(size - start), '\0');
  in.read(part.text.data(), static_cast<std::streamsize>(part.text.size()));
  part.text.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  part.from = static_cast<std::uint64_t>(start);
  part.end = part.from + part.text.size();
  if (start > 0) {
    size_t cut = part.text.find('\n') + 1;  // npos + 1: no line ends in it, keep it whole
    const std::string omitted = "[… earlier output omitted …]\n";
    part.text = omitted + part.text.substr(cut);
    part.from += cut;
    part.body = omitted.size();
  }
  return part;
}

bool IsTrue(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_bool() && v->as_bool();
}

json::object StatusAnswer(const Status& s) {
  return s.ok() ? OkAnswer() : ErrorAnswer(s.message());
}

// The ops that name a run, answered once "run" is there.
bool NeedsRun(const std::string& op) {
  return op == "status" || op == "logs" || op == "cancel" || op == "retry" || op == "skip" ||
         op == "approve" || op == "pause" || op == "resume" || op == "why" || op == "show" ||
         op == "delete";
}

// An idempotency key, "" when the request has none: printable text, and not too long to be
// kept in every run's row.
Result<std::string> DecodeKey(const json::object& request, const std::string& op) {
  const json::value* v = request.if_contains("key");
  if (!v) return std::string();
  constexpr size_t kMaxKey = 256;
  if (!v->is_string() || v->as_string().empty() || v->as_string().size() > kMaxKey)
    return Status::Error("bad request: " + op + "'s \"key\" must be a string of 1 to " +
                         std::to_string(kMaxKey) + " bytes");
  for (unsigned char c : v->as_string())
    if (c < 0x20 || c == 0x7f)
      return Status::Error("bad request: " + op + "'s \"key\" must not hold control characters");
  return std::string(v->as_string());
}

// `status` of the run created under an idempotency key.
json::object StatusByKey(RequestContext& context, const json::object& request) {
  Result<std::string> key = DecodeKey(request, "status");
  if (!key.ok()) return ErrorAnswer(key.status().message());
  Result<std::optional<RunRecord>> loaded = context.store.LoadRunByKey(key.value(), true);
  if (!loaded.ok()) return ErrorAnswer(loaded.status().message());
  if (!loaded.value()) return ErrorAnswer("no run has key '" + key.value() + "'");
  return HandleStatus(context, *loaded.value());
}

// The reads: status, why, logs, of a run that must be recorded.
json::object AnswerRead(RequestContext& context, const std::string& op, const std::string& run,
                        const json::string* step, bool timestamps) {
  Result<std::optional<RunRecord>> loaded = context.store.LoadRun(run, true);
  if (!loaded.ok()) return ErrorAnswer(loaded.status().message());
  if (!loaded.value()) return ErrorAnswer("no run '" + run + "'");
  const RunRecord& record = *loaded.value();
  if (op == "status") return HandleStatus(context, record);
  if (op == "why") return HandleWhy(context, record);
  return HandleLogs(context, record,
                    step ? std::optional<std::string>(std::string(*step)) : std::nullopt,
                    timestamps);
}

}  // namespace

Result<json::object> DecodeRequest(const std::string& line) {
  boost::system::error_code ec;
  json::value parsed = json::parse(line, ec);
  if (ec || !parsed.is_object()) return Status::Error("bad request: not a JSON object");
  json::object& req = parsed.as_object();
  const json::value* v = req.if_contains("v");
  if (!v || !v->is_int64()) return Status::Error("bad request: missing protocol version \"v\"");
  if (v->as_int64() != kProtocolVersion)
    return Status::Error("protocol version " + std::to_string(v->as_int64()) +
                         " is not supported (deployd " + DEPLOYD_VERSION + " speaks " +
                         std::to_string(kProtocolVersion) + ")");
  if (!StringField(req, "op")) return Status::Error("bad request: missing \"op\"");
  return std::move(req);
}

std::string RequestOp(const json::object& request) {
  return std::string(*StringField(request, "op"));
}

Result<PlanSubmission> DecodePlanSubmission(const json::object& request, const std::string& op) {
  PlanSubmission plan;
  const json::string* text = StringField(request, "plan_text");
  if (!text) return Status::Error("bad request: " + op + " needs \"plan_text\"");
  plan.text = std::string(*text);
  if (const json::string* file = StringField(request, "plan_file")) plan.file = std::string(*file);
  if (const json::value* vars = request.if_contains("vars")) {
    if (!vars->is_object()) return Status::Error("bad request: \"vars\" must be an object");
    for (const auto& [k, v] : vars->as_object()) {
      if (!v.is_string()) return Status::Error("bad request: variable values must be strings");
      plan.vars[std::string(k)] = std::string(v.as_string());
    }
  }
  return plan;
}

namespace {

json::object AnswerNow(RequestContext& context, const json::object& request) {
  const std::string op = RequestOp(request);
  if (op == "ping") return HandlePing();
  if (op == "runs") return HandleRuns(context, request);
  if (op == "prune") return HandlePrune(context, request);
  if (op == "status" && !request.contains("run") && request.contains("key"))
    return StatusByKey(context, request);
  if (op == "history") return HandleHistory(context, request);
  if (op == "metrics") return HandleMetrics(context);
  if (!NeedsRun(op)) return ErrorAnswer("bad request: unknown op '" + op + "'");
  const json::string* run_field = StringField(request, "run");
  if (!run_field) return ErrorAnswer("bad request: " + op + " needs \"run\"");
  const std::string run(*run_field);
  const json::string* step = StringField(request, "step");
  if (op == "show") return HandleShow(context, run, IsTrue(request, "plan_text"));
  if (op == "delete") return HandleDelete(context, run);
  if (op == "pause") return HandlePause(context, run);
  if (op == "resume") return HandleResume(context, run);
  if (op == "retry") return HandleRetry(context, run, step ? std::string(*step) : "");
  if ((op == "approve" || op == "skip") && !step)
    return ErrorAnswer("bad request: " + op + " needs \"step\"");
  if (op == "approve") return HandleApprove(context, run, std::string(*step));
  if (op == "skip") return HandleSkip(context, run, std::string(*step));
  return AnswerRead(context, op, run, step, IsTrue(request, "timestamps"));
}

}  // namespace

void Answer(RequestContext& context, const json::object& request, Reply reply) {
  const json::string* run = StringField(request, "run");
  if (RequestOp(request) == "cancel" && run) return HandleCancel(context, std::string(*run), reply);
  reply(AnswerNow(context, request));
}

json::object HandlePing() {
  json::object o = OkAnswer();
  o["version"] = DEPLOYD_VERSION;
  o["protocol"] = kProtocolVersion;
  return o;
}

asio::awaitable<json::object> HandleApply(RequestContext& context, json::object request) {
  Result<PlanSubmission> plan = DecodePlanSubmission(request, "apply");
  if (!plan.ok()) co_return ErrorAnswer(plan.status().message());
  const json::value* wait_lock = request.if_contains("wait_lock");
  Result<std::string> key = DecodeKey(request, "apply");
  if (!key.ok()) co_return ErrorAnswer(key.status().message());
  ParseResult parsed = co_await ParsePlanAside(plan->text, plan->file, plan->vars);
  ApplyResult r = context.runs.Apply(std::move(parsed), plan->text, plan->file, plan->vars,
                                     wait_lock && wait_lock->is_bool() && wait_lock->as_bool(),
                                     key.value(), context.peer);
  if (!r.status.ok()) {
    json::object o = ErrorAnswer(r.status.message());
    if (!r.diagnostics.empty()) {
      json::array d;
      for (const auto& s : r.diagnostics) d.emplace_back(s);
      o["diagnostics"] = std::move(d);
    }
    co_return o;
  }
  json::object o = OkAnswer();
  o["run"] = r.run_id;
  o["existing"] = r.existing;
  co_return o;
}

void HandleCancel(RequestContext& context, const std::string& run, Reply reply) {
  context.runs.Cancel(run, context.peer, [reply](Status s) { reply(StatusAnswer(s)); });
}

json::object HandlePause(RequestContext& context, const std::string& run) {
  return StatusAnswer(context.runs.Pause(run, context.peer));
}

json::object HandleResume(RequestContext& context, const std::string& run) {
  return StatusAnswer(context.runs.Resume(run, context.peer));
}

json::object HandleApprove(RequestContext& context, const std::string& run,
                           const std::string& step) {
  return StatusAnswer(context.runs.Approve(run, step, context.peer));
}

json::object HandleRetry(RequestContext& context, const std::string& run, const std::string& step) {
  return StatusAnswer(context.runs.Retry(run, step, context.peer));
}

json::object HandleSkip(RequestContext& context, const std::string& run, const std::string& step) {
  return StatusAnswer(context.runs.Skip(run, step, context.peer));
}

json::object HandleStatus(RequestContext& context, const RunRecord& run) {
  WireRun wire = ToWire(run);
  context.runs.AddProgress(wire);
  context.runs.AddStorageFault(wire);
  json::object o = OkAnswer();
  o["run"] = EncodeRun(wire);
  return o;
}

json::object HandleWhy(RequestContext& context, const RunRecord& run) {
  Result<std::vector<EventRecord>> events = context.store.Events(run.id);
  if (!events.ok()) return ErrorAnswer(events.status().message());
  json::object o = OkAnswer();
  json::object why = FailureReport(run, events.value(), [&](const std::string& step) {
    return context.runs.LogPath(run.id, step);
  });
  WireRun wire = ToWire(run);
  context.runs.AddProgress(wire);
  context.runs.AddStorageFault(wire);
  if (!wire.storage_fault.empty()) why["storage_fault"] = wire.storage_fault;
  why["benchmarks"] = RunBenchmarks(run);
  // What is still going, and who runs it: the first thing to look at when a run seems stuck.
  json::array running;
  for (const WireStep& s : wire.steps) {
    if (s.state != "running") continue;
    json::object r{{"step", s.id}, {"attempts", s.attempts}, {"started_at_ms", s.started_at_ms}};
    r["pid"] = s.pid ? json::value(*s.pid) : json::value(nullptr);
    running.push_back(std::move(r));
  }
  why["running"] = std::move(running);
  o["why"] = std::move(why);
  return o;
}

json::object HandleLogs(RequestContext& context, const RunRecord& run,
                        const std::optional<std::string>& step, bool timestamps) {
  json::array logs;
  bool found = false;
  for (const StepRecord& s : run.steps) {
    if (step && s.id != *step) continue;
    found = true;
    std::string path = context.runs.LogPath(run.id, s.id);
    LogPart rotated = ReadTail(path + ".1");
    LogPart current = ReadTail(path);
    std::string text = rotated.text + current.text;
    if (!step && text.empty() && s.attempts == 0) continue;
    json::object entry{{"step", s.id}, {"text", text}, {"path", path}};
    AddLogMarks(entry, ReadLogMarks(path + ".1", rotated.from, rotated.end, timestamps),
                rotated.from, rotated.body, timestamps);
    AddLogMarks(entry, ReadLogMarks(path, current.from, current.end, timestamps), current.from,
                rotated.text.size() + current.body, timestamps);
    logs.push_back(std::move(entry));
  }
  if (!found) return ErrorAnswer("run " + run.id + " has no step '" + *step + "'");
  json::object o = OkAnswer();
  o["logs"] = std::move(logs);
  return o;
}

asio::awaitable<json::object> HandlePlan(json::object request) {
  Result<PlanSubmission> plan = DecodePlanSubmission(request, "plan");
  if (!plan.ok()) co_return ErrorAnswer(plan.status().message());
  co_return co_await PreviewPlan(plan->text, plan->file, plan->vars);
}

}  // namespace deployd
