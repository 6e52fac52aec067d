#include "checks/network_probes.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "checks/check_text.h"
#include "checks/http_probe.h"
#include "checks/json_expect.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

struct Holder {
  long pid = 0;
  std::string comm;
};

// The socket inode of a listener on `port` (any address), from /proc/net/tcp{,6}.
std::optional<std::string> FindListenerInode(int port) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;  // 0A: LISTEN
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) return inode;
    }
  }
  return std::nullopt;
}

// Which process holds socket `inode` open; only processes this daemon may inspect are seen.
std::optional<Holder> FindSocketHolder(const std::string& inode) {
  std::string wanted = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  if (!proc) return std::nullopt;
  std::optional<Holder> found;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string fd_dir = std::string("/proc/") + entry->d_name + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;
    while (dirent* fd = ::readdir(fds)) {
      char link[64];
      std::string fd_path = fd_dir + "/" + fd->d_name;
      ssize_t n = ::readlink(fd_path.c_str(), link, sizeof link - 1);
      if (n <= 0 || wanted != std::string_view(link, n)) continue;
      Holder holder;
      holder.pid = std::atol(entry->d_name);
      std::ifstream comm(std::string("/proc/") + entry->d_name + "/comm");
      std::getline(comm, holder.comm);
      found = holder;
      break;
    }
    ::closedir(fds);
    if (found) break;
  }
  ::closedir(proc);
  return found;
}

CheckOutcome PortInUse(const Check& check, json::object evidence) {
  evidence["error"] = HostPort(BindHost(check), check.port) + " is in use";
  std::string detail = "in use";
  if (std::optional<std::string> inode = FindListenerInode(check.port)) {
    if (std::optional<Holder> holder = FindSocketHolder(*inode)) {
      evidence["pid"] = holder->pid;
      evidence["comm"] = holder->comm;
      detail += " by pid " + std::to_string(holder->pid) + " (" + holder->comm + ")";
    }
  }
  return MakeOutcome(check, false, detail, std::move(evidence));
}

}  // namespace

asio::awaitable<CheckOutcome> ProbeHttp(const Check& check) {
  json::object evidence = CheckEvidence(check);
  HttpRequest request;
  request.method = check.method;
  request.url = check.url;
  request.body = check.body;
  request.timeout = check.timeout;
  Result<HttpResponse> response = co_await HttpProbe(request);
  if (!response.ok()) {
    evidence["error"] = response.status().message();
    co_return MakeOutcome(check, false, response.status().message(), std::move(evidence));
  }
  evidence["status_code"] = response->status;
  evidence["body_excerpt"] = Utf8Excerpt(response->body, kBodyExcerptBytes);
  if (response->body_too_large) evidence["body_too_large"] = true;
  std::string status = "status " + std::to_string(response->status);
  if (response->status != check.status)
    co_return MakeOutcome(check, false, status + " (expected " + std::to_string(check.status) + ")",
                          std::move(evidence));
  if (!check.body_contains.empty() && response->body.find(check.body_contains) == std::string::npos)
    co_return MakeOutcome(check, false,
                          status + ", body does not contain '" + check.body_contains + "'" +
                              (response->body_too_large ? " in its first 4MiB" : ""),
                          std::move(evidence));
  if (std::optional<std::string> unmet = FirstUnmetExpectation(response->body, check.json)) {
    evidence["error"] = *unmet;
    co_return MakeOutcome(check, false, status + ", " + *unmet, std::move(evidence));
  }
  if (!check.json.empty())
    status += ", " + std::to_string(check.json.size()) +
              (check.json.size() == 1 ? " json expectation met" : " json expectations met");
  co_return MakeOutcome(check, true, status, std::move(evidence));
}

asio::awaitable<CheckOutcome> ProbeTcp(const Check& check) {
  json::object evidence = CheckEvidence(check);
  Status connected = co_await TcpProbe(TcpHost(check), check.port, check.timeout);
  if (!connected.ok()) {
    evidence["error"] = connected.message();
    co_return MakeOutcome(check, false, connected.message(), std::move(evidence));
  }
  co_return MakeOutcome(check, true, "connected", std::move(evidence));
}

CheckOutcome ProbePortFree(const Check& check) {
  json::object evidence = CheckEvidence(check);
  std::string host = BindHost(check);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_storage address{};
  socklen_t address_size = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(check.port));
    address_size = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(check.port));
    address_size = sizeof *v6;
  } else {
    std::string message = "'" + host + "' is not an IP address";
    evidence["error"] = message;
    return MakeOutcome(check, false, message, std::move(evidence));
  }

  int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::string message = std::string("cannot create a socket: ") + std::strerror(errno);
    evidence["error"] = message;
    return MakeOutcome(check, false, message, std::move(evidence));
  }
  // SO_REUSEADDR: a port whose last connection lingers in TIME_WAIT is free for a server.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), address_size);
  int error = errno;
  ::close(fd);
  if (bound == 0) return MakeOutcome(check, true, "free", std::move(evidence));
  if (error == EADDRINUSE) return PortInUse(check, std::move(evidence));
  if (error == EACCES) {
    // A privileged port and an unprivileged daemon: bind cannot tell, the listener table can.
    evidence["method"] = "/proc/net/tcp";
    if (FindListenerInode(check.port)) return PortInUse(check, std::move(evidence));
    return MakeOutcome(check, true, "free", std::move(evidence));
  }
  std::string message = std::string("cannot bind: ") + std::strerror(error);
  evidence["error"] = message;
  return MakeOutcome(check, false, message, std::move(evidence));
}

}  // namespace deployd
