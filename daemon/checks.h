// Checks: one probe of a Check (an attempt), and a check run with its timing (after, every,
// within). Used for preflight, verify and skip_if.
//
// Runs on the daemon's io_context. Cancellation (the coroutine's cancellation slot, e.g. when
// a step is cancelled) stops waiting at once and kills a `run` probe's process group.
#ifndef DEPLOYD_CHECKS_H_
#define DEPLOYD_CHECKS_H_

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <string>

#include "deployd/plan.h"

namespace deployd {

struct CheckOutcome {
  bool passed = false;
  // One line for humans: "http GET http://127.0.0.1:8000/health: status 503, expected 200".
  std::string summary;
  // What was observed, for `status --json` and `why`: {"check": "http", "target": …,
  // "status_code": 503, "body_excerpt": …} / {"exit_status": 1, "output_tail": […]} / …
  boost::json::object evidence;
  int attempts = 0;  // probes made
};

// "http GET http://…/health", "run: python3 -c …", "disk_free /shared >= 600GiB", …
std::string DescribeCheck(const Check& check);

// One attempt, bounded by check.timeout.
boost::asio::awaitable<CheckOutcome> ProbeOnce(const Check& check);

// The check with its timing: waits `after`, then probes every `every` until one passes or
// `within` runs out (once when `within` is unset). Returns the last probe's outcome.
boost::asio::awaitable<CheckOutcome> RunCheck(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_H_
