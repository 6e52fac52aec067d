// SupervisorRecord: what the supervisor of a background action knows and writes down — in its
// status file (replaced atomically: util/atomic_file.h) and, once, as a line on its
// stdout for the daemon that started it. First `running` (who the action and the supervisor
// are), then `exited` (how the action ended) or `failed_to_start`.
//
// The status file is the only witness of an exit that happens while deployd is down, so it is
// written durably; the daemon only reads it.
//
// Format (one JSON object):
//   {"state": "running" | "exited" | "failed_to_start",
//    "pid": 4242, "start_time": 123456, "supervisor_pid": 4241,
//    "supervisor_start_time": 123455, "boot_id": "…",
//    "started_at_ms": …, "ended_at_ms": …,          // ended_at_ms: 0 while running
//    "exit_code": 3, "signal": 0,                   // when exited
//    "error": "cannot start '/x': Permission denied"}  // when failed_to_start
#ifndef DEPLOYD_PROCESS_SUPERVISOR_RECORD_H_
#define DEPLOYD_PROCESS_SUPERVISOR_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "deployd/status.h"
#include "process/exit_status.h"
#include "process/process_identity.h"

namespace deployd {

struct SupervisorRecord {
  enum class State { kRunning, kExited, kFailedToStart };
  State state = State::kRunning;
  ProcessIdentity action;  // the action's process; its pid is also its process group
  ProcessIdentity supervisor;
  std::int64_t started_at_ms = 0;
  std::int64_t ended_at_ms = 0;
  ExitStatus exit;    // kExited
  std::string error;  // kFailedToStart

  std::string ToJson() const;  // one line, no newline
  static Result<SupervisorRecord> FromJson(std::string_view text);
};

// Replaces the status file at `path` with `record` atomically (util/atomic_file.h), mode 0640:
// the supervisor's records are the daemon's, not for every user of the host to read.
Status WriteSupervisorRecord(const std::string& path, const SupervisorRecord& record);

// The status file's record; nullopt when there is no file (the supervisor has not written it).
Result<std::optional<SupervisorRecord>> ReadSupervisorRecord(const std::string& path);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_SUPERVISOR_RECORD_H_
