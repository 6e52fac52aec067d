#include "engine/attempt_record.h"

#include <boost/json.hpp>

#include "util/json_fields.h"

namespace deployd {

namespace json = boost::json;

namespace {

constexpr StepEvent kStopEvents[] = {StepEvent::kActionFailed, StepEvent::kStalled,
                                     StepEvent::kVerifyFailed, StepEvent::kCancel};

std::optional<StepEvent> StopEventNamed(std::string_view name) {
  for (StepEvent e : kStopEvents)
    if (ToString(e) == name) return e;
  return std::nullopt;
}

}  // namespace

std::string AttemptRecord::ToJson() const {
  json::object o;
  o["kind"] = "supervised";
  o["status_file"] = status_file;
  o["log_offset"] = log_offset;
  if (!boot_id.empty()) o["boot_id"] = boot_id;
  if (!tag.empty()) o["tag"] = tag;
  if (fired_at_ms) o["fired_at_ms"] = fired_at_ms;
  if (action && supervisor) {
    o["pid"] = action->pid;
    o["start_time"] = action->start_time;
    o["supervisor_pid"] = supervisor->pid;
    o["supervisor_start_time"] = supervisor->start_time;
  }
  if (stop) {
    o["stop"] = {{"event", ToString(stop->event)},
                 {"reason", stop->reason},
                 {"evidence", stop->evidence},
                 {"final", stop->final}};
  }
  return json::serialize(o);
}

std::optional<AttemptRecord> AttemptRecord::FromJson(std::string_view text) {
  boost::system::error_code ec;
  json::value value = json::parse(text, ec);
  if (ec || !value.is_object()) return std::nullopt;
  const json::object& o = value.as_object();
  JsonFields f{o};
  std::string kind = f.Str("kind");
  if ((kind != "supervised" && kind != "background") || f.Str("status_file").empty())
    return std::nullopt;
  AttemptRecord r;
  r.status_file = f.Str("status_file");
  r.log_offset = f.U64("log_offset").value_or(0);
  r.boot_id = f.Str("boot_id");
  r.tag = f.Str("tag");
  r.fired_at_ms = static_cast<std::int64_t>(f.U64("fired_at_ms").value_or(0));
  auto pid = f.U64("pid");
  auto start_time = f.U64("start_time");
  auto supervisor_pid = f.U64("supervisor_pid");
  auto supervisor_start_time = f.U64("supervisor_start_time");
  if (pid && start_time && supervisor_pid && supervisor_start_time && !r.boot_id.empty()) {
    r.action = ProcessIdentity{static_cast<pid_t>(*pid), *start_time, r.boot_id};
    r.supervisor =
        ProcessIdentity{static_cast<pid_t>(*supervisor_pid), *supervisor_start_time, r.boot_id};
  }
  if (const json::value* stop = o.if_contains("stop"); stop && stop->is_object()) {
    JsonFields s{stop->as_object()};
    if (std::optional<StepEvent> event = StopEventNamed(s.Str("event"))) {
      PendingStop pending;
      pending.event = *event;
      pending.reason = s.Str("reason");
      if (const json::value* e = stop->as_object().if_contains("evidence"); e && e->is_object())
        pending.evidence = e->as_object();
      pending.final = s.Bool("final", false);
      r.stop = std::move(pending);
    }
  }
  return r;
}

}  // namespace deployd
