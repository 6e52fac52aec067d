// The `gpus_free` action and the `gpus_free` check's probe (docs/gpu-and-kill.md).
//
// The action reads the GPU state (NVML, kept open across reads, or nvidia-smi; DEPLOYD_NVML=off
// skips NVML), stops the processes holding the listed GPUs when `kill` is set (as `kill` does:
// SIGTERM, `grace`, SIGKILL, proven gone), then re-reads every `every` until every listed GPU
// has been free on every read for `stable_for` — memory is released some time after the last
// process exits, so one free read proves little. The clock restarts on any read that is not
// all free. It fails when `within` has passed since the holders were stopped (or since the
// start without `kill`), naming what still holds the GPUs, and at once when the GPU state
// cannot be read or a listed GPU does not exist.
//
// Blocking code for the action child (`deployd --action`) and the probe child (`deployd
// --probe`): it sleeps between reads, never on the daemon's thread.
#ifndef DEPLOYD_ACTIONS_GPU_GPUS_FREE_ACTION_H_
#define DEPLOYD_ACTIONS_GPU_GPUS_FREE_ACTION_H_

#include "actions/builtin_action.h"
#include "checks/checks.h"
#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/process_table.h"

namespace deployd {

// Says the holders as first seen ("GPU 0: pid 812 (VLLM::Worker_TP0) holds 70.2GiB"), each
// change, "GPUs 0,1 free (…); waiting 10s for it to stay so" and "free for 10s". Errors:
//   "cannot read GPU state: no NVIDIA driver: libnvidia-ml.so.1 not found; nvidia-smi: …"
//   "gpus_free 9: GPU 9: no such GPU (GPUs: 0,1,2,3,4,5,6,7)"
//   "GPUs 0,1 not free within 2m: gpus_free 0,1: GPU 0: pid 812 (…) holds 70.2GiB, …"
Status RunGpusFreeAction(const GpusFreeAction& action, const ActionContext& ctx);

// kind kGpusFree: one read, EvaluateGpusFree. Summary and evidence as the library gives them
// ("gpus_free 0,1: free (…; nvidia-smi)"), plus "target"; a read error fails the check with it.
CheckOutcome ProbeGpusFree(const Check& check);

// Whether `reported` — nvidia-smi's process_name (a path or a title) or NVML's title, read a
// moment ago — still names `info`: the title, comm (cut to 15 characters), argv[0] or the
// executable, by full name or base name. A GPU holder is signalled only then.
bool SameProcessName(const std::string& reported, const ProcessInfo& info);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GPU_GPUS_FREE_ACTION_H_
