#include "process/process_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <unordered_set>

namespace deployd {
namespace {

// Whole file through read(2): procfs files report size 0, and cmdline may be megabytes.
// nullopt when the file cannot be opened or read (the process is gone, or not ours to read).
std::optional<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string data;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string ProcPath(std::string_view proc_root, pid_t pid, const char* file) {
  std::string path(proc_root);
  path += '/';
  path += std::to_string(pid);
  path += '/';
  path += file;
  return path;
}

}  // namespace

Result<ProcStat> ParseProcStat(std::string_view text) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Status::Error("malformed /proc stat: no (comm)");
  }
  ProcStat stat;
  std::string_view pid_text = text.substr(0, open);
  while (!pid_text.empty() && pid_text.back() == ' ') pid_text.remove_suffix(1);
  if (!ParseNumber(pid_text, stat.pid)) return Status::Error("malformed /proc stat: bad pid");
  stat.comm = std::string(text.substr(open + 1, close - open - 1));

  // Fields after comm, numbered as in proc(5): state is field 3.
  std::vector<std::string_view> fields;
  std::string_view rest = text.substr(close + 1);
  size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && (rest[pos] == ' ' || rest[pos] == '\n')) ++pos;
    size_t end = pos;
    while (end < rest.size() && rest[end] != ' ' && rest[end] != '\n') ++end;
    if (end > pos) fields.push_back(rest.substr(pos, end - pos));
    pos = end;
  }
  auto field = [&](int number) -> std::string_view {
    size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() ? fields[index] : std::string_view();
  };
  if (field(3).size() != 1) return Status::Error("malformed /proc stat: bad state (field 3)");
  stat.state = field(3)[0];
  if (!ParseNumber(field(4), stat.ppid)) return Status::Error("malformed /proc stat: field 4");
  if (!ParseNumber(field(5), stat.pgid)) return Status::Error("malformed /proc stat: field 5");
  if (!ParseNumber(field(6), stat.sid)) return Status::Error("malformed /proc stat: field 6");
  if (!ParseNumber(field(22), stat.start_time)) {
    return Status::Error("malformed /proc stat: field 22");
  }
  return stat;
}

std::vector<std::string> ParseCmdline(std::string_view raw) {
  std::vector<std::string> argv;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t end = raw.find('\0', pos);
    if (end == std::string_view::npos) end = raw.size();
    argv.emplace_back(raw.substr(pos, end - pos));
    pos = end + 1;
  }
  while (!argv.empty() && argv.back().empty()) argv.pop_back();
  return argv;
}

std::string ProcessInfo::CommandLine() const {
  if (argv.empty()) return "[" + stat.comm + "]";
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    line += arg;
  }
  return line;
}

std::string ProcessInfo::Title() const {
  if (argv.empty() || argv[0].empty()) return stat.comm;
  const std::string& title = argv[0];
  // "/usr/bin/python3" → "python3"; a title with spaces is free text that may contain '/'.
  if (title.find(' ') == std::string::npos) {
    size_t slash = title.rfind('/');
    if (slash != std::string::npos && slash + 1 < title.size()) return title.substr(slash + 1);
  }
  return title;
}

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u)); }

std::optional<ProcStat> ReadProcStat(pid_t pid, std::string_view proc_root) {
  auto text = ReadWholeFile(ProcPath(proc_root, pid, "stat"));
  if (!text) return std::nullopt;
  auto stat = ParseProcStat(*text);
  if (!stat.ok() || stat->pid != pid) return std::nullopt;
  return stat.value();
}

std::optional<ProcessInfo> ReadProcess(pid_t pid, std::string_view proc_root) {
  auto first = ReadWholeFile(ProcPath(proc_root, pid, "stat"));
  if (!first) return std::nullopt;
  auto stat = ParseProcStat(*first);
  if (!stat.ok() || stat->pid != pid) return std::nullopt;
  ProcessInfo info;
  info.stat = stat.value();
  auto cmdline = ReadWholeFile(ProcPath(proc_root, pid, "cmdline"));
  if (!cmdline) return std::nullopt;
  info.argv = ParseCmdline(*cmdline);
  // The pid may have been reused between the two reads: the command line would then belong to
  // another process. Reading stat again and comparing the start time detects it.
  auto second = ReadWholeFile(ProcPath(proc_root, pid, "stat"));
  if (!second) return std::nullopt;
  auto again = ParseProcStat(*second);
  if (!again.ok() || again->start_time != info.stat.start_time) return std::nullopt;
  info.stat = again.value();  // the newer state
  return info;
}

Result<ProcessTable> ProcessTable::Read(std::string_view proc_root) {
  std::string root(proc_root);
  DIR* dir = ::opendir(root.c_str());
  if (!dir) return Status::Error("cannot list " + root + ": " + std::strerror(errno));
  std::vector<pid_t> pids;
  while (dirent* entry = ::readdir(dir)) {
    pid_t pid = 0;
    if (ParseNumber(std::string_view(entry->d_name), pid) && pid > 0) pids.push_back(pid);
  }
  ::closedir(dir);
  std::sort(pids.begin(), pids.end());
  ProcessTable table;
  table.processes_.reserve(pids.size());
  for (pid_t pid : pids) {
    if (auto info = ReadProcess(pid, proc_root)) table.processes_.push_back(std::move(*info));
  }
  return table;
}

const ProcessInfo* ProcessTable::Find(pid_t pid) const {
  auto it = std::lower_bound(processes_.begin(), processes_.end(), pid,
                             [](const ProcessInfo& p, pid_t want) { return p.pid() < want; });
  return it != processes_.end() && it->pid() == pid ? &*it : nullptr;
}

std::vector<pid_t> ProcessTable::AncestorsOf(pid_t pid) const {
  std::vector<pid_t> chain;
  std::unordered_set<pid_t> seen{pid};
  const ProcessInfo* current = Find(pid);
  while (current && current->stat.ppid > 0 && seen.insert(current->stat.ppid).second) {
    chain.push_back(current->stat.ppid);
    current = Find(current->stat.ppid);
  }
  return chain;
}

}  // namespace deployd
