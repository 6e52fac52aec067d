// The probes of the checks that block — service (systemctl), process (/proc), gpus_free (NVML
// or nvidia-smi) and weights_complete with sha256 (hashing) — run off the daemon's thread, in
// a child: deployd itself, `deployd --probe JSON` (probe_request.h, actions/builtin_action.h),
// which prints the outcome as one JSON line. On the daemon's io_context; cancelling the
// awaiting coroutine kills the child (probe_process.h).
#ifndef DEPLOYD_CHECKS_PROBE_IN_CHILD_H_
#define DEPLOYD_CHECKS_PROBE_IN_CHILD_H_

#include <boost/asio/awaitable.hpp>

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

// The child's outcome, with "check" and "target" in its evidence. A child that gives no answer
// fails the check: "no answer within 10s (raise the check's 'timeout')", "the probe gave no
// answer (exit status 1)".
boost::asio::awaitable<CheckOutcome> ProbeInChild(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_PROBE_IN_CHILD_H_
