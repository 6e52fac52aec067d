#include "protocol/run_wire.h"

#include <boost/json.hpp>
#include <cmath>

#include "protocol/wire_fields.h"

namespace deployd {

namespace json = boost::json;

namespace {

// A whole number goes out as an integer ("bytes": 1024, not 1024.0).
json::value Number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9e15) return static_cast<std::int64_t>(v);
  return v;
}

json::value OptNumber(const std::optional<double>& v) { return v ? Number(*v) : nullptr; }

}  // namespace

json::object EncodeProgress(const WireProgress& p) {
  json::object o;
  o["bytes"] = OptNumber(p.bytes);
  o["total_bytes"] = OptNumber(p.total_bytes);
  o["done"] = OptNumber(p.done);
  o["total"] = OptNumber(p.total);
  o["fraction"] = p.fraction ? json::value(std::round(*p.fraction * 1e4) / 1e4) : nullptr;
  o["rate_bps"] = p.rate_bps ? Number(std::round(*p.rate_bps)) : nullptr;
  o["eta_s"] = p.eta_s ? Number(std::ceil(*p.eta_s)) : nullptr;
  o["last_progress_at_ms"] = p.last_progress_at_ms;
  o["at_ms"] = p.at_ms;
  return o;
}

WireProgress DecodeProgress(const json::object& o) {
  WireFields f{o};
  WireProgress p;
  p.bytes = f.Number("bytes");
  p.total_bytes = f.Number("total_bytes");
  p.done = f.Number("done");
  p.total = f.Number("total");
  p.fraction = f.Number("fraction");
  p.rate_bps = f.Number("rate_bps");
  p.eta_s = f.Number("eta_s");
  p.last_progress_at_ms = f.Int("last_progress_at_ms");
  p.at_ms = f.Int("at_ms");
  return p;
}

json::object EncodeStep(const WireStep& s) {
  json::object o;
  o["id"] = s.id;
  o["phase"] = s.phase;
  o["state"] = s.state;
  o["attempts"] = s.attempts;
  o["started_at_ms"] = s.started_at_ms;
  o["finished_at_ms"] = s.finished_at_ms;
  o["exit_status"] = s.exit_status ? json::value(*s.exit_status) : json::value(nullptr);
  if (s.pid) o["pid"] = *s.pid;
  if (s.action) o["action"] = *s.action;
  o["reason"] = s.reason;
  if (s.evidence) o["evidence"] = *s.evidence;
  if (s.progress) o["progress"] = EncodeProgress(*s.progress);
  return o;
}

WireStep DecodeStep(const json::object& o) {
  WireFields f{o};
  WireStep s;
  s.id = f.Str("id");
  s.phase = f.Str("phase");
  s.state = f.Str("state");
  s.attempts = f.Int("attempts");
  s.started_at_ms = f.Int("started_at_ms");
  s.finished_at_ms = f.Int("finished_at_ms");
  s.exit_status = f.OptInt("exit_status");
  s.pid = f.OptInt("pid");
  s.action = f.Value("action");
  s.reason = f.Str("reason");
  s.evidence = f.Value("evidence");
  if (const json::object* p = f.Object("progress")) s.progress = DecodeProgress(*p);
  return s;
}

json::object EncodeRun(const WireRun& run) {
  json::object o;
  o["id"] = run.id;
  o["plan"] = run.plan;
  o["plan_file"] = run.plan_file;
  o["state"] = run.state;
  o["created_at_ms"] = run.created_at_ms;
  o["finished_at_ms"] = run.finished_at_ms;
  o["reason"] = run.reason;
  json::object vars;
  for (const auto& [k, v] : run.vars) vars[k] = v;
  o["vars"] = std::move(vars);
  if (!run.key.empty()) o["key"] = run.key;
  if (!run.applied_by.empty()) o["applied_by"] = run.applied_by;
  if (run.evidence) o["evidence"] = *run.evidence;
  if (!run.storage_fault.empty()) o["storage_fault"] = run.storage_fault;
  if (!run.steps.empty()) {
    json::array steps;
    for (const WireStep& s : run.steps) steps.push_back(EncodeStep(s));
    o["steps"] = std::move(steps);
  }
  return o;
}

WireRun DecodeRun(const json::object& o) {
  WireFields f{o};
  WireRun run;
  run.id = f.Str("id");
  run.plan = f.Str("plan");
  run.plan_file = f.Str("plan_file");
  run.state = f.Str("state");
  run.created_at_ms = f.Int("created_at_ms");
  run.finished_at_ms = f.Int("finished_at_ms");
  run.reason = f.Str("reason");
  if (const json::object* vars = f.Object("vars")) {
    for (const auto& [k, v] : *vars)
      if (v.is_string()) run.vars[std::string(k)] = std::string(v.as_string());
  }
  run.key = f.Str("key");
  run.applied_by = f.Str("applied_by");
  run.evidence = f.Value("evidence");
  run.storage_fault = f.Str("storage_fault");
  if (const json::value* steps = o.if_contains("steps"); steps && steps->is_array()) {
    for (const json::value& s : steps->as_array())
      if (s.is_object()) run.steps.push_back(DecodeStep(s.as_object()));
  }
  return run;
}

}  // namespace deployd
