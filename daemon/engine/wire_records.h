// What the engine knows as the wire protocol carries it (protocol/run_wire.h,
// protocol/follow_stream.h): the store's records — a RunRecord becomes a WireRun, an
// EventRecord a WireEvent — and a progress watch's snapshot. The JSON text the store keeps
// (evidence, a step's action) is parsed here; text that does not parse is left out, as it
// cannot be sent as JSON.
#ifndef DEPLOYD_ENGINE_WIRE_RECORDS_H_
#define DEPLOYD_ENGINE_WIRE_RECORDS_H_

#include <boost/json/object.hpp>
#include <string>

#include "checks/progress_watch.h"
#include "protocol/follow_stream.h"
#include "protocol/run_wire.h"
#include "store/run_store.h"

namespace deployd {

WireRun ToWire(const RunRecord& run);
WireStep ToWire(const StepRecord& step);
WireEvent ToWire(const std::string& run_id, const EventRecord& event);
WireProgress ToWire(const ProgressSnapshot& snapshot);

// The binding JSON shape of a run (DESIGN.md §3): EncodeRun(ToWire(run)).
boost::json::object RunToJson(const RunRecord& run);
// One event line of a `follow` stream: EncodeEvent(ToWire(run_id, event)).
boost::json::object EventToJson(const std::string& run_id, const EventRecord& event);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_WIRE_RECORDS_H_
