// OrphanStop: stops processes that no supervisor owns any more — what is left of an attempt
// whose supervisor died without recording its end — from the daemon's thread, without
// blocking: SIGTERM (and SIGCONT) to each, SIGKILL to the survivors after `grace`, then the
// wait until all are gone or kKillWait has passed. Every signal and every wait goes through a
// pidfd opened after checking the process's start time, so a reused pid is never touched.
//
// One thread: the executor's. `done` is called once (never from Start), with what is still
// there at the end (stuck, state D).
#ifndef DEPLOYD_PROCESS_ORPHAN_STOP_H_
#define DEPLOYD_PROCESS_ORPHAN_STOP_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "deployd/plan.h"
#include "process/process_exit_watch.h"
#include "process/process_table.h"

namespace deployd {

class OrphanStop : public std::enable_shared_from_this<OrphanStop> {
 public:
  using Done = std::function<void(std::vector<ProcStat> stuck)>;

  static std::shared_ptr<OrphanStop> Start(boost::asio::any_io_executor ex,
                                           std::vector<ProcStat> processes, Duration grace,
                                           Done done);
  // `done` is not called from now on; signals already sent stay sent.
  void Cancel();

 private:
  struct Target {
    ProcStat process;
    std::unique_ptr<ProcessExitWatch> watch;
    bool gone = false;
  };
  explicit OrphanStop(boost::asio::any_io_executor ex);
  void Signal(int sig);
  void OnGone(size_t index);
  void Finish();

  std::vector<Target> targets_;
  size_t left_ = 0;
  boost::asio::steady_timer timer_;
  Done done_;
  bool killed_ = false;
};

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_ORPHAN_STOP_H_
