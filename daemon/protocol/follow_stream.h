// FollowStream: the lines of deployd's two streams (protocol.h), encoded by the daemon and
// decoded by deployctl, with their field names in this one place.
//
// `follow RUN`:  {"ok": true, "type": "snapshot", "run": RUN}   (RUN: run_wire.h)
//                {"type": "event", "run", "seq", "step", "kind", "state", "detail", "at_ms",
//                 "attempt"?}   one per committed transition ("attempt" on live ones)
//                {"type": "progress", "run", "step", PROGRESS's fields…}
//                {"type": "end", "run": RUN}   once the run has finished
// `logs RUN STEP -f`: {"ok": true, "type": "start", "run", "step", "path"},
//                {"type": "data", "text"}…, {"type": "end", "run", "step", "state"}
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

#include "protocol/run_wire.h"

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
boost::json::object EncodeLogData(const std::string& text);
boost::json::object EncodeLogEnd(const std::string& run, const std::string& step,
                                 const std::string& state);
// The text of a data line.
std::string LogDataText(const boost::json::object& line);

boost::json::object EncodeMissed(const WireMissed& missed);
WireMissed DecodeMissed(const boost::json::object& line);
// "12 events (seq 40–51), 3 progress updates", "8.0MiB of output": what a notice says.
std::string DescribeMissed(const WireMissed& missed);

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_FOLLOW_STREAM_H_
