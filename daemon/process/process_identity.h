// ProcessIdentity: one process, told apart from any later process that is given the same pid:
// its pid, its start time (field 22 of /proc/PID/stat, clock ticks since boot) and the boot it
// belongs to. Used to recognise, after deployd restarts, the very processes it started before.
#ifndef DEPLOYD_PROCESS_PROCESS_IDENTITY_H_
#define DEPLOYD_PROCESS_PROCESS_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace deployd {

struct ProcessIdentity {
  pid_t pid = 0;
  std::uint64_t start_time = 0;
  std::string boot_id;  // /proc/sys/kernel/random/boot_id; a reboot restarts pids and times

  // The process that has `pid` now (also a zombie that is not reaped yet); nullopt when none.
  static std::optional<ProcessIdentity> Of(pid_t pid);
  // True when this very process is running (a zombie has ended: false).
  bool IsAlive() const;
  bool operator==(const ProcessIdentity&) const = default;
};

// This boot's id ("" when /proc does not say).
const std::string& CurrentBootId();

// Field 22 of /proc/PID/stat; nullopt when there is no such process.
std::optional<std::uint64_t> ProcessStartTime(pid_t pid);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_PROCESS_IDENTITY_H_
