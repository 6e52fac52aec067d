// LogPrinter: a step's output as `deployctl logs` prints it — the text as it is, with a line
//   ── attempt 2 of 3, started 2026-11-30 17:01:51 (4m ago) ──
// where an attempt begins (but the first of a step that has one attempt: "1 of 1" at the start
// would tell nothing apart; its second after a `retry` has its line), and with timestamps each line
// after the time it was written
// ("2026-11-30T17:01:51.123+01:00 ", as `docker logs -t` does, in local time). Fed piece by
// piece — an entry of `logs`, the data lines of `logs -f` — with the marks deployd sent with
// them (protocol/follow_stream.h); a piece may end inside a line. Pure: text in, text out.
#ifndef DEPLOYD_CTL_LOG_PRINTER_H_
#define DEPLOYD_CTL_LOG_PRINTER_H_

#include <cstdint>
#include <string>

#include "protocol/follow_stream.h"

namespace deployd::ctl {

class LogPrinter {
 public:
  // `now_ms`: what "4m ago" counts from.
  LogPrinter(bool timestamps, std::int64_t now_ms) : timestamps_(timestamps), now_ms_(now_ms) {}

  // `text`, which `marks` go with, as it is printed.
  std::string Print(const std::string& text, const TextMarks& marks);

 private:
  bool timestamps_;
  std::int64_t now_ms_;
  bool line_start_ = true;
  std::int64_t time_ms_ = 0;  // the time of the lines from here on; 0: not known
  int attempt_ = 0;           // the attempt printed last, and when it started
  std::int64_t attempt_ms_ = 0;
};

// "2026-11-30T17:01:51.123+01:00": RFC 3339, local time, milliseconds.
std::string LineTime(std::int64_t ms);
// "── attempt 2 of 3, started 2026-11-30 17:01:51 (4m ago) ──"
std::string AttemptLine(const AttemptMark& attempt, std::int64_t now_ms);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_LOG_PRINTER_H_
