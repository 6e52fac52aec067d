// The control protocol between deployctl and deployd (DESIGN.md §3): newline-delimited JSON
// over a Unix stream socket. Each request is one object on one line:
//
//   {"v": 1, "op": "apply", "plan_text": "...", "plan_file": "demo.yaml", "vars": {"k": "v"}}
//   {"v": 1, "op": "apply", …, "key": "rollout-7f3a/gpu1"}   → {"ok": true, "run", "existing"}:
//       with an idempotency key, the run once created under it is the answer ("existing":
//       true) and nothing is started; the same key with another plan text or vars is refused
//   {"v": 1, "op": "runs"}   → {"ok": true, "runs": [RUN…], "next"?: {"before_seq": 41}}
//   {"v": 1, "op": "runs", "plan": "demo", "state": "failed", "since_ms": 1764519000000,
//    "limit": 20, "before_seq": 41}   (each optional: the runs of that plan, in that state,
//       created since then, numbered below 41, newest first; at most "limit" and 1000 an
//       answer, with "next" when more match: its members, sent with the same filters, ask for
//       the next page)
//   {"v": 1, "op": "status", "run": "demo-3"}
//   {"v": 1, "op": "status", "key": "rollout-7f3a/gpu1"}     (the run of that key)
//   {"v": 1, "op": "show", "run": "demo-3", "plan_text": true}   → {"ok": true, "run": RUN
//       without its steps, "plan_text"?: the plan exactly as applied (with "plan_text": true)}
//   {"v": 1, "op": "delete", "run": "demo-3"}   → {"ok": true, "deleted": ["demo-3"]}
//   {"v": 1, "op": "prune", "older_than_ms": 604800000}   → {"ok": true, "deleted": [RUN…],
//       "more": false}: the runs that finished longer ago than that, at most 1000 an answer
//       ("more": ask again); delete and prune forget finished runs only, as retention does
//   {"v": 1, "op": "logs", "run": "demo-3", "step": "fetch"}   (step optional; with
//       "timestamps": true each entry's "times": [[AT, MS]…] say when its lines were written,
//       and every entry has "attempts": [{"at", "attempt", "of", "started_at_ms"}…])
//   {"v": 1, "op": "logs", "run": "demo-3", "step": "fetch", "follow": true}   (a stream)
//   {"v": 1, "op": "logs", …, "follow": true, "resume": {"file": 1234, "offset": 5678}}
//       (goes on where a client's copy ends: a data line's "file" and "offset")
//   {"v": 1, "op": "cancel" | "follow", "run": "demo-3"}
//   {"v": 1, "op": "follow", "run": "demo-3", "after_seq": 12}   (the events after seq 12)
//   {"v": 1, "op": "retry" | "skip", "run": "demo-3", "step": "fetch"}  (retry: step optional)
//   {"v": 1, "op": "pause" | "resume", "run": "demo-3"}
//   {"v": 1, "op": "approve", "run": "demo-3", "step": "confirm"}
//   {"v": 1, "op": "why", "run": "demo-3"}      → {"ok": true, "why": {…}} (failure_report.h)
//   {"v": 1, "op": "history", "plan": "kimi", "limit": 20}   (limit optional)
//       → {"ok": true, "history": {…}} (history_report.h): what the plan's runs measured
//   {"v": 1, "op": "metrics"}   → {"ok": true, "metrics": [{"name", "type", "help", "samples"}]}
//       (control/metrics_report.h): what deployd exports to Prometheus
//   {"v": 1, "op": "plan", "plan_text": "...", "plan_file": "demo.yaml", "vars": {…}}
//       → {"ok": true, "plan": {…}} (plan_preview.h): a dry run; nothing is recorded
//   {"v": 1, "op": "ping"}
//
// Every run a request names or lists is the run as `status` answers it (protocol/run_wire.h),
// whose "applied_by" ("alice (uid 1000)") says who applied it. The operator's commands record
// who asked in the reasons and events they commit ("cancelled by alice (uid 1000)"), and so
// does the "run.created" event ("plan demo from demo.yaml, applied by alice (uid 1000)").
//
// Each answer is one line: {"ok": true, …} or {"ok": false, "error": "one line for humans"}
// (an invalid plan adds "diagnostics": ["FILE:LINE:COL: error: …", …]). `follow` answers with a
// stream: {"type": "snapshot", "run": RUN}, then {"type": "event", …} lines as transitions are
// committed, and {"type": "end", "run": RUN} once the run has reached a terminal state.
// `logs` with "follow" answers with a stream too: {"ok": true, "type": "start", "run", "step",
// "path"}, {"type": "data", "text": …, "file", "offset"} as the step's output grows (where in
// the log, by inode and offset, the text ends), and {"type": "end", "run", "step", "state"}
// once the step has ended and its processes have exited. With "resume" the start line says
// "resumed": true when the stream goes on from there (the rest of the rotated log first, when
// the log was rotated since), false when that file is gone (then from the newest MiB). A client
// that falls behind a stream by more than its budget gets {"type": "missed", …} where lines were
// dropped (daemon/control/stream_queue.h); `logs -f` waits for it instead, and drops nothing. A
// connection may carry several requests, one after the other. The JSON of runs, events and stream
// lines is encoded and decoded in one place, daemon/protocol/ (run_wire.h, follow_stream.h,
// answer.h), by deployd and deployctl alike.
#ifndef DEPLOYD_PROTOCOL_H_
#define DEPLOYD_PROTOCOL_H_

#include <cstddef>

namespace deployd {

inline constexpr int kProtocolVersion = 1;
// A request line longer than this is refused and the connection closed.
inline constexpr std::size_t kMaxRequestBytes = 4u << 20;

// deployctl's exit codes (binding).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_H_
