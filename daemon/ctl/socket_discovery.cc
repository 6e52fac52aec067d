#include "ctl/socket_discovery.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "deployd/protocol.h"
#include "plan/daemon_config.h"

namespace deployd::ctl {

namespace {

// The `socket:` of the configuration file, "" when it has none or there is no file to read.
std::string ConfiguredSocket(const std::string& config_flag, std::string& file) {
  file = config_flag;
  // The system's file may be kept from some users: then it is not theirs to go by.
  if (file.empty() && ::access(kSystemConfigPath, R_OK) == 0) file = kSystemConfigPath;
  if (file.empty()) return "";
  if (std::ifstream in(file); !in)
    Die(kExitUsage, "cannot read deployd's configuration " + file + ": " + std::strerror(errno));
  DaemonConfig config;
  std::vector<Diagnostic> errors;
  LoadDaemonConfig(file, config, errors);
  for (const Diagnostic& d : errors) std::cerr << d.Format() << "\n";
  if (!errors.empty())
    Die(kExitUsage, "deployd's configuration " + file +
                        " is invalid, so its socket is not known (--socket names one)");
  return config.socket_path;
}

// 0 when a connection to `path` can be made now, else connect(2)'s errno.
int ConnectError(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return ENAMETOOLONG;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int error = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  ::close(fd);
  return error;
}

}  // namespace

SocketChoice DiscoverSocket(const std::string& socket_flag, const std::string& config_flag) {
  if (!socket_flag.empty()) return {socket_flag, kStartHint};
  if (const char* env = std::getenv("DEPLOYD_SOCKET"); env && *env) return {env, kStartHint};
  std::string file;
  if (std::string configured = ConfiguredSocket(config_flag, file); !configured.empty())
    return {configured, "the socket of " + file +
                            "; is deployd running? `systemctl start "
                            "deployd` starts it"};
  std::string user = UserSocketPath();
  if (::geteuid() == 0) return {kSystemSocketPath, kStartHint};
  int system_error = ConnectError(kSystemSocketPath);
  if (system_error == 0) return {kSystemSocketPath, kStartHint};
  if (Status s = CheckUserSocketDir(user, /*create=*/false); !s.ok())
    Die(kExitUnreachable, s.message());
  std::string hint = kStartHint;
  // The system daemon is there but not for this user: the likelier thing to fix.
  if (system_error != ENOENT)
    hint =
        std::string("no deployd of this user's; the system's socket ") + kSystemSocketPath +
        " is there but " +
        (system_error == EACCES ? "may not be used by this user (members of deployd's "
                                  "group may)"
                                : std::string("does not answer: ") + std::strerror(system_error));
  return {user, hint};
}

}  // namespace deployd::ctl
