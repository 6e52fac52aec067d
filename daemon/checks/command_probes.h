// The probes of the checks about commands: `run` (a command run to its exit within the
// check's timeout, judged by its exit status, output_matches, version_at_least and
// version_below) and `command` (is a program on PATH, as execvp would find it).
//
// On the daemon's io_context. A `run` probe's command runs as a child in its own process group
// (probe_process.h); cancelling the awaiting coroutine kills that group.
#ifndef DEPLOYD_CHECKS_COMMAND_PROBES_H_
#define DEPLOYD_CHECKS_COMMAND_PROBES_H_

#include <boost/asio/awaitable.hpp>

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

boost::asio::awaitable<CheckOutcome> ProbeRun(const Check& check);
CheckOutcome ProbeCommand(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_COMMAND_PROBES_H_
