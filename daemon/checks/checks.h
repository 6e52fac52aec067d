// Checks: one probe of a Check (an attempt), and a check run with its timing (after, every,
// within). Used for preflight, verify and skip_if.
//
// Runs on the daemon's io_context. Cancellation (the coroutine's cancellation slot, e.g. when
// a step is cancelled) stops waiting at once and kills a `run` probe's process group; the
// awaiting coroutine then gets boost::system::system_error(operation_aborted), as from any
// cancelled Asio operation. Every other failure is a CheckOutcome.
//
// The probes are grouped by what they touch: network_probes.h (http, tcp, port_free),
// file_probes.h (file, disk_free, weights_complete), command_probes.h (run, command), and
// probe_in_child.h for those that block (service, process, gpus_free, weights_complete with
// sha256). check_text.h names checks in summaries and evidence.
//
// Summaries are "<kind> <object>: <what was seen>", e.g.
//   http GET http://127.0.0.1:8000/health: status 503 (expected 200)
//   tcp 127.0.0.1:5432: connection refused          file /x: does not exist
//   command hf: not found on PATH                   port_free 0.0.0.0:8000: in use by pid 7 (vllm)
//   disk_free /shared: 12.3GiB free, 600GiB required
//   run 'python3 -c …': version 0.14.1 is below 0.15.0
// Evidence always has "check" (the kind), "target" and "elapsed_ms", plus what the kind saw:
// status_code, body_excerpt (first 512 bytes), error, exit_status, output_tail, version, size,
// free_bytes, searched, pid/comm, ….
#ifndef DEPLOYD_CHECKS_CHECKS_H_
#define DEPLOYD_CHECKS_CHECKS_H_

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <string>

#include "deployd/plan.h"

namespace deployd {

struct BenchmarkBaseline;  // checks/benchmark_verdict.h

struct CheckOutcome {
  bool passed = false;
  // One line for humans: "http GET http://127.0.0.1:8000/health: status 503 (expected 200)".
  std::string summary;
  // What was observed, for `status --json` and `why`: {"check": "http", "target": …,
  // "status_code": 503, "body_excerpt": …} / {"exit_status": 1, "output_tail": […]} / …
  boost::json::object evidence;
  // What the check measured that its step keeps when it passes, also in `evidence`: a
  // benchmark's {"benchmark", "baseline", "quality"}, the "version" a version check saw.
  boost::json::object measured;
  int attempts = 0;  // probes made
};

// "http GET http://…/health", "run 'python3 -c …' version >= 0.15.0", "disk_free /shared >=
// 600GiB", …
std::string DescribeCheck(const Check& check);

// One attempt, bounded by check.timeout. `check` (and `baseline`, which a benchmark is compared
// with; null: none) must outlive the returned awaitable.
boost::asio::awaitable<CheckOutcome> ProbeOnce(const Check& check,
                                               const BenchmarkBaseline* baseline = nullptr);

// The check with its timing: waits `after`, then probes every `every` until one passes or
// `within` runs out (once when `within` is unset). Returns the last probe's outcome.
boost::asio::awaitable<CheckOutcome> RunCheck(const Check& check,
                                              const BenchmarkBaseline* baseline = nullptr);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_CHECKS_H_
