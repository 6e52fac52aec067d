// ProcessTable: a snapshot of the host's processes read from /proc, for `kill` and for naming
// the processes that hold a GPU.
//
// Processes come and go while /proc is read: one that vanishes mid-read is left out, never an
// error, and a pid whose start time changed between the reads of its files (it exited and the
// pid was reused) is left out too rather than reported with another process's command line.
// Only a missing or unreadable /proc itself is an error.
//
// Reading is synchronous and touches only /proc (a few hundred small reads on a typical host,
// milliseconds), so the daemon's one thread may call it directly. No locking: a ProcessTable is
// a value.
#ifndef DEPLOYD_PROCESS_PROCESS_TABLE_H_
#define DEPLOYD_PROCESS_PROCESS_TABLE_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd {

// The fields of /proc/PID/stat that deployd uses.
struct ProcStat {
  pid_t pid = 0;
  std::string comm;  // the kernel's 15-character process name (PR_SET_NAME), without parens
  char state = '?';  // R, S, D, Z, T, t, X, I, …
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t sid = 0;
  // Field 22: clock ticks after boot at which the process started. With the pid it identifies
  // one process for the host's uptime: a reused pid has a later start time.
  std::uint64_t start_time = 0;
};

struct ProcessInfo {
  ProcStat stat;
  // /proc/PID/cmdline split at NULs; empty for kernel threads and zombies. argv[0] is what the
  // process shows as its title: setproctitle (vLLM's `VLLM::EngineCore`) and `exec -a` rewrite it.
  std::vector<std::string> argv;

  pid_t pid() const { return stat.pid; }
  // argv joined by single spaces ("vllm serve /models/x --port 8000"); comm in brackets for a
  // process without argv, as ps shows it ("[kworker/0:1]").
  std::string CommandLine() const;
  // The name to show a user: argv[0] when set (without its directory when it is a plain path),
  // else comm. "VLLM::Worker_TP0" rather than comm's truncated "VLLM::Worker_TP".
  std::string Title() const;
  bool IsKernelThread() const { return argv.empty() && stat.state != 'Z'; }
};

// Parses the text of /proc/PID/stat. comm may hold spaces and parentheses ("a) (b"): it is
// everything between the first '(' and the last ')'. Errors say which field is missing.
Result<ProcStat> ParseProcStat(std::string_view text);

// Splits the raw bytes of /proc/PID/cmdline at NULs. Trailing empty strings are dropped: a
// title set by setproctitle is padded with NULs over the rest of the old argv area.
std::vector<std::string> ParseCmdline(std::string_view raw);

// /proc/PID/stat alone (cheaper than ReadProcess); nullopt when the process does not exist.
std::optional<ProcStat> ReadProcStat(pid_t pid, std::string_view proc_root = "/proc");

// pidfd_open(2) (a raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C"); -1 and errno
// on failure.
int PidfdOpen(pid_t pid);

// One process, or nullopt when it does not exist (any more) or changed identity mid-read.
// REQUIRES: proc_root names a procfs (or a tree laid out like one, for tests).
std::optional<ProcessInfo> ReadProcess(pid_t pid, std::string_view proc_root = "/proc");

class ProcessTable {
 public:
  // Fails only when proc_root cannot be listed ("cannot list /proc: …").
  static Result<ProcessTable> Read(std::string_view proc_root = "/proc");

  const std::vector<ProcessInfo>& processes() const { return processes_; }  // sorted by pid
  const ProcessInfo* Find(pid_t pid) const;
  // ppid chain above `pid`, nearest first, ending at pid 1 (or where the chain leaves the
  // table). Excludes `pid` itself.
  std::vector<pid_t> AncestorsOf(pid_t pid) const;

 private:
  std::vector<ProcessInfo> processes_;
};

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_PROCESS_TABLE_H_
