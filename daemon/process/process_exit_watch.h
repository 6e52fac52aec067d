// ProcessExitWatch: learns the moment a process exits, whether or not it is deployd's child,
// through a pidfd (pidfd_open(2)) waited on by the io_context — no polling. Used for the
// supervisors of background actions that an earlier deployd started.
//
// It tells only *that* the process has exited; a process that is not our child cannot be
// reaped by us, so its exit status comes from elsewhere (the supervisor's status file).
// One thread: everything runs on the executor given.
#ifndef DEPLOYD_PROCESS_PROCESS_EXIT_WATCH_H_
#define DEPLOYD_PROCESS_PROCESS_EXIT_WATCH_H_

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>

#include "deployd/status.h"
#include "process/process_identity.h"

namespace deployd {

class ProcessExitWatch {
 public:
  // Opens a pidfd on `who.pid` and then checks that it is still `who` (after opening, so that
  // the pid cannot pass to another process in between). Fails when `who` is gone.
  static Result<std::unique_ptr<ProcessExitWatch>> Open(boost::asio::any_io_executor ex,
                                                        const ProcessIdentity& who);
  ~ProcessExitWatch();  // cancels: on_exit is not called after destruction
  ProcessExitWatch(const ProcessExitWatch&) = delete;
  ProcessExitWatch& operator=(const ProcessExitWatch&) = delete;

  // `on_exit` is called once, when the process has exited (at once if it already has).
  void AsyncWait(std::function<void()> on_exit);
  // Sends `sig` through the pidfd: it reaches this very process or, once it has exited,
  // nobody. False when it has exited.
  bool Signal(int sig);

  struct Impl;

 private:
  explicit ProcessExitWatch(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_PROCESS_EXIT_WATCH_H_
