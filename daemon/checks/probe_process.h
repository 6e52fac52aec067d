// A probe's child process — a `run` check's command, or deployd itself for a probe that must
// not run on the daemon's thread (probe_in_child.h) — started in a process group of its own
// (process/child_process.h), waited for within a limit, and terminated with its group when the
// awaiting coroutine is cancelled. On the daemon's io_context.
#ifndef DEPLOYD_CHECKS_PROBE_PROCESS_H_
#define DEPLOYD_CHECKS_PROBE_PROCESS_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/child_process.h"

namespace deployd {

// A probe's child past its timeout gets SIGTERM, then SIGKILL after this: a probe is a quick
// question, not a server that needs time to shut down cleanly.
inline constexpr Duration kProbeChildGrace = std::chrono::seconds(2);

// How the child ended, shared by the probe and the child's exit callback, which may outlive
// the probe's coroutine when it is cancelled.
struct ProbeChildExit {
  explicit ProbeChildExit(boost::asio::any_io_executor ex) : wake(ex) {}
  boost::asio::steady_timer wake;  // cancelled when the child has exited
  std::optional<ExitStatus> exit;
};

// Starts a probe's child; its exit is recorded in `state` and wakes WaitForProbeChild().
Result<std::shared_ptr<ChildProcess>> StartProbeChild(boost::asio::any_io_executor ex,
                                                      const SpawnOptions& options,
                                                      std::shared_ptr<ProbeChildExit> state,
                                                      ChildProcess::LineHandler on_line);

// Waits until the child exits or `limit` passes; true when it exited. Throws
// system_error(operation_aborted) when cancelled, after terminating the child's process group.
boost::asio::awaitable<bool> WaitForProbeChild(ProbeChildExit& state, ChildProcess& child,
                                               Duration limit);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_PROBE_PROCESS_H_
