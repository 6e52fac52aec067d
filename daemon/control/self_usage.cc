#include "control/self_usage.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "process/process_identity.h"
#include "util/clock.h"

namespace deployd {

namespace {

// /proc/self/statm: the second field is the resident set, in pages.
std::optional<std::int64_t> ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return std::nullopt;
  long long size = 0, resident = 0;
  int read = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (read != 2) return std::nullopt;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// The entries of /proc/self/fd, less the one that lists them.
std::optional<std::int64_t> OpenFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  const std::string own = std::to_string(::dirfd(dir));
  std::int64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name != "." && name != ".." && name != own) ++count;
  }
  ::closedir(dir);
  return count;
}

// The boot's time, the "btime" line of /proc/stat (Unix time, whole seconds).
std::optional<double> BootTime() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return std::nullopt;
  char line[256];
  std::optional<double> boot;
  while (!boot && std::fgets(line, sizeof line, f)) {
    long long seconds = 0;
    if (std::sscanf(line, "btime %lld", &seconds) == 1) boot = static_cast<double>(seconds);
  }
  std::fclose(f);
  return boot;
}

// The boot's time plus field 22 of /proc/self/stat (clock ticks after boot), as Prometheus's
// own clients compute process_start_time_seconds: the same figure at every scrape.
std::optional<double> StartTime() {
  std::optional<std::uint64_t> ticks = ProcessStartTime(::getpid());
  std::optional<double> boot = BootTime();
  if (!ticks || !boot) return std::nullopt;
  return *boot + static_cast<double>(*ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

SelfUsage ReadSelfUsage() {
  SelfUsage usage;
  usage.resident_bytes = ResidentBytes();
  usage.open_fds = OpenFds();
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    usage.max_fds = static_cast<std::int64_t>(limit.rlim_cur);
  static const std::optional<double> start = StartTime();
  if (start) {
    usage.start_time_s = *start;
    usage.uptime_s = std::max(0.0, static_cast<double>(NowMs()) / 1000 - *start);
  }
  return usage;
}

}  // namespace deployd
