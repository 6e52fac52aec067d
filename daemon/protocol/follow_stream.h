// FollowStream: the lines of deployd's two streams (protocol.h), encoded by the daemon and
// decoded by deployctl, with their field names in this one place.
//
// `follow RUN`:  {"ok": true, "type": "snapshot", "run": RUN}   (RUN: run_wire.h)
//                (with "after_seq": N in the request, the events up to seq N are left out:
//                a client that reconnects has them)
//                {"type": "event", "run", "seq", "step", "kind", "state", "detail", "at_ms",
//                 "attempt"?}   one per committed transition ("attempt" on live ones)
//                {"type": "progress", "run", "step", PROGRESS's fields…}
//                {"type": "end", "run": RUN}   once the run has finished
// `logs RUN STEP -f`: {"ok": true, "type": "start", "run", "step", "path", "resumed"?},
//                {"type": "data", "text", "file", "offset", "attempts", "times"?}…,
//                (the marks of its text, AddLogMarks: with "timestamps" in the request),
//                {"type": "end", "run", "step",
//                "state"}; a data line's "file" (the log's inode) and "offset" say where in
//                the log its text ends, and a request's "resume": {"file", "offset"} goes on
//                from there ("resumed": whether it could)
// Either stream, where the client fell behind by more than its budget (control/stream_queue.h):
//                {"type": "missed", "events", "first_seq", "last_seq", "progress", "bytes",
//                 "other"}   what was dropped there; `follow` then sends a fresh snapshot
//
// Plain values, no I/O.
#ifndef DEPLOYD_PROTOCOL_FOLLOW_STREAM_H_
#define DEPLOYD_PROTOCOL_FOLLOW_STREAM_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/run_wire.h"
#include "util/log_marks.h"

namespace deployd {

// One event of a run, as the store numbered it (seq) or as it is committed now.
struct WireEvent {
  std::string run;
  std::int64_t seq = 0;  // as the store numbered it: 1, 2, 3, … per run
  std::string step;      // "" for a run-level event
  std::string kind;      // "run.created", "run.state", "run.preflight", "step.state", …
  std::string state;     // the state entered, for a ".state" kind
  std::string detail;
  std::int64_t at_ms = 0;
  std::optional<std::int64_t> attempt;  // the step's attempts, on live events only
};

// What a client that fell behind did not get, in place of the lines dropped.
struct WireMissed {
  std::int64_t events = 0;  // event lines, seq first_seq..last_seq
  std::int64_t first_seq = 0;
  std::int64_t last_seq = 0;
  std::int64_t progress = 0;  // progress lines
  std::int64_t bytes = 0;     // of a log's text (`logs -f`)
  std::int64_t other = 0;     // any other line
};

// The "type" of a stream line ("" when it has none).
std::string LineType(const boost::json::object& line);

boost::json::object EncodeEvent(const WireEvent& event);
WireEvent DecodeEvent(const boost::json::object& line);

boost::json::object EncodeProgressLine(const std::string& run, const std::string& step,
                                       const WireProgress& progress);
// The step of a progress line; its values are DecodeProgress(line).
std::string ProgressLineStep(const boost::json::object& line);

boost::json::object EncodeSnapshotLine(const WireRun& run);
boost::json::object EncodeEndLine(const WireRun& run);
// The run of a snapshot or end line.
WireRun LineRun(const boost::json::object& line);

boost::json::object EncodeLogStart(const std::string& run, const std::string& step,
                                   const std::string& path);
// Where a piece of a step's log ends: the file (by inode: the log may have been rotated
// since) and the offset in it.
struct LogPosition {
  std::uint64_t file = 0;
  std::uint64_t offset = 0;
};
boost::json::object EncodeLogData(const std::string& text,
                                  const std::optional<LogPosition>& end = std::nullopt);
// The position a data line ends at; nullopt for a line without one (an older deployd).
std::optional<LogPosition> LogDataEnd(const boost::json::object& line);
boost::json::object EncodeLogPosition(const LogPosition& position);
// {"file", "offset"}; nullopt when either is missing or not a number.
std::optional<LogPosition> DecodeLogPosition(const boost::json::value& value);
boost::json::object EncodeLogEnd(const std::string& run, const std::string& step,
                                 const std::string& state);
// The text of a data line.
std::string LogDataText(const boost::json::object& line);

// The marks of a log (util/log_marks.h) on a piece of text made of it — an entry of `logs`, a
// data line of `logs -f` — positions counted in the text's bytes:
//   "attempts": [{"at", "attempt", "of", "started_at_ms"}…]  where each attempt begins
//   "times": [[AT, MS]…]                                     from AT on, written at MS
// `from`: the offset in the log of the text's byte `base`; a mark before it (the one in effect
// there) is put at `base`. Appended to what `o` has; "times" only with `times`.
void AddLogMarks(boost::json::object& o, const LogMarks& marks, std::uint64_t from, size_t base,
                 bool times);
struct TextAttempt {
  size_t at = 0;
  AttemptMark mark;
};
struct TextTime {
  size_t at = 0;
  std::int64_t at_ms = 0;
};
struct TextMarks {
  std::vector<TextAttempt> attempts;
  std::vector<TextTime> times;
};
TextMarks DecodeTextMarks(const boost::json::object& o);

boost::json::object EncodeMissed(const WireMissed& missed);
WireMissed DecodeMissed(const boost::json::object& line);
// "12 events (seq 40–51), 3 progress updates", "8.0MiB of output": what a notice says.
std::string DescribeMissed(const WireMissed& missed);

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_FOLLOW_STREAM_H_
