#include "process/process_identity.h"

#include <fstream>
#include <iterator>
#include <sstream>

namespace deployd {

const std::string& CurrentBootId() {
  static const std::string boot_id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
  }();
  return boot_id;
}

namespace {

struct Stat {
  char state = '?';
  std::uint64_t start_time = 0;
};

std::optional<Stat> ReadStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "PID (comm) S ppid …": comm may hold spaces and parentheses, so fields are counted from
  // the last ')'. The state is field 3; the start time is field 22.
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  Stat result;
  std::string field;
  if (!(fields >> result.state)) return std::nullopt;
  for (int i = 4; i < 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  if (!(fields >> result.start_time)) return std::nullopt;
  return result;
}

}  // namespace

std::optional<std::uint64_t> ProcessStartTime(pid_t pid) {
  std::optional<Stat> stat = ReadStat(pid);
  if (!stat) return std::nullopt;
  return stat->start_time;
}

std::optional<ProcessIdentity> ProcessIdentity::Of(pid_t pid) {
  std::optional<std::uint64_t> start_time = ProcessStartTime(pid);
  if (!start_time) return std::nullopt;
  return ProcessIdentity{pid, *start_time, CurrentBootId()};
}

bool ProcessIdentity::IsAlive() const {
  if (pid <= 0 || boot_id != CurrentBootId()) return false;
  std::optional<Stat> now = ReadStat(pid);
  // A zombie has ended; only its parent's wait is missing.
  return now && now->start_time == start_time && now->state != 'Z' && now->state != 'X';
}

}  // namespace deployd
