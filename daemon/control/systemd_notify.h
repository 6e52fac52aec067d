// SystemdNotifier: systemd's readiness protocol without libsystemd — one datagram per message
// to the socket named by $NOTIFY_SOCKET ("READY=1", "STATUS=…", "WATCHDOG=1", "STOPPING=1").
// Outside systemd ($NOTIFY_SOCKET unset) every call does nothing.
#ifndef DEPLOYD_CONTROL_SYSTEMD_NOTIFY_H_
#define DEPLOYD_CONTROL_SYSTEMD_NOTIFY_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

class SystemdNotifier {
 public:
  // Reads $NOTIFY_SOCKET and $WATCHDOG_USEC (honouring $WATCHDOG_PID).
  explicit SystemdNotifier(boost::asio::any_io_executor ex);
  ~SystemdNotifier();

  bool enabled() const { return !socket_path_.empty(); }
  // Sends one message, e.g. "READY=1\nSTATUS=listening". Errors are returned, not thrown.
  Status Notify(std::string_view message);
  // Sends WATCHDOG=1 now and then every half of the watchdog interval, while the io_context
  // runs — so a daemon whose loop is stuck stops pinging and systemd restarts it.
  void StartWatchdog();
  std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_; }

 private:
  void Ping();
  std::string socket_path_;  // '\0'-prefixed for the abstract namespace
  std::optional<std::chrono::microseconds> watchdog_;
  boost::asio::steady_timer timer_;
  int fd_ = -1;
};

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_SYSTEMD_NOTIFY_H_
