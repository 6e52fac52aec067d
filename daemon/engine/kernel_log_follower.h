// KernelLogFollower: the kernel's messages beside a step whose fail_on has patterns meant for
// them (FailPattern::kernel: the vllm set's GPU faults, "NVRM: Xid (PCI:…): 79, …" and "… has
// fallen off the bus"). The NVIDIA driver writes those to the kernel's ring buffer, so they are
// never in the server's output nor in its unit's journal; journald reads the ring buffer into
// the journal's kernel transport, and deployd follows that:
//   journalctl -k -f --since=@FIRE -o json
// from the attempt's fire (the time committed with the attempt, so that a restart of deployd
// reads again from there and misses no fault said while it was down) until the step ends. Each
// entry's message is handed on as journald delivers it: event-driven, no polling of dmesg.
//
// Where journalctl cannot start, the step runs without (a warning says why). Whatever it prints
// that is not an entry (no journal here; "Hint: … Users in groups 'adm', 'systemd-journal' can
// see all messages" for a deployd that may not read the system journal) is logged as a
// warning, once, so that a fault that cannot be seen is not silently so.
//
// One thread: the io_context's.
#ifndef DEPLOYD_ENGINE_KERNEL_LOG_FOLLOWER_H_
#define DEPLOYD_ENGINE_KERNEL_LOG_FOLLOWER_H_

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

class KernelLogFollower {
 public:
  using LineHandler = std::function<void(std::string_view line)>;

  struct Options {
    std::int64_t fired_at_ms = 0;  // the attempt's fire (Unix time)
    std::string run_id;            // names the run and step in the warnings
    std::string step_id;
  };

  // Fails when journalctl cannot be started.
  static Result<std::unique_ptr<KernelLogFollower>> Start(boost::asio::any_io_executor ex,
                                                          const Options& options,
                                                          LineHandler on_line);
  ~KernelLogFollower();

  // Stops journalctl (SIGTERM, SIGKILL after a second); lines already read may still come.
  // Also when the follower is destroyed.
  void Stop();

  struct State;  // journalctl and what it said; kernel_log_follower.cc

 private:
  explicit KernelLogFollower(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;  // shared with journalctl's handlers, which may outlive us
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_KERNEL_LOG_FOLLOWER_H_
