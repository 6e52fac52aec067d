#include "process/process_tree.h"

#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "process/process_identity.h"
#include "process/process_kill.h"

namespace deployd {

namespace {

// Children of every thread of `pid`: a child belongs to the thread that forked it.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(task_dir.c_str());
  if (!dir) return children;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream in(task_dir + "/" + entry->d_name + "/children");
    pid_t child = 0;
    while (in >> child) children.push_back(child);
  }
  ::closedir(dir);
  return children;
}

}  // namespace

std::vector<ProcStat> Descendants(pid_t root) {
  std::vector<ProcStat> found;
  std::set<pid_t> seen{root};
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    for (pid_t child : ChildrenOf(parent)) {
      if (!seen.insert(child).second) continue;
      std::optional<ProcStat> stat = ReadProcStat(child);
      if (!stat || stat->ppid != parent) continue;  // exited, or the pid is another's now
      frontier.push_back(child);
      if (stat->state != 'Z' && stat->state != 'X') found.push_back(*stat);
    }
  }
  return found;
}

std::vector<ProcStat> ProcessesWithEnvironment(std::string_view entry) {
  std::vector<ProcStat> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  const pid_t self = ::getpid();
  std::string needle;
  needle.push_back('\0');
  needle.append(entry);
  needle.push_back('\0');
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (pid == self) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/environ", std::ios::binary);
    if (!in) continue;
    std::string environ_text = "\0";
    environ_text.append(std::istreambuf_iterator<char>(in), {});
    if (environ_text.find(needle) == std::string::npos) continue;
    std::optional<ProcStat> stat = ReadProcStat(pid);
    if (stat && stat->state != 'Z' && stat->state != 'X') found.push_back(*stat);
  }
  ::closedir(proc);
  return found;
}

bool SignalIfSame(const ProcStat& process, int sig) {
  int pidfd = PidfdOpen(process.pid);
  if (pidfd < 0) return false;
  // Pinned: from here on the pidfd refers to whatever has the pid now; check it is ours.
  std::optional<std::uint64_t> start = ProcessStartTime(process.pid);
  bool same = start && *start == process.start_time;
  if (same) same = ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0;
  ::close(pidfd);
  return same;
}

std::string NameProcesses(const std::vector<ProcStat>& processes, size_t limit) {
  std::string out;
  for (size_t i = 0; i < processes.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += "pid " + std::to_string(processes[i].pid) + " (" + processes[i].comm + ")";
  }
  if (processes.size() > limit) out += " and " + std::to_string(processes.size() - limit) + " more";
  return out;
}

}  // namespace deployd
