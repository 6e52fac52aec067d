// KillPlan: the processes a `kill` step (or `gpus_free` with stopping) will signal, and the
// signalling itself, driven by the engine one phase at a time:
//
//   auto plan = KillPlan::Select(options);      // match, protect, expand to process groups
//   plan->Signal(SIGTERM);                      // then the caller arms a timer for `grace`,
//   ... plan->Survivors().empty() ...           //   polling to finish early,
//   plan->Signal(SIGKILL);                      // then SIGKILL to whoever is left,
//   ... plan->Survivors() ...                   //   and polls until none or a verify deadline.
//
// Nothing here sleeps or waits: timing is the caller's (a steady_timer on the io_context, or
// process_stop.h's pidfd waits in blocking code). Every call is synchronous, bounded by a read
// of /proc, and safe on the daemon's one thread.
//
// Identity: a target is (pid, start time), never a bare pid. Each target is pinned with a
// pidfd when the plan is made (after checking its start time), so a signal can never reach a
// process that reused the pid after the target exited. Where pidfds are unavailable (kernels
// before 5.3) the start time is re-read right before each kill(2).
//
// Protection: a plan never includes deployd itself, any process running the deployd or
// deployctl binary (a supervisor, a second daemon, an attached client), the ancestors of the
// calling process and of every deployctl running (a `timeout`, `sudo` or CI runner whose
// command line names the plan), pid 1, kernel threads or zombies — even when a pattern or pid list
// names them. Those that matched are listed in excluded(), with why, for the step's evidence.
//
// Process groups: with `whole_groups`, every member of a matched process's group is a target
// (vLLM's workers share the API server's group unless it was started with setsid). The
// caller's own group is never expanded: it holds the caller's siblings, not the match's.
// Children forked into a target group while the plan runs are picked up by the next Signal().
#ifndef DEPLOYD_PROCESS_PROCESS_KILL_H_
#define DEPLOYD_PROCESS_PROCESS_KILL_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deployd/status.h"
#include "process/process_table.h"

namespace deployd {

struct KillOptions {
  // A pattern (util/pattern.h: RE2 syntax), searched (not anchored) in the command line (argv
  // joined by spaces), in comm and in argv[0] (the process title: `VLLM::EngineCore`,
  // `VLLM::Worker_TP0`). Empty: no pattern.
  std::string pattern;
  // Processes named by pid (e.g. those holding a GPU); identified by their start time now.
  std::vector<pid_t> pids;
  bool whole_groups = true;
  // Binaries whose processes are never targets, besides deployd's own and the deployctl (and
  // deployd) next to it. Compared by file identity (device and inode), so links do not matter.
  std::vector<std::string> protected_exes;
};

struct KillTarget {
  pid_t pid = 0;
  std::uint64_t start_time = 0;  // /proc/PID/stat field 22
  pid_t pgid = 0;
  std::string title;         // ProcessInfo::Title(): "VLLM::Worker_TP0"
  std::string command_line;  // ProcessInfo::CommandLine()
  // Why it is a target: "matches 'VLLM::'", "pid listed", "in process group 4242".
  std::string reason;
  // "pid 4242 (VLLM::EngineCore)"
  std::string Name() const;
};

// A process that matched but will never be signalled.
struct ExcludedProcess {
  KillTarget process;
  // "is deployd itself", "is pid 1", "is an ancestor of deployd", "runs the deployd binary",
  // "runs deployd or deployctl", "runs a protected binary"
  std::string why;
};

struct SignalReport {
  int sent = 0;  // signals delivered
  // Targets that had exited (or whose pid now belongs to another process) and were therefore
  // not signalled: "pid 7 (sleep): exited" / "pid 7 (sleep): pid reused, not signalled".
  std::vector<std::string> skipped;
  // Delivery failures: "pid 1 (init): Operation not permitted".
  std::vector<std::string> errors;
};

struct Survivor {
  KillTarget target;
  char state = '?';  // from /proc/PID/stat
  // Uninterruptible sleep: SIGKILL takes effect only when the kernel call returns, which for a
  // GPU process stuck in the driver may be never. Reported, not retried forever.
  bool stuck() const { return state == 'D'; }
  // "pid 7 (VLLM::Worker_TP0) is stuck in the kernel (state D): needs a reboot"
  // "pid 7 (sleep) is still running (state S)"
  std::string Describe() const;
};

class KillPlan {
 public:
  // Fails on an invalid pattern ("invalid pattern 'a(': …") or an unreadable /proc.
  static Result<KillPlan> Select(const KillOptions& options);
  // A plan for processes identified earlier (e.g. recorded when started): a target whose pid
  // is gone or has another start time now is skipped, never signalled. Protection applies.
  static KillPlan ForTargets(std::vector<KillTarget> targets);

  KillPlan(KillPlan&& other) noexcept;
  KillPlan& operator=(KillPlan&& other) noexcept;
  KillPlan(const KillPlan&) = delete;
  KillPlan& operator=(const KillPlan&) = delete;
  ~KillPlan();

  // Every process the plan has signalled or will signal, including ones that already exited.
  std::vector<KillTarget> targets() const;
  const std::vector<ExcludedProcess>& excluded() const { return excluded_; }

  // Sends `sig` to each target that is still the same process. With whole_groups, first adds
  // the children that targets forked into their groups since the last call.
  SignalReport Signal(int sig);

  // Targets still present, re-read from /proc now. Zombies count as gone: they hold nothing
  // and their parent (or init) reaps them. Targets seen gone are not looked at again.
  std::vector<Survivor> Survivors();

 private:
  struct Tracked {
    KillTarget target;
    int pidfd = -1;  // -1: none (gone, or pidfds unsupported)
    bool gone = false;
    std::string gone_why;  // "exited" / "pid reused"
  };
  KillPlan() = default;
  void Track(KillTarget target);
  void AddForkedGroupMembers();
  bool IsTracked(pid_t pid, std::uint64_t start_time) const;
  void CloseAll();

  std::vector<Tracked> tracked_;
  std::vector<ExcludedProcess> excluded_;
  std::vector<pid_t> groups_;  // sorted; the process groups taken whole
  bool whole_groups_ = false;
  struct Protection;  // what must never be signalled; defined in process_kill.cc
  std::unique_ptr<const Protection> protection_;
};

// One line for a survivor list: "pid 7 (x) is stuck in the kernel (state D): needs a reboot;
// pid 8 (y) is still running (state S)".
std::string DescribeSurvivors(const std::vector<Survivor>& survivors);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_PROCESS_KILL_H_
