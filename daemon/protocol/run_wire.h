// RunWire: the wire JSON of a run, its steps and a step's progress (DESIGN.md §3, "binding"),
// in one place for both ends of the socket: deployd encodes a run it has recorded (the store's
// rows converted into these plain structs, engine/wire_records.h), deployctl decodes what it
// reads. Encoding is exact: `status --json` prints these objects as they came.
//
//   run:      {"id", "plan", "plan_file", "state", "created_at_ms", "finished_at_ms", "reason",
//              "vars": {…}, "key"?, "applied_by"?, "evidence"?, "storage_fault"?,
//              "steps"?: [step…]}
//   step:     {"id", "phase", "state", "attempts", "started_at_ms", "finished_at_ms",
//              "exit_status" (null when none), "pid"?, "action"?, "reason", "evidence"?,
//              "progress"?}
//   progress: {"bytes", "total_bytes", "done", "total", "fraction", "rate_bps", "eta_s",
//              "last_progress_at_ms", "at_ms"}: unknown values are null; times are Unix ms.
//
// Decoding is lenient (wire_fields.h): what is missing reads as empty. Plain values, no I/O.
#ifndef DEPLOYD_PROTOCOL_RUN_WIRE_H_
#define DEPLOYD_PROTOCOL_RUN_WIRE_H_

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deployd {

// A step's progress as deployd measured it; every value may be unknown.
struct WireProgress {
  std::optional<double> bytes;        // done so far
  std::optional<double> total_bytes;  // expected in all
  std::optional<double> done;         // N and M of the last progress line ("27/60")
  std::optional<double> total;
  std::optional<double> fraction;        // 0..1; sent rounded to 4 places
  std::optional<double> rate_bps;        // bytes per second, recently; sent whole
  std::optional<double> eta_s;           // seconds left at that rate; sent rounded up
  std::int64_t last_progress_at_ms = 0;  // when it last moved; 0 = unknown
  std::int64_t at_ms = 0;                // when these values were taken; 0 = unknown
};

struct WireStep {
  std::string id;
  std::string phase;  // "main" or "on_failure"
  std::string state;  // a StepState's name (deployd/states.h)
  std::int64_t attempts = 0;
  std::int64_t started_at_ms = 0;   // 0 = never
  std::int64_t finished_at_ms = 0;  // 0 = not yet
  std::optional<std::int64_t> exit_status;
  std::optional<std::int64_t> pid;
  std::optional<boost::json::value> action;  // where the action can be found again
  std::string reason;
  std::optional<boost::json::value> evidence;
  std::optional<WireProgress> progress;  // only while the step is being watched
};

struct WireRun {
  std::string id;
  std::string plan;  // the plan's name
  std::string plan_file;
  std::string state;  // a RunState's name
  std::int64_t created_at_ms = 0;
  std::int64_t finished_at_ms = 0;
  std::string reason;
  std::map<std::string, std::string> vars;
  std::string key;  // its idempotency key; "" = none (sent without "key")
  // Who applied it ("alice (uid 1000)"); "" = not recorded (sent without "applied_by").
  std::string applied_by;
  std::optional<boost::json::value> evidence;
  // While deployd cannot record what this unfinished run does (a full disk, …): one line, ""
  // otherwise. Not stored: the store is what refuses it.
  std::string storage_fault;
  std::vector<WireStep> steps;  // empty: sent without "steps" (a run listed without them)
};

boost::json::object EncodeRun(const WireRun& run);
WireRun DecodeRun(const boost::json::object& run);

boost::json::object EncodeStep(const WireStep& step);
WireStep DecodeStep(const boost::json::object& step);

boost::json::object EncodeProgress(const WireProgress& progress);
// Also reads the progress fields of a {"type": "progress"} line (follow_stream.h).
WireProgress DecodeProgress(const boost::json::object& progress);

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_RUN_WIRE_H_
