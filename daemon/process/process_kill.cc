#include "process/process_kill.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "util/pattern.h"

namespace deployd {
namespace {

// Raw syscalls: glibc 2.36's <sys/pidfd.h> lacks extern "C" (see build-facts §6).
int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0u));
}

// True when the process behind `pidfd` has exited (it may still be a zombie).
bool PidfdExited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

std::optional<std::pair<dev_t, ino_t>> FileIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string SelfExePath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

// The identities of deployd's program `name` ("deployd", "deployctl", "deployd-supervise")
// where a build or an install puts it: beside this binary (a build tree: all in bin/), or in
// the bin/, sbin/ and libexec/deployd/ beside its folder (an install: deployd in sbin/,
// deployctl in bin/, deployd-supervise in libexec/deployd/).
std::vector<std::pair<dev_t, ino_t>> ToolIdentities(const char* name) {
  std::vector<std::pair<dev_t, ino_t>> ids;
  std::string self_exe = SelfExePath();
  if (self_exe.empty()) return ids;
  const std::string dir = Dirname(self_exe);
  const std::string prefix = Dirname(dir);
  for (const std::string& folder :
       {dir, prefix + "/bin", prefix + "/sbin", prefix + "/libexec/deployd"}) {
    auto id = FileIdentity(folder + "/" + name);
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  return ids;
}

KillTarget TargetFrom(const ProcessInfo& info, std::string reason) {
  KillTarget target;
  target.pid = info.pid();
  target.start_time = info.stat.start_time;
  target.pgid = info.stat.pgid;
  target.title = info.Title();
  target.command_line = info.CommandLine();
  target.reason = std::move(reason);
  return target;
}

}  // namespace

// What a plan must never touch, computed once per plan from the live /proc.
struct KillPlan::Protection {
  pid_t self = 0;
  pid_t own_pgid = 0;
  std::vector<pid_t> pids;  // self, its ancestors, pid 1
  // The ancestors of every deployctl running now (a `timeout`, `sudo` or CI runner whose
  // command line holds the plan's name would match a pattern).
  std::vector<pid_t> client_ancestors;
  std::vector<std::pair<dev_t, ino_t>> own_exes;    // this binary
  std::vector<std::pair<dev_t, ino_t>> tool_exes;   // the deployd and deployctl beside it
  std::vector<std::pair<dev_t, ino_t>> extra_exes;  // KillOptions::protected_exes

  static Protection Compute(const std::vector<std::string>& extra_exes) {
    Protection p;
    p.self = ::getpid();
    p.own_pgid = ::getpgrp();
    p.pids.push_back(p.self);
    p.pids.push_back(1);
    // The ppid chain from the live /proc rather than a snapshot: the chain is short and a
    // snapshot taken for matching may predate a re-parenting.
    pid_t pid = p.self;
    for (int hops = 0; hops < 4096; ++hops) {
      auto stat = ReadProcStat(pid);
      if (!stat || stat->ppid <= 0) break;
      pid = stat->ppid;
      if (std::find(p.pids.begin(), p.pids.end(), pid) != p.pids.end()) break;
      p.pids.push_back(pid);
    }
    if (auto id = FileIdentity("/proc/self/exe")) p.own_exes.push_back(*id);
    // A second daemon, or a deployctl attached to this one, may well carry the plan's pattern
    // in its command line (`deployctl apply plans/vllm.yaml`); so do supervisors.
    for (const char* tool : {"deployd", "deployctl", "deployd-supervise"})
      for (const auto& id : ToolIdentities(tool)) p.tool_exes.push_back(id);
    for (const std::string& path : extra_exes) {
      if (auto id = FileIdentity(path)) p.extra_exes.push_back(*id);
    }
    p.AddClientAncestors();
    return p;
  }

  void AddClientAncestors() {
    std::vector<std::pair<dev_t, ino_t>> clients = ToolIdentities("deployctl");
    if (clients.empty()) return;
    DIR* proc = ::opendir("/proc");
    if (!proc) return;
    while (dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      auto id = FileIdentity(std::string("/proc/") + e->d_name + "/exe");
      if (!id || std::find(clients.begin(), clients.end(), *id) == clients.end()) continue;
      pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
      for (int hops = 0; hops < 4096; ++hops) {
        auto stat = ReadProcStat(pid);
        if (!stat || stat->ppid <= 1) break;
        pid = stat->ppid;
        if (std::find(client_ancestors.begin(), client_ancestors.end(), pid) !=
            client_ancestors.end())
          break;
        client_ancestors.push_back(pid);
      }
    }
    ::closedir(proc);
  }

  // Why `pid` must not be signalled, or "" when it may be.
  std::string Why(pid_t pid) const {
    if (pid == self) return "is deployd itself";
    if (pid == 1) return "is pid 1";
    if (std::find(pids.begin(), pids.end(), pid) != pids.end()) {
      return "is an ancestor of deployd";
    }
    if (std::find(client_ancestors.begin(), client_ancestors.end(), pid) !=
        client_ancestors.end()) {
      return "is an ancestor of a deployctl";
    }
    // An exe link that cannot be read (another user's process, when deployd is not root) is
    // not compared: deployd could not signal that process anyway.
    if (auto id = FileIdentity("/proc/" + std::to_string(pid) + "/exe")) {
      auto has = [&](const auto& ids) {
        return std::find(ids.begin(), ids.end(), *id) != ids.end();
      };
      if (has(own_exes)) return "runs the deployd binary";
      if (has(tool_exes)) return "runs deployd or deployctl";
      if (has(extra_exes)) return "runs a protected binary";
    }
    return "";
  }
};

std::string KillTarget::Name() const { return "pid " + std::to_string(pid) + " (" + title + ")"; }

std::string Survivor::Describe() const {
  std::string state_text(1, state);
  if (stuck()) {
    return target.Name() + " is stuck in the kernel (state D): needs a reboot";
  }
  return target.Name() + " is still running (state " + state_text + ")";
}

std::string DescribeSurvivors(const std::vector<Survivor>& survivors) {
  std::string text;
  for (const Survivor& s : survivors) {
    if (!text.empty()) text += "; ";
    text += s.Describe();
  }
  return text;
}

Result<KillPlan> KillPlan::Select(const KillOptions& options) {
  PatternSet pattern;
  if (!options.pattern.empty()) {
    Result<PatternSet> compiled = CompilePattern(options.pattern);
    if (!compiled.ok()) return compiled.status();
    pattern = std::move(compiled.value());
  }
  auto table = ProcessTable::Read();
  if (!table.ok()) return table.status();

  KillPlan plan;
  plan.protection_ = std::make_unique<Protection>(Protection::Compute(options.protected_exes));
  const Protection& protection = *plan.protection_;
  plan.whole_groups_ = options.whole_groups;

  auto matches = [&](const ProcessInfo& info) -> std::string {
    if (std::find(options.pids.begin(), options.pids.end(), info.pid()) != options.pids.end()) {
      return "pid listed";
    }
    if (pattern.empty()) return "";
    if (pattern.Matches(info.CommandLine()) || pattern.Matches(info.stat.comm) ||
        (!info.argv.empty() && pattern.Matches(info.argv[0]))) {
      return "matches '" + options.pattern + "'";
    }
    return "";
  };

  std::set<pid_t> groups;
  for (const ProcessInfo& info : table->processes()) {
    // Kernel threads are never deployd's business; zombies are already dead.
    if (info.IsKernelThread() || info.stat.state == 'Z' || info.stat.state == 'X') continue;
    std::string reason = matches(info);
    if (reason.empty()) continue;
    if (std::string why = protection.Why(info.pid()); !why.empty()) {
      plan.excluded_.push_back({TargetFrom(info, reason), why});
      continue;
    }
    plan.Track(TargetFrom(info, reason));
    pid_t pgid = info.stat.pgid;
    // The caller's own group holds its siblings, and a group led by a protected process (a
    // login shell's job, pid 1) is not the match's to take down.
    if (options.whole_groups && pgid > 1 && pgid != protection.own_pgid &&
        protection.Why(pgid).empty()) {
      groups.insert(pgid);
    }
  }
  plan.groups_.assign(groups.begin(), groups.end());
  if (!plan.groups_.empty()) {
    for (const ProcessInfo& info : table->processes()) {
      if (info.IsKernelThread() || info.stat.state == 'Z' || info.stat.state == 'X') continue;
      if (!std::binary_search(plan.groups_.begin(), plan.groups_.end(), info.stat.pgid)) continue;
      if (plan.IsTracked(info.pid(), info.stat.start_time)) continue;
      std::string reason = "in process group " + std::to_string(info.stat.pgid);
      if (std::string why = protection.Why(info.pid()); !why.empty()) {
        plan.excluded_.push_back({TargetFrom(info, reason), why});
        continue;
      }
      plan.Track(TargetFrom(info, reason));
    }
  }
  return plan;
}

KillPlan KillPlan::ForTargets(std::vector<KillTarget> targets) {
  KillPlan plan;
  plan.protection_ = std::make_unique<Protection>(Protection::Compute({}));
  const Protection& protection = *plan.protection_;
  for (KillTarget& target : targets) {
    auto stat = ReadProcStat(target.pid);
    // Only the process the record names is checked against protection: a pid now held by
    // another process is skipped anyway.
    if (stat && stat->start_time == target.start_time) {
      if (std::string why = protection.Why(target.pid); !why.empty()) {
        plan.excluded_.push_back({std::move(target), why});
        continue;
      }
    }
    plan.Track(std::move(target));
  }
  return plan;
}

KillPlan::KillPlan(KillPlan&& other) noexcept { *this = std::move(other); }

KillPlan& KillPlan::operator=(KillPlan&& other) noexcept {
  if (this != &other) {
    CloseAll();
    tracked_ = std::move(other.tracked_);
    excluded_ = std::move(other.excluded_);
    groups_ = std::move(other.groups_);
    whole_groups_ = other.whole_groups_;
    protection_ = std::move(other.protection_);
    other.tracked_.clear();  // the fds now belong to this plan
  }
  return *this;
}

KillPlan::~KillPlan() { CloseAll(); }

void KillPlan::CloseAll() {
  for (Tracked& t : tracked_) {
    if (t.pidfd >= 0) ::close(t.pidfd);
    t.pidfd = -1;
  }
}

bool KillPlan::IsTracked(pid_t pid, std::uint64_t start_time) const {
  return std::any_of(tracked_.begin(), tracked_.end(), [&](const Tracked& t) {
    return t.target.pid == pid && t.target.start_time == start_time;
  });
}

void KillPlan::Track(KillTarget target) {
  Tracked t;
  t.target = std::move(target);
  int fd = PidfdOpen(t.target.pid);
  if (fd < 0 && errno == ESRCH) {
    t.gone = true;
    t.gone_why = "exited";
  } else {
    // The pidfd pins whichever process holds the pid now; only if that process still has the
    // recorded start time is it the target. Checked after opening, so no reuse can slip in
    // between the check and the pin.
    auto stat = ReadProcStat(t.target.pid);
    if (!stat) {
      t.gone = true;
      t.gone_why = "exited";
    } else if (stat->start_time != t.target.start_time) {
      t.gone = true;
      t.gone_why = "pid reused, not signalled";
    }
    if (t.gone) {
      if (fd >= 0) ::close(fd);
    } else {
      t.pidfd = fd;  // -1 when pidfds are unsupported: Signal() re-checks the start time
    }
  }
  tracked_.push_back(std::move(t));
}

void KillPlan::AddForkedGroupMembers() {
  auto table = ProcessTable::Read();
  if (!table.ok()) return;
  // A child forked into a target's group since the plan was made: its parent is a live target
  // and it shares a target group. Repeated so that grandchildren found in the same read join.
  for (bool added = true; added;) {
    added = false;
    for (const ProcessInfo& info : table->processes()) {
      if (info.IsKernelThread() || info.stat.state == 'Z' || info.stat.state == 'X') continue;
      if (!std::binary_search(groups_.begin(), groups_.end(), info.stat.pgid)) continue;
      if (IsTracked(info.pid(), info.stat.start_time)) continue;
      bool parent_is_target = std::any_of(tracked_.begin(), tracked_.end(), [&](const Tracked& t) {
        return !t.gone && t.target.pid == info.stat.ppid;
      });
      if (!parent_is_target) continue;
      std::string reason = "in process group " + std::to_string(info.stat.pgid);
      if (std::string why = protection_->Why(info.pid()); !why.empty()) {
        bool known = std::any_of(excluded_.begin(), excluded_.end(), [&](const auto& e) {
          return e.process.pid == info.pid() && e.process.start_time == info.stat.start_time;
        });
        if (!known) excluded_.push_back({TargetFrom(info, reason), why});
        continue;
      }
      Track(TargetFrom(info, reason));
      added = true;
    }
  }
}

std::vector<KillTarget> KillPlan::targets() const {
  std::vector<KillTarget> out;
  out.reserve(tracked_.size());
  for (const Tracked& t : tracked_) out.push_back(t.target);
  return out;
}

SignalReport KillPlan::Signal(int sig) {
  if (whole_groups_ && !groups_.empty()) AddForkedGroupMembers();
  SignalReport report;
  for (Tracked& t : tracked_) {
    int error = 0;
    if (t.gone) {
      // Seen gone earlier; reported again so that each phase's report is complete.
    } else if (t.pidfd >= 0) {
      if (PidfdSendSignal(t.pidfd, sig) != 0) error = errno;
    } else if (auto stat = ReadProcStat(t.target.pid); !stat) {
      error = ESRCH;
    } else if (stat->start_time != t.target.start_time) {
      t.gone = true;
      t.gone_why = "pid reused, not signalled";
    } else if (::kill(t.target.pid, sig) != 0) {
      error = errno;
    }
    if (error == ESRCH) {
      t.gone = true;
      t.gone_why = "exited";
    }
    if (t.gone) {
      report.skipped.push_back(t.target.Name() + ": " + t.gone_why);
      continue;
    }
    if (error != 0) {
      report.errors.push_back(t.target.Name() + ": " + std::strerror(error));
      continue;
    }
    ++report.sent;
    // A stopped process acts on SIGTERM only once continued; systemd sends SIGCONT after
    // SIGTERM for the same reason. SIGKILL needs no help.
    if (sig != SIGKILL && sig != SIGCONT) {
      if (t.pidfd >= 0) {
        PidfdSendSignal(t.pidfd, SIGCONT);
      } else {
        ::kill(t.target.pid, SIGCONT);
      }
    }
  }
  return report;
}

std::vector<Survivor> KillPlan::Survivors() {
  std::vector<Survivor> survivors;
  for (Tracked& t : tracked_) {
    if (t.gone) continue;
    bool exited = t.pidfd >= 0 && PidfdExited(t.pidfd);
    std::optional<ProcStat> stat;
    if (!exited) {
      stat = ReadProcStat(t.target.pid);
      exited = !stat || stat->start_time != t.target.start_time || stat->state == 'Z' ||
               stat->state == 'X';
    }
    if (exited) {
      t.gone = true;
      t.gone_why = "exited";
      if (t.pidfd >= 0) ::close(t.pidfd);
      t.pidfd = -1;
      continue;
    }
    survivors.push_back({t.target, stat->state});
  }
  return survivors;
}

}  // namespace deployd
