// RolloutSpec: everything a rollout needs to go on by itself — the plan's text, the hosts with
// their ssh addresses and variables, the batches, the failure allowance — and the plan that
// carries it out on the local deployd (the coordinator).
//
// A rollout is a durable run of the coordinator. Its plan (GeneratedPlan) has one step per
// batch and a last `verdict` step; each runs `deployctl rollout-batch` (rollout_batch.cc),
// which drives that batch's hosts over ssh and exits with the batch's verdict. The spec travels
// as the run's variable `rollout` (JSON), so the coordinator's database holds all of it, and
// the rollout's run is created under the idempotency key "rollout/ID", by which each step
// finds it. Each host's run is created under the key "rollout/ID/HOST": however often a step
// is fired again (a restart of the coordinator, a lost connection, a retry), a host gets one
// run.
//
// Plain values, no I/O.
#ifndef DEPLOYD_CTL_ROLLOUT_SPEC_H_
#define DEPLOYD_CTL_ROLLOUT_SPEC_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd::ctl {

// N or N% (of a batch, for --max-fail; of all hosts, for --serial).
struct Count {
  int value = 0;
  bool percent = false;
  std::string Text() const { return std::to_string(value) + (percent ? "%" : ""); }
};
Result<Count> ParseCount(std::string_view text, const std::string& flag);

struct RolloutHost {
  std::string name;     // the inventory hostname
  std::string address;  // ssh://[USER@]HOST[:PORT]
  std::map<std::string, std::string> vars;
};

struct RolloutSpec {
  std::string id;         // random; the keys' root
  std::string plan_file;  // as given (for messages)
  std::string plan_name;
  std::string plan_text;
  std::string inventory;  // the file (for messages)
  std::vector<RolloutHost> hosts;
  std::vector<std::vector<std::string>> batches;  // host names, in order
  Count max_fail;
  std::int64_t unreachable_after_ms = 600'000;

  const RolloutHost* Host(const std::string& name) const;
  std::string Key() const { return "rollout/" + id; }
  std::string HostKey(const std::string& host) const { return Key() + "/" + host; }
};

// Ansible's `serial` in list form: each entry a count or a percentage of all the hosts (at
// least 1); the last entry repeats until every host has its batch. No entry: one batch.
std::vector<std::vector<std::string>> MakeBatches(const std::vector<std::string>& hosts,
                                                  const std::vector<Count>& serial);

// More failed hosts in a batch of `size` than `max_fail` allows stops the rollout (Ansible's
// max_fail_percentage: more than the percentage, strictly).
bool TooManyFailed(const Count& max_fail, size_t failed, size_t size);

boost::json::object EncodeSpec(const RolloutSpec& spec);
Result<RolloutSpec> DecodeSpec(std::string_view json);

// The coordinator's plan: batch-1 … batch-N and verdict, each running
// `DEPLOYCTL [--socket SOCKET] rollout-batch --key KEY --batch B` (idempotent, so a restart
// fires it again), with `env` (what ssh needs: its agent, DEPLOYD_SSH_COMMAND, …).
std::string GeneratedPlan(const RolloutSpec& spec, const std::string& deployctl,
                          const std::string& socket, const std::map<std::string, std::string>& env);
// The step of batch `b` (0-based) and of the verdict.
std::string BatchStepId(size_t b);
inline constexpr std::string_view kVerdictStep = "verdict";

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_ROLLOUT_SPEC_H_
