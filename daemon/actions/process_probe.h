// The `process` check's probe (docs/gpu-and-kill.md): is a process matching a pattern running.
//
// Blocking code for the probe child (`deployd --probe`), never for the daemon's thread: it
// reads all of /proc.
#ifndef DEPLOYD_ACTIONS_PROCESS_PROBE_H_
#define DEPLOYD_ACTIONS_PROCESS_PROBE_H_

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

// kind kProcess: passes when a process matching check.match runs (with check.absent: when none
// does). Selected as `kill` selects, without process groups, so deployd's own processes (whose
// command lines may carry the pattern) never count. The summary names up to 5 by pid and title:
//   process 'VLLM::': 3 running: pid 7 (VLLM::EngineCore), pid 8 (VLLM::Worker_TP0), …
//   process 'VLLM::': none running
CheckOutcome ProbeProcess(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_PROCESS_PROBE_H_
