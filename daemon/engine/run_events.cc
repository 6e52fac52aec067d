// RunManager: what the followers of a run are told (run_followers.h). Each committed event
// goes out as a follow stream's event line (protocol/follow_stream.h) with the step's attempts,
// and is summed up for systemd's STATUS= (RunManagerOptions::on_activity).
#include "engine/run_manager.h"
#include "engine/wire_records.h"
#include "util/clock.h"

namespace deployd {

std::uint64_t RunManager::Subscribe(const std::string& run_id, Listener listener) {
  return followers_.Add(run_id, std::move(listener));
}

void RunManager::Unsubscribe(std::uint64_t token) { followers_.Remove(token); }

void RunManager::Notify(const std::string& run_id, const EventRecord& event, int attempt) {
  if (options_.on_activity) {
    std::string what = event.step_id.empty() ? "" : " step " + event.step_id;
    options_.on_activity(run_id + what + " " + (event.state.empty() ? event.kind : event.state));
  }
  if (followers_.empty()) return;
  WireEvent line = ToWire(run_id, event);
  if (!line.at_ms) line.at_ms = NowMs();
  line.attempt = attempt;
  followers_.Publish(run_id, EncodeEvent(line));
}

}  // namespace deployd
