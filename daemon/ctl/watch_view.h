// WatchView: what `deployctl watch` shows, as pure functions from a run's state to lines of
// text. No I/O, no clock (the time is an argument), no escape codes: the caller decides how
// the lines reach the screen (redrawn in place on a terminal, or printed once each).
//
// A RunView is built from a run as the wire carries it (protocol/run_wire.h: `status`, the
// `follow` stream's snapshot) and kept up to date with the stream's lines
// (protocol/follow_stream.h): {"type": "event"} (committed transitions), {"type": "progress"}
// (a step's progress samples), {"type": "end"} (the run's final record) and {"type": "missed"}
// (what this client did not read in time; the snapshot after it brings the view back).
#ifndef DEPLOYD_CTL_WATCH_VIEW_H_
#define DEPLOYD_CTL_WATCH_VIEW_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/follow_stream.h"
#include "protocol/run_wire.h"

namespace deployd {

struct StepView {
  std::string id;
  std::string phase = "main";  // or "on_failure"
  std::string state = "pending";
  std::int64_t attempts = 0;
  std::int64_t started_at_ms = 0;   // 0 = not started
  std::int64_t finished_at_ms = 0;  // 0 = not finished
  std::string detail;               // the latest reason or event detail
  std::optional<WireProgress> progress;
};

struct RunView {
  std::string id;
  std::string plan;
  std::string state = "pending";
  std::string reason;
  std::int64_t created_at_ms = 0;
  std::int64_t finished_at_ms = 0;
  std::vector<StepView> steps;
  bool ended = false;  // the stream's "end" line was seen
  std::string notice;  // "missed 12 events (seq 40–51)": shown in the heading from then on
};

// From a run as `status`, the snapshot and the end line give it.
RunView RunViewOf(const WireRun& run);
// Applies one line of a follow stream; other lines are ignored.
void ApplyFollowLine(RunView& view, const boost::json::object& line);
// True while something can still change by itself (the run has not finished).
bool IsLive(const RunView& view);

// The live table, at wall-clock time `now_ms`: a heading, a column header and one line per
// step, each cut to `width` characters (code points). With more steps than `height` - 2
// lines allow, the earliest finished steps are folded into one line. `color`: states in their
// colours (Paint).
std::vector<std::string> RenderRunView(const RunView& view, std::int64_t now_ms, int width,
                                       int height, bool color = false);

// One line of a plain (non-terminal) follow:
// "[    0.1s] fetch                    running    attempt 1".
std::string FormatEventLine(const WireEvent& event, std::int64_t origin_ms, bool color = false);

// `text` in the colour of the state named `state` (ANSI SGR: succeeded green, failed bold red,
// running and verifying cyan, waiting and paused yellow, cancelled and skipped dim; others as
// they are); blanks at its end stay outside the colour.
std::string Paint(const std::string& text, const std::string& state);
// "[   12.0s] download                 progress   42% 1.2GiB / 2.9GiB, 45.0MiB/s, ETA 38s"
std::string FormatProgressLine(const std::string& step, const WireProgress& progress,
                               std::int64_t at_ms, std::int64_t origin_ms);

// Id columns (a step's, a run's, a plan's) on a screen `width` wide (0: not a screen, no
// limit) where the rest of a line takes `rest` columns: as wide as the longest id, but on a
// screen at most `most` and no wider than leaves the rest its room (never under 8). Shared by
// watch, status and runs.
size_t IdColumnWidth(size_t longest, size_t most, int width, size_t rest);
// `text` in `width` columns: as it is when it fits, else cut with "…" as its last character;
// padded with blanks to `width`.
std::string FitCell(const std::string& text, size_t width);
// The number of characters (code points) of UTF-8 text; colours take none.
size_t TextWidth(const std::string& text);

// The pieces, exposed for tests.
// "42% 1.2GiB / 2.9GiB, 45.0MiB/s, ETA 38s" (what is known, in that order); with
// `now_ms` past last_progress_at_ms by 30s or more, ", no progress for 1m05s" is added.
std::string DescribeProgress(const WireProgress& p, std::int64_t now_ms);
// "[#########-----------]": `width` characters in all, brackets included.
std::string ProgressBar(double fraction, int width);
std::string FormatBytes(double bytes);  // "512B", "1.5KiB", "45.0MiB", "2.9GiB"
// "12.3s", "4m05s", "2h07m" (the same as deployctl's other verbs).
std::string FormatElapsed(std::int64_t ms);

}  // namespace deployd

#endif  // DEPLOYD_CTL_WATCH_VIEW_H_
