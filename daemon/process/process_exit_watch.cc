#include "process/process_exit_watch.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>

namespace deployd {

namespace asio = boost::asio;

struct ProcessExitWatch::Impl {
  explicit Impl(asio::any_io_executor ex) : pidfd(ex) {}
  asio::posix::stream_descriptor pidfd;
  bool cancelled = false;
};

ProcessExitWatch::ProcessExitWatch(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessExitWatch::~ProcessExitWatch() {
  impl_->cancelled = true;
  boost::system::error_code ignored;
  impl_->pidfd.close(ignored);
}

bool ProcessExitWatch::Signal(int sig) {
  if (!impl_->pidfd.is_open()) return false;
  return ::syscall(SYS_pidfd_send_signal, impl_->pidfd.native_handle(), sig, nullptr, 0) == 0;
}

Result<std::unique_ptr<ProcessExitWatch>> ProcessExitWatch::Open(asio::any_io_executor ex,
                                                                 const ProcessIdentity& who) {
  // The raw system call: glibc 2.36's <sys/pidfd.h> lacks extern "C" (build-facts §6).
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, who.pid, 0));
  if (fd < 0) {
    return Status::Error("cannot watch process " + std::to_string(who.pid) + ": " +
                         ::strerror(errno));
  }
  if (!who.IsAlive()) {
    ::close(fd);
    return Status::Error("process " + std::to_string(who.pid) + " is no longer the one started");
  }
  auto impl = std::make_shared<Impl>(ex);
  impl->pidfd.assign(fd);
  return std::unique_ptr<ProcessExitWatch>(new ProcessExitWatch(std::move(impl)));
}

void ProcessExitWatch::AsyncWait(std::function<void()> on_exit) {
  // A pidfd becomes readable when the process exits (before it is reaped).
  impl_->pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                          [impl = impl_, on_exit = std::move(on_exit)](boost::system::error_code) {
                            if (impl->cancelled) return;
                            impl->cancelled = true;
                            on_exit();
                          });
}

}  // namespace deployd
