// deployctl why: the evidence of a failed run on one screen, so that an operator does not have
// to piece it together from status, logs and the events: the failing step and its reason, what
// the failing check last saw, the exit status, the last lines of the step's log, and the
// timeline of the run.
#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/watch_view.h"
#include "deployd/protocol.h"
#include "util/clock.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// The timeline shows this many of the latest events; --json has them all.
constexpr size_t kTimelineEvents = 30;

// Evidence keys in the order an operator reads them; others follow alphabetically.
constexpr const char* kEvidenceOrder[] = {
    "check",      "target",   "status_code", "body_excerpt", "error",    "exit_status",
    "signal",     "fail_on",  "line",        "timeout_ms",   "version",  "size",
    "free_bytes", "searched", "pid",         "comm",         "attempts", "elapsed_ms"};

// A value of the evidence as it is printed; a time (a key ending in _at_ms) as a time.
std::string Scalar(const json::value& v, std::string_view key = "") {
  if (key.ends_with("_at_ms") && v.is_int64() && v.as_int64() > 0)
    return When(v.as_int64(), NowMs());
  if (v.is_double()) {  // a benchmark's figures: 57.3, not 5.73E1
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", v.as_double());
    return text;
  }
  return v.is_string() ? std::string(v.as_string()) : json::serialize(v);
}

// The lines that show `evidence`, leaving out what `shown` has (printed elsewhere already:
// the exit status, the log's tail).
std::vector<std::string> EvidenceLines(const json::object& evidence, const std::string& indent,
                                       const json::object& shown = {}) {
  std::vector<std::string> lines;
  auto left_out = [&](const json::string& key, const json::value& value) {
    // The summary is the reason, printed above.
    if (key == "summary") return true;
    const json::value* same = shown.if_contains(key);
    return same && *same == value;
  };
  std::vector<std::string> keys;
  for (const char* key : kEvidenceOrder) {
    const json::value* value = evidence.if_contains(key);
    // Arrays and objects are printed as lines below.
    if (value && !left_out(key, *value) && !value->is_array() && !value->is_object())
      keys.push_back(key);
  }
  std::vector<std::string> rest;
  for (const auto& [key, value] : evidence) {
    std::string k(key);
    // Arrays are printed as lines below.
    if (left_out(key, value) || value.is_array() || value.is_object()) continue;
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) rest.push_back(k);
  }
  std::sort(rest.begin(), rest.end());
  keys.insert(keys.end(), rest.begin(), rest.end());
  size_t width = 0;
  for (const auto& k : keys) width = std::max(width, k.size());
  for (const auto& k : keys)
    lines.push_back(indent + k + ":" + std::string(width - k.size() + 1, ' ') +
                    Scalar(evidence.at(k), k));
  for (const auto& [key, value] : evidence) {
    if (!value.is_array() || left_out(key, value)) continue;
    lines.push_back(indent + std::string(key) + ":");
    for (const auto& item : value.as_array()) lines.push_back(indent + "  " + Scalar(item));
  }
  // A benchmark's figures and its baseline: their members, one level in.
  for (const auto& [key, value] : evidence) {
    if (!value.is_object() || left_out(key, value)) continue;
    lines.push_back(indent + std::string(key) + ":");
    for (std::string& line : EvidenceLines(value.as_object(), indent + "  "))
      lines.push_back(std::move(line));
  }
  return lines;
}

void PrintTimeline(const json::array& timeline) {
  std::cout << "timeline:\n";
  size_t skip = timeline.size() > kTimelineEvents ? timeline.size() - kTimelineEvents : 0;
  if (skip) std::cout << "  (" << skip << " earlier events; --json has them all)\n";
  for (size_t i = skip; i < timeline.size(); ++i) {
    const json::object& e = timeline[i].as_object();
    std::string step = Str(e, "step");
    std::string state = Str(e, "state");
    std::string kind = Str(e, "kind");
    if (kind == "run.preflight") state = "preflight";
    if (kind == "run.created") state = "created";
    char head[96];
    std::snprintf(head, sizeof head, "  %9s  %-24s %-10s",
                  ("+" + FormatElapsed(Int(e, "offset_ms"))).c_str(),
                  (step.empty() ? "run" : step).c_str(), state.c_str());
    std::string line = head;
    if (!Str(e, "detail").empty()) line += " " + Str(e, "detail");
    line.erase(line.find_last_not_of(' ') + 1);
    std::cout << line << "\n";
  }
}

}  // namespace

int Why(Client& client, const std::string& run_id, bool json_out) {
  json::object answer = client.Call({{"op", "why"}, {"run", run_id}});
  const json::object& why = answer["why"].as_object();
  std::string state = Str(why, "state");
  int code = state == "failed" || state == "cancelled" ? kExitRunFailed : kExitOk;
  if (json_out) {
    std::cout << json::serialize(why) << "\n";
    return code;
  }
  std::string reason = Str(why, "reason");
  // What deployd cannot record now comes first: the rest is what it recorded before.
  if (std::string fault = Str(why, "storage_fault"); !fault.empty())
    std::cout << "deployd " << fault << "\n\n";
  if (state != "failed") {
    std::cout << "run " << run_id << " did not fail: it is " << state;
    if (!reason.empty()) std::cout << " (" << reason << ")";
    std::cout << "\n";
    if (const json::value* r = why.if_contains("running"); r && r->is_array()) {
      for (const json::value& item : r->as_array()) {
        if (!item.is_object()) continue;
        const json::object& s = item.as_object();
        std::cout << "running: " << Str(s, "step") << ", attempt " << Int(s, "attempts");
        if (Int(s, "started_at_ms") > 0)
          std::cout << ", for " << FormatElapsed(NowMs() - Int(s, "started_at_ms"));
        if (Int(s, "pid") > 0) std::cout << ", pid " << Int(s, "pid");
        std::cout << "\n";
      }
    }
    // What its benchmarks measured (a failed one's figures are in its evidence).
    if (const json::value* b = why.if_contains("benchmarks"); b && b->is_array()) {
      for (const json::value& item : b->as_array()) {
        if (!item.is_object()) continue;
        std::string line = BenchmarkLine(item.as_object());
        if (!line.empty())
          std::cout << "benchmark of " << Str(item.as_object(), "step") << ": " << line << "\n";
      }
    }
    return code;
  }
  std::cout << "run " << run_id << " failed after "
            << FormatElapsed(Int(why, "finished_at_ms") - Int(why, "created_at_ms")) << ": "
            << reason << "\n\n";
  if (const json::value* step = why.if_contains("failing_step"); step && step->is_object()) {
    const json::object& s = step->as_object();
    std::cout << "failing step: " << Str(s, "id");
    if (Str(s, "phase") == "on_failure") std::cout << " (on_failure)";
    std::cout << ", attempt " << Int(s, "attempts") << "\n";
    std::cout << "  reason:      " << Str(s, "reason") << "\n";
    const json::value& exit_status = s.at("exit_status");
    std::cout << "  exit status: "
              << (exit_status.is_null() ? "none (the action did not exit)" : Scalar(exit_status))
              << "\n";
    const json::array& tail = s.at("log_tail").as_array();
    // The output a failed action left is usually the log's tail: shown once.
    json::object shown{{"exit_status", exit_status}, {"output_tail", tail}};
    if (const json::value* ev = s.if_contains("evidence"); ev && ev->is_object()) {
      std::vector<std::string> lines = EvidenceLines(ev->as_object(), "    ", shown);
      if (!lines.empty()) std::cout << "  evidence:\n";
      for (const auto& line : lines) std::cout << line << "\n";
    }
    if (tail.empty()) {
      std::cout << "  log: empty (" << Str(s, "log_path") << ")\n";
    } else {
      std::cout << "  log (last "
                << (tail.size() == 1 ? "line" : std::to_string(tail.size()) + " lines") << " of "
                << Str(s, "log_path") << "):\n";
      for (const auto& l : tail) std::cout << "    " << Scalar(l) << "\n";
    }
  } else if (const json::value* pf = why.if_contains("preflight"); pf && pf->is_object()) {
    const json::value* failures = pf->as_object().if_contains("failures");
    if (!failures || !failures->is_array()) {
      std::cout << "failing preflight check (no step was started):\n";
      for (const auto& line : EvidenceLines(pf->as_object(), "  ")) std::cout << line << "\n";
    } else {
      std::cout << "failing preflight checks (no step was started):\n";
      for (const auto& failure : failures->as_array()) {
        if (!failure.is_object()) continue;
        std::vector<std::string> lines = EvidenceLines(failure.as_object(), "    ");
        for (std::size_t i = 0; i < lines.size(); ++i)
          std::cout << (i ? lines[i] : "  - " + lines[i].substr(4)) << "\n";
      }
    }
  }
  std::cout << "\n";
  PrintTimeline(why.at("timeline").as_array());
  return code;
}

}  // namespace deployd::ctl
