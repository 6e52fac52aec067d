#include "control/failure_report.h"

#include <boost/json.hpp>
#include <fstream>

#include "deployd/states.h"
#include "util/utf8_text.h"

namespace deployd {

namespace json = boost::json;

namespace {

constexpr std::streamoff kTailBytes = 64 << 10;

// The complete lines at the end of one file, oldest first.
std::vector<std::string> FileTail(const std::string& path, std::size_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = size > kTailBytes ? size - kTailBytes : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  // A read that starts mid-file starts mid-line: that partial line is dropped.
  if (start > 0) text.erase(0, std::min(text.size(), text.find('\n') + 1));
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (size_t cr = line.rfind('\r'); cr != std::string::npos) line.erase(0, cr + 1);
    lines.push_back(std::move(line));
  }
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<long>(count));
  return lines;
}

json::value ParsedOrNull(const std::string& text) {
  if (text.empty()) return nullptr;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  return ec ? json::value(nullptr) : v;
}

}  // namespace

std::vector<std::string> LogTail(const std::string& path, std::size_t count) {
  std::vector<std::string> lines = FileTail(path, count);
  if (lines.size() < count) {
    std::vector<std::string> older = FileTail(path + ".1", count - lines.size());
    lines.insert(lines.begin(), older.begin(), older.end());
  }
  return lines;
}

json::object FailureReport(const RunRecord& run, const std::vector<EventRecord>& events,
                           const std::function<std::string(const std::string&)>& log_path) {
  json::object o;
  o["run"] = run.id;
  o["plan"] = run.plan_name;
  o["state"] = ToString(run.state);
  o["failed"] = run.state == RunState::kFailed;
  o["reason"] = run.reason;
  o["created_at_ms"] = run.created_at_ms;
  o["finished_at_ms"] = run.finished_at_ms;

  const StepRecord* failing = nullptr;
  for (const char* phase : {"main", "on_failure"}) {
    for (const StepRecord& s : run.steps) {
      if (!failing && s.phase == phase && s.state == StepState::kFailed) failing = &s;
    }
  }
  if (failing && run.state == RunState::kFailed) {
    json::object step;
    step["id"] = failing->id;
    step["phase"] = failing->phase;
    step["attempts"] = failing->attempts;
    step["reason"] = failing->reason;
    step["exit_status"] =
        failing->exit_status ? json::value(*failing->exit_status) : json::value(nullptr);
    step["evidence"] = ParsedOrNull(failing->evidence);
    std::string path = log_path(failing->id);
    step["log_path"] = path;
    json::array tail;
    for (const std::string& line : LogTail(path, kWhyLogLines)) tail.emplace_back(ValidUtf8(line));
    step["log_tail"] = std::move(tail);
    o["failing_step"] = std::move(step);
  } else {
    o["failing_step"] = nullptr;
  }
  if (run.state == RunState::kFailed && !failing && !run.evidence.empty())
    o["preflight"] = ParsedOrNull(run.evidence);

  json::array timeline;
  for (const EventRecord& e : events) {
    json::object t;
    t["offset_ms"] = e.at_ms - run.created_at_ms;
    t["at_ms"] = e.at_ms;
    t["step"] = e.step_id;
    t["kind"] = e.kind;
    t["state"] = e.state;
    t["detail"] = e.detail;
    timeline.push_back(std::move(t));
  }
  o["timeline"] = std::move(timeline);
  return o;
}

}  // namespace deployd
