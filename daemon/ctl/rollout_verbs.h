// deployctl's fleet verbs: `rollout` starts a rollout (rollout.cc); `rollout-batch` is what a
// rollout's steps run (rollout_batch.cc); `watch`, `why` and `retry` of a rollout show and take
// on all of its hosts (rollout_watch.cc). See rollout_spec.h for what a rollout is.
#ifndef DEPLOYD_CTL_ROLLOUT_VERBS_H_
#define DEPLOYD_CTL_ROLLOUT_VERBS_H_

#include <optional>
#include <string>
#include <vector>

#include "ctl/ctl_client.h"
#include "ctl/rollout_spec.h"
#include "protocol/run_wire.h"

namespace deployd::ctl {

struct RolloutOptions {
  std::string plan;
  std::string inventory;
  std::string limit;
  std::vector<std::string> serial;
  std::string max_fail = "0";
  std::vector<std::string> vars;
  std::string unreachable_after = "10m";
  bool wait = false;
  bool json_out = false;  // print the rollout's run as one object (not with wait)
};

// Checks the plan with each host's variables, then starts the rollout on the coordinator (the
// deployd `coordinator_socket` names: the path this deployctl connects to, "" when it is on
// another host) and prints its run id first.
int Rollout(const RolloutOptions& options, const std::string& coordinator_socket);

// Drives batch `batch` (1-based, or "all": the verdict) of the rollout whose run has key `key`
// on the deployd at `socket`; exits 1 when the batch has more failed hosts than allowed.
int RolloutBatch(const std::string& socket, const std::string& key, const std::string& batch);

// A rollout's run on the coordinator, and its spec.
struct RolloutRun {
  WireRun run;
  RolloutSpec spec;
};
// The rollout RUN is, or nothing when it is a run of another kind.
std::optional<RolloutRun> FindRollout(Client& coordinator, const std::string& run_id);

// One row per host, live, until the rollout ends; exit 0 when it succeeded.
int WatchRollout(Client& coordinator, const RolloutRun& rollout);
// The failing hosts' evidence, and the hosts left untouched.
int WhyRollout(const RolloutRun& rollout, bool json);
// Retries the failed hosts' runs, then the rollout from its failed step.
int RetryRollout(Client& coordinator, const RolloutRun& rollout, bool wait);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_ROLLOUT_VERBS_H_
