// The processes below one process in the tree — what an attempt's supervisor, a child
// subreaper, owns: every process its action started, also those that left the action's
// process group (setsid) or lost their parent (a double fork), since orphans are reparented
// to the nearest subreaper. Read from /proc/PID/task/TID/children.
//
// Synchronous and bounded by the size of the tree; no locking (plain functions).
#ifndef DEPLOYD_PROCESS_PROCESS_TREE_H_
#define DEPLOYD_PROCESS_PROCESS_TREE_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "process/process_table.h"

namespace deployd {

// The live descendants of `root` (not `root` itself), parents before their children. Zombies
// are left out: they hold nothing and wait only to be reaped.
std::vector<ProcStat> Descendants(pid_t root);

// The live processes whose environment holds `entry` ("NAME=value") — inherited from an
// attempt's supervisor, so found again after the supervisor is gone — other than the caller.
// Reads /proc/PID/environ of every process (the caller's own uid, or all as root).
std::vector<ProcStat> ProcessesWithEnvironment(std::string_view entry);

// Sends `sig` to `process` if that pid still belongs to it (same start time), through a pidfd
// so that a pid reused meanwhile is never signalled. False when it is gone.
bool SignalIfSame(const ProcStat& process, int sig);

// "pid 12 (sleep), pid 13 (python3)"; at most `limit` named, then "and N more".
std::string NameProcesses(const std::vector<ProcStat>& processes, size_t limit = 8);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_PROCESS_TREE_H_
