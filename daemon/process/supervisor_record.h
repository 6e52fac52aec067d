// SupervisorRecord: what the supervisor of an attempt's action (supervisor.h) knows and writes
// down — in its status file (replaced atomically, util/atomic_file.h) and, once, as a line on
// its stdout for the daemon that started it:
//   `starting`  before the action is started: no status file at all means it never was;
//   `running`   who the action and the supervisor are;
//   `exited`    how the action ended, once every process of the attempt is gone; or
//   `failed_to_start`.
//
// The status file is the witness of an end that happens while deployd is down. It outlives
// deployd's death (the page cache does); a crash of the host ends the attempt's processes too,
// and the daemon, seeing another boot, never takes a missing record for "never started".
//
// Format (one JSON object):
//   {"state": "starting" | "running" | "exited" | "failed_to_start",
//    "pid": 4242, "start_time": 123456, "supervisor_pid": 4241,   // pid 0 while starting
//    "supervisor_start_time": 123455, "boot_id": "…",
//    "started_at_ms": …, "ended_at_ms": …,          // ended_at_ms: 0 while running
//    "exit_code": 3, "signal": 0,                   // when exited
//    "stopped": true,                               // a stop was asked for (SIGTERM)
//    "left": [{"pid": 7, "name": "sleep"}],         // what the action left running, stopped
//    "stuck": [{"pid": 8, "name": "x", "state": "D"}],  // what would not die even by SIGKILL
//    "log_lost_lines": 12, "log_lost_bytes": 8388608,  // output the log could not take
//    "log_error": "No space left on device",
//    "error": "cannot start '/x': Permission denied"}  // when failed_to_start
//
// The file is padded with spaces to kStatusFileReserve bytes, so that on a full disk — where
// no new file can be written to replace it — the last record still fits in place.
#ifndef DEPLOYD_PROCESS_SUPERVISOR_RECORD_H_
#define DEPLOYD_PROCESS_SUPERVISOR_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"
#include "process/exit_status.h"
#include "process/process_identity.h"

namespace deployd {

// A process the supervisor names in its record.
struct ProcessNote {
  pid_t pid = 0;
  std::string name;  // comm
  char state = '?';  // for `stuck`: /proc/PID/stat's state (D: in the kernel, unkillable)
  bool operator==(const ProcessNote&) const = default;
};

struct SupervisorRecord {
  enum class State { kStarting, kRunning, kExited, kFailedToStart };
  State state = State::kRunning;
  ProcessIdentity action;  // the action's process; its pid is also its process group
  ProcessIdentity supervisor;
  std::int64_t started_at_ms = 0;
  std::int64_t ended_at_ms = 0;
  ExitStatus exit;                 // kExited
  bool stopped = false;            // kExited: a stop was asked for
  std::vector<ProcessNote> left;   // kExited: left running by the action, stopped
  std::vector<ProcessNote> stuck;  // kExited: still there after SIGKILL
  std::string error;               // kFailedToStart
  // Output of the action that could not be written to the step's log (a full disk, …): how
  // many lines (a line cut short counts) and bytes, and the first error.
  std::uint64_t log_lost_lines = 0;
  std::uint64_t log_lost_bytes = 0;
  std::string log_error;

  std::string ToJson() const;  // one line, no newline
  static Result<SupervisorRecord> FromJson(std::string_view text);
};

inline constexpr size_t kStatusFileReserve = 4096;

// Replaces the status file at `path` with `record` atomically (util/atomic_file.h), mode 0640:
// the supervisor's records are the daemon's, not for every user of the host to read. Not
// fsync'd (see above): it is written twice for every attempt of every step. When no new file
// can be written (a full disk), the record is written over the old one in place, if it fits
// in the space the old one reserved: a reader could then see it half-written, but without it
// nobody would learn how the action ended.
Status WriteSupervisorRecord(const std::string& path, const SupervisorRecord& record);

// The status file's record; nullopt when there is no file (the supervisor has not written it).
Result<std::optional<SupervisorRecord>> ReadSupervisorRecord(const std::string& path);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_SUPERVISOR_RECORD_H_
