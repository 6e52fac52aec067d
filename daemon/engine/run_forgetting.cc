// RunManager: forgetting finished runs — their records, events and logs (STATE/logs/RUN/).
// `retention` forgets by itself, when deployd starts and whenever a run finishes; `deployctl
// delete` and `prune` when an operator asks. One path for the three (RunStore::ForgetFinished,
// then Forgotten() here), so that none forgets more, or less, than the others would.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "engine/active_run.h"
#include "engine/run_manager.h"
#include "util/clock.h"
#include "util/units.h"

namespace deployd {

std::string RunManager::By(const std::string& who) {
  return "by " + (who.empty() ? std::string("operator") : who);
}

void RunManager::ForgetOldRuns() {
  if (!options_.retention || Blocked()) return;
  Result<std::vector<std::string>> forgotten =
      Forgotten(store_.ForgetRunsFinishedBefore(NowMs() - options_.retention->count()),
                "finished more than " + FormatDuration(*options_.retention) + " ago");
  if (!forgotten.ok()) spdlog::error("{}", forgotten.status().message());
}

Result<std::vector<std::string>> RunManager::Forgotten(Result<std::vector<std::string>> ids,
                                                       const std::string& why) {
  if (!ids.ok()) return ids;
  for (const std::string& id : ids.value()) {
    std::error_code ec;
    std::filesystem::remove_all(options_.state_dir + "/logs/" + id, ec);
    spdlog::info("{}: forgotten ({})", id, why);
  }
  return ids;
}

Result<std::vector<std::string>> RunManager::Delete(const std::string& run_id,
                                                    const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  Result<std::optional<RunRecord>> loaded = store_.LoadRun(run_id, false);
  if (!loaded.ok()) return loaded.status();
  if (!loaded.value()) return Status::Error("no run '" + run_id + "'");
  // A run being carried out is in memory (a finished one only until its end has unwound).
  const ActiveRun* active = Find(run_id);
  RunState state = active ? active->record.state : loaded.value()->state;
  if (!IsTerminal(state) || !IsTerminal(loaded.value()->state))
    return Status::Error("run " + run_id + " is " + std::string(ToString(state)) +
                         "; only a finished run (succeeded, failed or cancelled) can be deleted: "
                         "`deployctl cancel " +
                         run_id + "` first");
  return Forgotten(store_.ForgetRun(run_id), "deleted " + By(by));
}

Result<std::vector<std::string>> RunManager::Prune(Duration older_than, int limit,
                                                   const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  return Forgotten(
      store_.ForgetRunsFinishedBefore(NowMs() - older_than.count(), limit),
      "pruned " + By(by) + ": finished more than " + FormatDuration(older_than) + " ago");
}

}  // namespace deployd
