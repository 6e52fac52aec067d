#include "ctl/watch_view.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>

namespace deployd {

namespace json = boost::json;

namespace {

// A progress sample older than this is shown as "no progress for …": a stall is what an
// operator watching a long download most needs to see.
constexpr std::int64_t kQuietAfterMs = 30'000;
constexpr int kBarWidth = 22;
// 1.2 / 3 is 0.39999…: rounding noise must not show as 39%.
constexpr double kEpsilon = 1e-9;
constexpr size_t kMaxStepColumn = 24;
constexpr const char* kPlain = "\x1b[0m";
constexpr size_t kMinIdColumn = 8;
// What a line of the table needs besides the step's id: state, time, and a little of the
// detail (it is cut at the screen's edge).
constexpr size_t kRowRest = 2 + 10 + 1 + 7 + 12;

bool IsTerminalStep(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "skipped" || state == "cancelled";
}

bool IsTerminalRun(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

// The end of the escape sequence (a colour: ESC [ … m) that starts at `i`.
size_t EscapeEnd(const std::string& line, size_t i) {
  size_t end = i + 1;
  if (end < line.size() && line[end] == '[') ++end;
  while (end < line.size() && !(line[end] >= 0x40 && line[end] <= 0x7e)) ++end;
  return std::min(end + 1, line.size());
}

// Cuts `line` to `width` code points (UTF-8), so that a terminal never wraps it. Colours take
// no room, and one cut short is ended.
std::string Cut(const std::string& line, int width) {
  if (width <= 0) return line;
  int points = 0;
  bool painted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b') {
      painted = true;
      i = EscapeEnd(line, i) - 1;
      continue;
    }
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (points == width) return line.substr(0, i) + (painted ? kPlain : "");
    ++points;
  }
  return line;
}

std::string Pad(const std::string& s, size_t width) {
  size_t used = TextWidth(s);
  return used >= width ? s : s + std::string(width - used, ' ');
}

std::string FormatEta(double seconds) {
  if (seconds < 60) return std::to_string(static_cast<int>(std::ceil(seconds))) + "s";
  return FormatElapsed(static_cast<std::int64_t>(seconds * 1000));
}

// A progress line's N/M: counts (files, shards) as they are; sizes, which deployd gives in
// bytes, as sizes. A count of a million or more is taken for a size.
std::string Count(double n) {
  if (n >= 1e6) return FormatBytes(n);
  return std::to_string(static_cast<long long>(n));
}

std::optional<double> FractionOf(const WireProgress& p) {
  if (p.fraction) return std::clamp(*p.fraction, 0.0, 1.0);
  if (p.bytes && p.total_bytes && *p.total_bytes > 0)
    return std::clamp(*p.bytes / *p.total_bytes, 0.0, 1.0);
  return std::nullopt;
}

std::string StepTime(const StepView& s, std::int64_t now_ms) {
  if (!s.started_at_ms) return "";
  std::int64_t end = s.finished_at_ms ? s.finished_at_ms : now_ms;
  return FormatElapsed(std::max<std::int64_t>(0, end - s.started_at_ms));
}

// A committed transition: the run's state, or one step's.
void ApplyEvent(RunView& view, const WireEvent& event) {
  if (event.kind == "run.state") {
    view.state = event.state;
    view.reason = event.detail;
    view.finished_at_ms = IsTerminalRun(event.state) ? event.at_ms : 0;
    return;
  }
  auto step = std::find_if(view.steps.begin(), view.steps.end(),
                           [&](const StepView& s) { return s.id == event.step; });
  if (event.kind != "step.state" || step == view.steps.end()) return;
  if (event.state == "pending" && event.attempt == 0) {
    // Reset for a retry by the operator: the step starts afresh.
    step->started_at_ms = 0;
    step->progress.reset();
  }
  if (event.attempt) step->attempts = *event.attempt;
  if (!step->started_at_ms && (event.state == "running" || event.state == "waiting")) {
    step->started_at_ms = event.at_ms;
  }
  step->state = event.state;
  step->detail = event.detail;
  step->finished_at_ms = IsTerminalStep(event.state) ? event.at_ms : 0;
}

}  // namespace

size_t TextWidth(const std::string& text) {
  size_t points = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      i = EscapeEnd(text, i) - 1;
      continue;
    }
    points += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
  }
  return points;
}

std::string Paint(const std::string& text, const std::string& state) {
  const char* color = state == "succeeded"                         ? "\x1b[32m"
                      : state == "failed"                          ? "\x1b[1;31m"
                      : state == "running" || state == "verifying" ? "\x1b[36m"
                      : state == "waiting" || state == "paused"    ? "\x1b[33m"
                      : state == "cancelled" || state == "skipped" ? "\x1b[2m"
                                                                   : nullptr;
  if (!color || text.empty()) return text;
  // Blanks that pad a column stay outside: a trimmed line ends with the colour's end.
  size_t end = text.find_last_not_of(' ') + 1;
  return color + text.substr(0, end) + kPlain + text.substr(end);
}

size_t IdColumnWidth(size_t longest, size_t most, int width, size_t rest) {
  if (width <= 0) return longest;
  size_t room = static_cast<size_t>(width) > rest + kMinIdColumn ? width - rest : kMinIdColumn;
  return std::min({longest, most, room});
}

std::string FitCell(const std::string& text, size_t width) {
  if (TextWidth(text) <= width) return Pad(text, width);
  if (width == 0) return "";
  return Cut(text, static_cast<int>(width - 1)) + "…";
}

std::string FormatElapsed(std::int64_t ms) {
  char buf[32];
  if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  }
  return buf;
}

std::string FormatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%.0fB", std::max(0.0, bytes));
    return buf;
  }
  double value = bytes / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  std::snprintf(buf, sizeof buf, "%.1f%s", value, kUnits[unit]);
  return buf;
}

std::string ProgressBar(double fraction, int width) {
  int inner = std::max(1, width - 2);
  int filled = static_cast<int>(std::floor(std::clamp(fraction, 0.0, 1.0) * inner + kEpsilon));
  return "[" + std::string(filled, '#') + std::string(inner - filled, '-') + "]";
}

std::string DescribeProgress(const WireProgress& p, std::int64_t now_ms) {
  std::string head;
  std::optional<double> fraction = FractionOf(p);
  if (fraction)
    head = std::to_string(static_cast<int>(std::floor(*fraction * 100 + kEpsilon))) + "%";
  if (p.bytes) {
    if (!head.empty()) head += " ";
    head += FormatBytes(*p.bytes);
    if (p.total_bytes) head += " / " + FormatBytes(*p.total_bytes);
  } else if (p.done && p.total) {
    if (!head.empty()) head += " ";
    head += Count(*p.done) + "/" + Count(*p.total);
  }
  std::vector<std::string> parts;
  if (!head.empty()) parts.push_back(head);
  if (p.rate_bps) parts.push_back(FormatBytes(*p.rate_bps) + "/s");
  if (p.eta_s && (!fraction || *fraction < 1)) parts.push_back("ETA " + FormatEta(*p.eta_s));
  if (p.last_progress_at_ms && now_ms - p.last_progress_at_ms >= kQuietAfterMs)
    parts.push_back("no progress for " + FormatElapsed(now_ms - p.last_progress_at_ms));
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? ", " : "") + parts[i];
  return text;
}

RunView RunViewOf(const WireRun& run) {
  RunView view;
  view.id = run.id;
  view.plan = run.plan;
  view.state = run.state;
  view.reason = run.reason;
  view.created_at_ms = run.created_at_ms;
  view.finished_at_ms = run.finished_at_ms;
  for (const WireStep& s : run.steps) {
    StepView step;
    step.id = s.id;
    step.phase = s.phase;
    step.state = s.state;
    step.attempts = s.attempts;
    step.started_at_ms = s.started_at_ms;
    step.finished_at_ms = s.finished_at_ms;
    step.detail = s.reason;
    step.progress = s.progress;
    view.steps.push_back(std::move(step));
  }
  return view;
}

void ApplyFollowLine(RunView& view, const json::object& line) {
  std::string type = LineType(line);
  if (type == "snapshot" || type == "end") {
    if (const json::value* run = line.if_contains("run"); run && run->is_object()) {
      RunView fresh = RunViewOf(DecodeRun(run->as_object()));
      // The status JSON may not carry progress; keep the last sample seen on the stream.
      for (StepView& step : fresh.steps) {
        for (const StepView& old : view.steps) {
          if (old.id == step.id && !step.progress && old.progress) step.progress = old.progress;
        }
      }
      fresh.notice = view.notice;
      view = std::move(fresh);
    }
    if (type == "end") view.ended = true;
    return;
  }
  if (type == "missed") {
    view.notice = "missed " + DescribeMissed(DecodeMissed(line));
    return;
  }
  if (type == "progress") {
    std::string step_id = ProgressLineStep(line);
    for (StepView& step : view.steps)
      if (step.id == step_id) step.progress = DecodeProgress(line);
    return;
  }
  if (type == "event") ApplyEvent(view, DecodeEvent(line));
}

bool IsLive(const RunView& view) { return !view.ended && !IsTerminalRun(view.state); }

std::vector<std::string> RenderRunView(const RunView& view, std::int64_t now_ms, int width,
                                       int height, bool color) {
  std::vector<std::string> lines;
  auto state_text = [&](const std::string& text, const std::string& state) {
    return color ? Paint(text, state) : text;
  };
  std::int64_t end = view.finished_at_ms ? view.finished_at_ms : now_ms;
  std::string heading = "run " + view.id + " (plan " + view.plan +
                        "): " + state_text(view.state, view.state) +
                        (IsTerminalRun(view.state) ? " after " : ", ") +
                        FormatElapsed(std::max<std::int64_t>(0, end - view.created_at_ms));
  if (!view.reason.empty()) heading += " — " + view.reason;
  if (!view.notice.empty()) heading += " [" + view.notice + ": deployctl fell behind]";
  lines.push_back(heading);

  size_t longest = 4;
  for (const StepView& s : view.steps) longest = std::max(longest, TextWidth(s.id));
  // A long id is cut, so that state, time and progress stay on a narrow screen.
  size_t id_width = IdColumnWidth(longest, kMaxStepColumn, width, kRowRest);
  auto row = [&](const std::string& id, const std::string& state, const std::string& time,
                 const std::string& detail) {
    std::string time_col = time.size() >= 7 ? time : std::string(7 - time.size(), ' ') + time;
    std::string text =
        FitCell(id, id_width) + "  " + state_text(Pad(state, 10), state) + " " + time_col;
    if (!detail.empty()) text += "  " + detail;
    // Trailing blanks would only make the terminal's lines longer.
    text.erase(text.find_last_not_of(' ') + 1);
    return text;
  };
  lines.push_back(row("STEP", "STATE", "TIME", "DETAIL"));

  // Which steps get a line when the screen is too short: the earliest finished ones are
  // folded into one line; if that is not enough, the last ones into another.
  std::vector<bool> shown(view.steps.size(), true);
  size_t room = height > 2 ? static_cast<size_t>(std::max(2, height - 2)) : view.steps.size();
  size_t folded = 0;
  size_t hidden_at_end = 0;
  if (view.steps.size() > room) {
    size_t to_fold = view.steps.size() - room + 1;
    for (size_t i = 0; i < view.steps.size() && folded < to_fold; ++i) {
      if (IsTerminalStep(view.steps[i].state)) {
        shown[i] = false;
        ++folded;
      }
    }
    size_t needed = view.steps.size() - folded + (folded ? 1 : 0);
    if (needed > room) {
      size_t to_hide = needed - room + 1;
      for (size_t i = view.steps.size(); i-- > 0 && hidden_at_end < to_hide;) {
        if (!shown[i]) continue;
        shown[i] = false;
        ++hidden_at_end;
      }
    }
  }
  auto plural = [](size_t n, const char* one, const char* many) {
    return "… " + std::to_string(n) + (n == 1 ? one : many);
  };
  if (folded)
    lines.push_back(plural(folded, " finished step not shown", " finished steps not shown"));
  for (size_t i = 0; i < view.steps.size(); ++i) {
    if (!shown[i]) continue;
    const StepView& s = view.steps[i];
    std::string detail;
    // Progress is shown while the action is watched; a sample that knows nothing yet shows
    // the step's detail instead.
    bool active = s.state == "running" || s.state == "verifying";
    std::string progress = active && s.progress ? DescribeProgress(*s.progress, now_ms) : "";
    if (!progress.empty()) {
      std::optional<double> fraction = FractionOf(*s.progress);
      detail = (fraction ? ProgressBar(*fraction, kBarWidth) + " " : "") + progress;
    } else {
      detail = s.detail;
    }
    if (s.phase == "on_failure") detail = "(on_failure) " + detail;
    lines.push_back(row(s.id, s.state, StepTime(s, now_ms), detail));
  }
  if (hidden_at_end)
    lines.push_back(plural(hidden_at_end, " more step not shown", " more steps not shown"));
  for (std::string& line : lines) {
    line = Cut(line, width);
    line.erase(line.find_last_not_of(' ') + 1);
  }
  return lines;
}

std::string FormatEventLine(const WireEvent& event, std::int64_t origin_ms, bool color) {
  std::string state = event.state;
  if (event.kind == "run.preflight") state = "preflight";
  if (event.kind == "run.created") state = "created";
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%8s] ", FormatElapsed(event.at_ms - origin_ms).c_str());
  std::string state_column = color ? Paint(Pad(state, 10), state) : Pad(state, 10);
  return buf + Pad(event.step.empty() ? "run" : event.step, 24) + " " + state_column + " " +
         event.detail;
}

std::string FormatProgressLine(const std::string& step, const WireProgress& progress,
                               std::int64_t at_ms, std::int64_t origin_ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%8s] ", FormatElapsed(at_ms - origin_ms).c_str());
  return buf + Pad(step, 24) + " " + Pad("progress", 10) + " " + DescribeProgress(progress, at_ms);
}

}  // namespace deployd
