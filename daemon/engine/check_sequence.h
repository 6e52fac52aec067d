// RunChecks: a list of checks (a plan's preflight, a step's skip_if or verify) run in order on
// the caller's executor; the first failure ends it. The outcome of a failure carries its check
// in the evidence ("check", "summary", "attempts"); a pass says how many passed. Cancelling
// the coroutine stops the check that runs.
#ifndef DEPLOYD_ENGINE_CHECK_SEQUENCE_H_
#define DEPLOYD_ENGINE_CHECK_SEQUENCE_H_

#include <boost/asio/awaitable.hpp>
#include <vector>

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

boost::asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_CHECK_SEQUENCE_H_
