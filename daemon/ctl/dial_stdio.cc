#include "ctl/dial_stdio.h"

#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "deployd/protocol.h"
#include "protocol/answer.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string UserName() {
  if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return "uid " + std::to_string(::getuid());
}

int Refuse(const std::string& code, const std::string& message) {
  json::object refusal = ErrorAnswer(message);
  refusal["code"] = code;
  std::string line = json::serialize(refusal) + "\n";
  WriteAll(STDOUT_FILENO, line.data(), line.size());
  std::cerr << "deployctl: error: " << message << "\n";
  return kExitUnreachable;
}

int Connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof(addr.sun_path)) {
    if (fd >= 0) ::close(fd);
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

int DialStdio(const std::string& socket_path) {
  // A client that has gone away is the end of the relay, not a signal.
  ::signal(SIGPIPE, SIG_IGN);
  int sock = Connect(socket_path);
  if (sock < 0) {
    int e = errno;
    if (e == EACCES || e == EPERM)
      return Refuse("unauthorized",
                    UserName() + " may not use " + socket_path + ": " + std::strerror(e));
    return Refuse("unreachable", "cannot reach deployd at " + socket_path + ": " +
                                     std::strerror(e) +
                                     " (is it running? `systemctl start deployd`)");
  }
  bool stdin_open = true;
  char buffer[65536];
  for (;;) {
    pollfd fds[2] = {{sock, POLLIN, 0},
                     {STDIN_FILENO, static_cast<short>(stdin_open ? POLLIN : 0), 0}};
    if (::poll(fds, stdin_open ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      return kExitUnreachable;
    }
    if (fds[0].revents) {
      ssize_t n = ::read(sock, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return kExitOk;  // deployd closed the connection
      if (!WriteAll(STDOUT_FILENO, buffer, static_cast<size_t>(n))) return kExitOk;
    }
    if (stdin_open && fds[1].revents) {
      ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // The client has said everything; deployd may still answer it.
        ::shutdown(sock, SHUT_WR);
        stdin_open = false;
        continue;
      }
      if (!WriteAll(sock, buffer, static_cast<size_t>(n))) return kExitOk;
    }
  }
}

}  // namespace deployd::ctl
