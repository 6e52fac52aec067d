// Stopping the targets of a KillPlan (process_kill.h) for good, from blocking code — the
// `deployd --action` child of `kill`, `gpus_free` with `kill: true` and `service`:
//
//   StopProcesses: SIGTERM (and SIGCONT), up to `grace`, SIGKILL to the survivors, up to
//   `verify` for the kernel to tear them down, saying each step; the summary, or why
//   survivors remain (one in state D, stuck in a driver call, cannot be reached by SIGKILL).
//   WaitUntilGone: the waiting alone.
//
// Waiting is on pidfds with poll(2), so it ends the moment the last target exits; a target no
// pidfd watches (kernels before 5.3) is re-read from /proc every 100ms. These calls block the
// calling thread: never for the daemon's io_context, where KillPlan is driven by timers.
#ifndef DEPLOYD_PROCESS_PROCESS_STOP_H_
#define DEPLOYD_PROCESS_PROCESS_STOP_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string_view>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/process_kill.h"

namespace deployd {

// How long SIGKILLed processes get to disappear. The kernel can take seconds to release tens
// of GiB of GPU memory; longer than this means something holds them (state D).
inline constexpr Duration kKillVerifyWindow = std::chrono::seconds(10);

// Where StopProcesses says its lines (an action's log).
using SayLine = std::function<void(std::string_view line)>;

// SIGTERM, up to `grace`, SIGKILL, up to `verify`. Says "SIGTERM pid 123 (VLLM::Worker_TP0),
// group 120" for each target signalled and a summary ("3 processes stopped: 2 by SIGTERM, 1 by
// SIGKILL after 30s"); fails naming the survivors ("1 process survived SIGKILL: pid 7 (x) is
// stuck in the kernel (state D): needs a reboot").
Status StopProcesses(KillPlan& plan, Duration grace, const SayLine& say,
                     Duration verify = kKillVerifyWindow);

// Waits until no target of `plan` is left or `limit` has passed; returns the survivors then.
std::vector<Survivor> WaitUntilGone(KillPlan& plan, Duration limit);

// The same for processes known by pid now (a service's main process, what is left in its
// cgroup), without their process groups. Pids that cannot be selected are not waited for.
void WaitUntilGone(std::vector<pid_t> pids, Duration limit);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_PROCESS_STOP_H_
