// The notify protocol against a real datagram socket bound by the test, as systemd binds it.
#include "control/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

using namespace deployd;

namespace {

// A bound datagram socket; `abstract` puts it in the abstract namespace ("@name").
struct Receiver {
  explicit Receiver(bool abstract) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string name = "deployd-notify-test-" + std::to_string(::getpid());
    socklen_t len;
    if (abstract) {
      addr.sun_path[0] = '\0';
      std::memcpy(addr.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      env = "@" + name;
    } else {
      path = "/tmp/" + name + ".sock";
      ::unlink(path.c_str());
      std::memcpy(addr.sun_path, path.data(), path.size() + 1);
      len = sizeof(addr);
      env = path;
    }
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  }
  ~Receiver() {
    ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
  }
  std::string Next() {
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
  }
  int fd;
  std::string path;
  std::string env;
};

}  // namespace

TEST_CASE("notify: messages reach the socket named by NOTIFY_SOCKET") {
  for (bool abstract : {false, true}) {
    Receiver receiver(abstract);
    ::setenv("NOTIFY_SOCKET", receiver.env.c_str(), 1);
    ::unsetenv("WATCHDOG_USEC");
    boost::asio::io_context io;
    SystemdNotifier notifier(io.get_executor());
    REQUIRE(notifier.enabled());
    CHECK(notifier.Notify("READY=1\nSTATUS=listening").ok());
    CHECK(receiver.Next() == "READY=1\nSTATUS=listening");
    CHECK(notifier.Notify("STOPPING=1").ok());
    CHECK(receiver.Next() == "STOPPING=1");
  }
  ::unsetenv("NOTIFY_SOCKET");
}

TEST_CASE("notify: the watchdog pings at half its interval") {
  Receiver receiver(false);
  ::setenv("NOTIFY_SOCKET", receiver.env.c_str(), 1);
  ::setenv("WATCHDOG_USEC", "40000", 1);
  ::unsetenv("WATCHDOG_PID");
  boost::asio::io_context io;
  SystemdNotifier notifier(io.get_executor());
  REQUIRE(notifier.watchdog_interval() == std::chrono::microseconds(40000));
  notifier.StartWatchdog();
  io.run_for(std::chrono::milliseconds(70));  // pings at 0, 20, 40, 60 ms
  int pings = 0;
  timeval tv{0, 1000};
  ::setsockopt(receiver.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (receiver.Next() == "WATCHDOG=1") ++pings;
  CHECK(pings >= 2);
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
}

TEST_CASE("notify: without NOTIFY_SOCKET nothing is sent and nothing fails") {
  ::unsetenv("NOTIFY_SOCKET");
  boost::asio::io_context io;
  SystemdNotifier notifier(io.get_executor());
  CHECK_FALSE(notifier.enabled());
  CHECK(notifier.Notify("READY=1").ok());
}

TEST_CASE("notify: a watchdog meant for another process is ignored") {
  ::setenv("NOTIFY_SOCKET", "/tmp/unused.sock", 1);
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);
  boost::asio::io_context io;
  SystemdNotifier notifier(io.get_executor());
  CHECK_FALSE(notifier.watchdog_interval().has_value());
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
}
