#include "process/process_stop.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "process/process_table.h"
#include "util/units.h"

namespace deployd {
namespace {

using Clock = std::chrono::steady_clock;
using TargetKey = std::pair<pid_t, std::uint64_t>;  // (pid, start time): one process

// How long to wait between re-reads of /proc for a target that no pidfd watches (kernels
// before 5.3, or a pidfd that could not be opened).
constexpr auto kUnwatchedRecheck = std::chrono::milliseconds(100);

TargetKey KeyOf(const KillTarget& t) { return {t.pid, t.start_time}; }

// Pidfds on the processes being waited for, so that poll(2) wakes the moment one exits.
class ExitWaiter {
 public:
  ExitWaiter() = default;
  ExitWaiter(const ExitWaiter&) = delete;
  ExitWaiter& operator=(const ExitWaiter&) = delete;
  ~ExitWaiter() {
    for (auto& [key, fd] : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  // Blocks until one of `survivors` exits or `limit` passes. Returns early (after at most
  // kUnwatchedRecheck) when a survivor cannot be watched, so that /proc is read again.
  void WaitForAnyExit(const std::vector<Survivor>& survivors, Clock::duration limit) {
    std::vector<pollfd> polls;
    bool unwatched = false;
    for (const Survivor& s : survivors) {
      int fd = Watch(s.target);
      if (fd < 0) {
        unwatched = true;
      } else {
        polls.push_back({fd, POLLIN, 0});
      }
    }
    auto wait = unwatched ? std::min<Clock::duration>(limit, kUnwatchedRecheck) : limit;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
    // EINTR or a wake-up: the caller re-reads /proc either way.
    ::poll(polls.data(), polls.size(), static_cast<int>(std::max<long long>(ms, 0)));
  }

 private:
  int Watch(const KillTarget& target) {
    auto it = fds_.find(KeyOf(target));
    if (it != fds_.end()) return it->second;
    int fd = PidfdOpen(target.pid);
    // The pidfd pins whoever holds the pid now: only with the recorded start time is that the
    // target (a reused pid would never become readable for the target's exit).
    if (fd >= 0) {
      auto stat = ReadProcStat(target.pid);
      if (!stat || stat->start_time != target.start_time) {
        ::close(fd);
        return -1;  // gone: not remembered, so the next /proc read decides
      }
    }
    if (fd >= 0) fds_[KeyOf(target)] = fd;
    return fd;
  }

  std::map<TargetKey, int> fds_;
};

// SignalReport lines start with the target's name: "pid 7 (sleep): exited".
bool Mentions(const std::vector<std::string>& lines, const KillTarget& target) {
  std::string prefix = target.Name() + ": ";
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.rfind(prefix, 0) == 0; });
}

// Says "SIGTERM pid 123 (VLLM::Worker_TP0), group 120" for each target `report` delivered to,
// and returns their keys.
std::set<TargetKey> SaySignalled(const char* signal_name, const KillPlan& plan,
                                 const SignalReport& report, const SayLine& say) {
  std::set<TargetKey> signalled;
  for (const KillTarget& t : plan.targets()) {
    if (Mentions(report.skipped, t) || Mentions(report.errors, t)) continue;
    say(std::string(signal_name) + " " + t.Name() + ", group " + std::to_string(t.pgid));
    signalled.insert(KeyOf(t));
  }
  for (const std::string& error : report.errors) {
    say(std::string("cannot send ") + signal_name + " to " + error);
  }
  return signalled;
}

size_t CountGone(const std::set<TargetKey>& signalled, const std::vector<Survivor>& survivors) {
  size_t alive = 0;
  for (const Survivor& s : survivors) alive += signalled.count(KeyOf(s.target));
  return signalled.size() - alive;
}

std::string Processes(size_t n) { return std::to_string(n) + (n == 1 ? " process" : " processes"); }

std::string SignalErrors(const std::vector<std::string>& term,
                         const std::vector<std::string>& kill) {
  std::vector<std::string> all = term;
  for (const std::string& e : kill) {
    if (std::find(all.begin(), all.end(), e) == all.end()) all.push_back(e);
  }
  std::string text;
  for (const std::string& e : all) text += (text.empty() ? "" : ", ") + e;
  return text.empty() ? "" : "; cannot signal " + text;
}

}  // namespace

std::vector<Survivor> WaitUntilGone(KillPlan& plan, Duration limit) {
  auto deadline = Clock::now() + limit;
  ExitWaiter waiter;
  for (;;) {
    std::vector<Survivor> survivors = plan.Survivors();
    auto left = deadline - Clock::now();
    if (survivors.empty() || left <= Clock::duration::zero()) return survivors;
    waiter.WaitForAnyExit(survivors, left);
  }
}

void WaitUntilGone(std::vector<pid_t> pids, Duration limit) {
  KillOptions options;
  options.pids = std::move(pids);
  options.whole_groups = false;
  if (Result<KillPlan> plan = KillPlan::Select(options); plan.ok()) WaitUntilGone(*plan, limit);
}

Status StopProcesses(KillPlan& plan, Duration grace, const SayLine& say, Duration verify) {
  SignalReport term = plan.Signal(SIGTERM);
  for (const std::string& skipped : term.skipped) say(skipped);
  std::set<TargetKey> termed = SaySignalled("SIGTERM", plan, term, say);
  size_t already_gone = term.skipped.size();
  std::string gone_note =
      already_gone == 0 ? "" : "; " + Processes(already_gone) + " had exited already";

  std::vector<Survivor> survivors = WaitUntilGone(plan, grace);
  size_t by_term = CountGone(termed, survivors);
  if (survivors.empty()) {
    say(Processes(by_term) + " stopped by SIGTERM" + gone_note);
    return Status::Ok();
  }

  say(Processes(survivors.size()) + " still running after " + FormatDuration(grace) + ": SIGKILL");
  SignalReport kill = plan.Signal(SIGKILL);
  std::set<TargetKey> killed = SaySignalled("SIGKILL", plan, kill, say);
  std::vector<Survivor> left = WaitUntilGone(plan, verify);
  size_t by_kill = CountGone(killed, left);
  if (!left.empty()) {
    // Also the SIGTERM survivors that SIGKILL never reached (no permission).
    return Status::Error(Processes(left.size()) + " survived SIGKILL: " + DescribeSurvivors(left) +
                         SignalErrors(term.errors, kill.errors));
  }
  say(Processes(by_term + by_kill) + " stopped: " + std::to_string(by_term) + " by SIGTERM, " +
      std::to_string(by_kill) + " by SIGKILL after " + FormatDuration(grace) + gone_note);
  return Status::Ok();
}

}  // namespace deployd
