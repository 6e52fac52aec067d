#include "engine/wire_records.h"

#include <boost/json.hpp>

namespace deployd {

namespace json = boost::json;

namespace {

std::optional<json::value> ParsedJson(const std::string& text) {
  if (text.empty()) return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return std::nullopt;
  return v;
}

}  // namespace

WireStep ToWire(const StepRecord& s) {
  WireStep w;
  w.id = s.id;
  w.phase = s.phase;
  w.state = ToString(s.state);
  w.attempts = s.attempts;
  w.started_at_ms = s.started_at_ms;
  w.finished_at_ms = s.finished_at_ms;
  if (s.exit_status) w.exit_status = *s.exit_status;
  w.pid = s.pid;
  w.action = ParsedJson(s.action);
  w.reason = s.reason;
  w.evidence = ParsedJson(s.evidence);
  return w;
}

WireRun ToWire(const RunRecord& run) {
  WireRun w;
  w.id = run.id;
  w.plan = run.plan_name;
  w.plan_file = run.plan_file;
  w.state = ToString(run.state);
  w.created_at_ms = run.created_at_ms;
  w.finished_at_ms = run.finished_at_ms;
  w.reason = run.reason;
  w.vars = run.vars;
  w.key = run.key;
  w.applied_by = run.applied_by;
  w.evidence = ParsedJson(run.evidence);
  for (const StepRecord& s : run.steps) w.steps.push_back(ToWire(s));
  return w;
}

WireEvent ToWire(const std::string& run_id, const EventRecord& event) {
  WireEvent w;
  w.run = run_id;
  w.seq = event.seq;
  w.step = event.step_id;
  w.kind = event.kind;
  w.state = event.state;
  w.detail = event.detail;
  w.at_ms = event.at_ms;
  return w;
}

WireProgress ToWire(const ProgressSnapshot& s) {
  auto number = [](const auto& v) -> std::optional<double> {
    if (!v) return std::nullopt;
    return static_cast<double>(*v);
  };
  WireProgress w;
  w.bytes = number(s.bytes);
  w.total_bytes = number(s.total_bytes);
  w.done = s.done;
  w.total = s.total;
  w.fraction = s.fraction;
  w.rate_bps = s.rate_bps;
  w.eta_s = s.eta_s;
  w.last_progress_at_ms = s.last_progress_at_ms;
  w.at_ms = s.at_ms;
  return w;
}

json::object RunToJson(const RunRecord& run) { return EncodeRun(ToWire(run)); }

json::object EventToJson(const std::string& run_id, const EventRecord& event) {
  return EncodeEvent(ToWire(run_id, event));
}

}  // namespace deployd
