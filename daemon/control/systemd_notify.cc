#include "control/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace deployd {

SystemdNotifier::SystemdNotifier(boost::asio::any_io_executor ex) : timer_(ex) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path && *path && (path[0] == '/' || path[0] == '@')) {
    socket_path_ = path;
    if (socket_path_[0] == '@') socket_path_[0] = '\0';
  }
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  bool for_us = !pid || std::atoll(pid) == ::getpid();
  if (usec && for_us && std::atoll(usec) > 0)
    watchdog_ = std::chrono::microseconds(std::atoll(usec));
  if (enabled()) fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

SystemdNotifier::~SystemdNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

Status SystemdNotifier::Notify(std::string_view message) {
  if (!enabled()) return Status::Ok();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path))
    return Status::Error("NOTIFY_SOCKET path is too long");
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  if (::sendto(fd_, message.data(), message.size(), MSG_NOSIGNAL,
               reinterpret_cast<sockaddr*>(&addr), len) < 0)
    return Status::Error(std::string("cannot notify systemd: ") + std::strerror(errno));
  return Status::Ok();
}

void SystemdNotifier::StartWatchdog() {
  if (!enabled() || !watchdog_) return;
  Ping();
}

void SystemdNotifier::Ping() {
  (void)Notify("WATCHDOG=1");
  timer_.expires_after(*watchdog_ / 2);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Ping();
  });
}

}  // namespace deployd
