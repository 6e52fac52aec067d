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

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_FOLLOW_STREAM_H_
