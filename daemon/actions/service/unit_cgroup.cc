#include "actions/service/unit_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>

#include "process/process_table.h"

namespace deployd {
namespace {

struct CgroupMount {
  std::string root;         // the cgroup the mount shows at its mount point
  std::string mount_point;  // where it is mounted
  bool v2 = false;          // cgroup2; else the v1 hierarchy named systemd
};

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3') {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// The non-empty pieces of `text` between `separator`s.
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find(separator, pos), text.size());
    if (end > pos) pieces.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return pieces;
}

bool HasOption(std::string_view options, std::string_view wanted) {
  for (std::string_view option : Split(options, ','))
    if (option == wanted) return true;
  return false;
}

// "id parent major:minor root mount-point options [optional…] - fstype source super-options"
std::optional<CgroupMount> ParseCgroupMount(std::string_view line) {
  std::vector<std::string_view> f = Split(line, ' ');
  size_t dash = 6;
  while (dash < f.size() && f[dash] != "-") ++dash;
  if (dash + 3 >= f.size()) return std::nullopt;
  std::string_view fstype = f[dash + 1];
  bool v2 = fstype == "cgroup2";
  if (!v2 && !(fstype == "cgroup" && HasOption(f[dash + 3], "name=systemd"))) return std::nullopt;
  return CgroupMount{Unescape(f[3]), Unescape(f[4]), v2};
}

// `cgroup` seen through `mount`: nullopt when it lies outside the mount's root.
std::optional<std::string> Through(const CgroupMount& mount, const std::string& cgroup) {
  if (mount.root == "/") return mount.mount_point + cgroup;
  if (cgroup == mount.root) return mount.mount_point;
  if (cgroup.starts_with(mount.root) && cgroup[mount.root.size()] == '/')
    return mount.mount_point + cgroup.substr(mount.root.size());
  return std::nullopt;
}

std::string Errno(int error) { return ::strerror(error); }

// The whole file into `text`; 0, or the errno of the failure.
int ReadAll(const std::string& path, std::string& text) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buffer[16384];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    int error = n < 0 ? errno : 0;
    if (n <= 0) {
      ::close(fd);
      return error;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

Result<std::string> CgroupDirectory(std::string_view mountinfo, const std::string& control_group) {
  std::vector<CgroupMount> mounts;
  for (std::string_view line : Split(mountinfo, '\n'))
    if (auto mount = ParseCgroupMount(line)) mounts.push_back(*mount);
  if (mounts.empty())
    return Status::Error(
        "no cgroup2 or name=systemd cgroup hierarchy is mounted "
        "(/proc/self/mountinfo)");
  // cgroup2 first: the hierarchy of a v2 host, and on a hybrid one the same tree of units.
  for (bool v2 : {true, false}) {
    for (const CgroupMount& mount : mounts) {
      if (mount.v2 != v2) continue;
      if (std::optional<std::string> dir = Through(mount, control_group)) return *dir;
    }
  }
  std::string shown;
  for (const CgroupMount& mount : mounts) {
    shown += (shown.empty() ? "" : ", ") + std::string(mount.v2 ? "cgroup2" : "name=systemd") +
             " at " + mount.mount_point + " shows " + mount.root;
  }
  return Status::Error("the cgroup " + control_group + " is outside every cgroup mount (" + shown +
                       ")");
}

Result<std::vector<pid_t>> ReadCgroupProcs(const std::string& dir) {
  const std::string path = dir + "/cgroup.procs";
  std::string text;
  if (int error = ReadAll(path, text); error == ENOENT) {
    // Gone, as systemd removes an emptied cgroup; unless its parent is missing too, which
    // says the hierarchy is not where the unit's cgroup lives.
    struct stat parent;
    std::string up = dir.substr(0, dir.rfind('/'));
    if (!up.empty() && ::stat(up.c_str(), &parent) == 0 && S_ISDIR(parent.st_mode))
      return std::vector<pid_t>{};
    return Status::Error("cannot read " + path + ": " + Errno(error) + " (nor is " + up +
                         " there)");
  } else if (error) {
    return Status::Error("cannot read " + path + ": " + Errno(error));
  }
  std::vector<pid_t> pids;
  for (std::string_view line : Split(text, '\n')) {
    pid_t pid = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (ec != std::errc() || pid <= 0) continue;
    // cgroup v2 lists no zombies; v1 and a stale list (the stand-in's) may.
    auto stat = ReadProcStat(pid);
    if (stat && stat->state != 'Z' && stat->state != 'X') pids.push_back(pid);
  }
  return pids;
}

Result<std::vector<pid_t>> UnitCgroupProcs(const std::string& control_group) {
  if (control_group.empty()) return std::vector<pid_t>{};
  if (const char* root = std::getenv("DEPLOYD_CGROUP_ROOT"); root && *root)
    return ReadCgroupProcs(root + control_group);
  std::string mountinfo;
  if (int error = ReadAll("/proc/self/mountinfo", mountinfo))
    return Status::Error("cannot read /proc/self/mountinfo: " + Errno(error));
  Result<std::string> dir = CgroupDirectory(mountinfo, control_group);
  if (!dir.ok()) return dir.status();
  return ReadCgroupProcs(*dir);
}

}  // namespace deployd
