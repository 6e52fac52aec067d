// SelfUsage: what deployd's metrics say of deployd's own process, read from /proc now: its
// resident memory, its open file descriptors and their limit, and how long it has run (from
// its start time in /proc, so that nothing has to be remembered from the start). A figure
// /proc does not give is nullopt. Blocking, but only a few small reads.
#ifndef DEPLOYD_CONTROL_SELF_USAGE_H_
#define DEPLOYD_CONTROL_SELF_USAGE_H_

#include <cstdint>
#include <optional>

namespace deployd {

struct SelfUsage {
  std::optional<std::int64_t> resident_bytes;
  std::optional<std::int64_t> open_fds;
  std::optional<std::int64_t> max_fds;  // RLIMIT_NOFILE, the soft limit
  std::optional<double> uptime_s;
  std::optional<double> start_time_s;  // Unix time
};

SelfUsage ReadSelfUsage();

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_SELF_USAGE_H_
