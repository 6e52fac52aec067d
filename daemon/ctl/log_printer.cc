#include "ctl/log_printer.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "ctl/ctl_client.h"

namespace deployd::ctl {

namespace {

// What a line whose time is not known (a log older than its marks) starts with instead.
const std::string kNoTime = "-" + std::string(LineTime(0).size() - 1, ' ');

}  // namespace

std::string LineTime(std::int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char date[32], zone[8];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  std::strftime(zone, sizeof zone, "%z", &tm);  // "+0100": RFC 3339 writes "+01:00"
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03d%.3s:%.2s", date, static_cast<int>(ms % 1000), zone,
                zone + 3);
  return out;
}

std::string AttemptLine(const AttemptMark& a, std::int64_t now_ms) {
  return "── attempt " + std::to_string(a.attempt) + " of " + std::to_string(a.of) + ", started " +
         When(a.started_at_ms, now_ms) + " ──";
}

std::string LogPrinter::Print(const std::string& text, const TextMarks& marks) {
  std::string out;
  size_t a = 0, t = 0;
  for (size_t i = 0;;) {
    while (t < marks.times.size() && marks.times[t].at <= i) time_ms_ = marks.times[t++].at_ms;
    while (a < marks.attempts.size() && marks.attempts[a].at <= i) {
      const AttemptMark& m = marks.attempts[a++].mark;
      // The same attempt again: the log was rotated (or cut) inside it.
      if (m.attempt == attempt_ && m.started_at_ms == attempt_ms_) continue;
      // The one attempt a step has, at the start: nothing to tell apart.
      const bool only = m.attempt == 1 && m.of == 1 && attempt_ == 0 && out.empty() && i == 0;
      attempt_ = m.attempt;
      attempt_ms_ = m.started_at_ms;
      if (only) continue;
      if (!line_start_) out += '\n';
      out += AttemptLine(m, now_ms_) + "\n";
      line_start_ = true;
    }
    if (i >= text.size()) break;
    if (line_start_ && timestamps_) out += (time_ms_ ? LineTime(time_ms_) : kNoTime) + " ";
    // On to the end of the line, or to the next mark.
    size_t next = text.size();
    if (t < marks.times.size()) next = std::min(next, marks.times[t].at);
    if (a < marks.attempts.size()) next = std::min(next, marks.attempts[a].at);
    size_t nl = text.find('\n', i);
    size_t stop = std::max(i + 1, nl != std::string::npos && nl < next ? nl + 1 : next);
    out.append(text, i, stop - i);
    line_start_ = text[stop - 1] == '\n';
    i = stop;
  }
  return out;
}

}  // namespace deployd::ctl
