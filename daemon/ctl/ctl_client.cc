#include "ctl/ctl_client.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "deployd/protocol.h"

namespace deployd::ctl {

namespace json = boost::json;

void Die(int code, const std::string& message) { throw Exit{code, message, false, message}; }

namespace {

[[noreturn]] void Lost(const std::string& message, const std::string& why) {
  throw Exit{kExitUnreachable, message, true, why};
}

}  // namespace

Client::Client(const SocketChoice& socket) : socket_(socket), path_(socket.path) { Connect(); }

Client::~Client() { Close(); }

void Client::Close() {
  if (ssh_) {
    ssh_.reset();  // closes its end and ends ssh
  } else if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = -1;
  buffer_.clear();
  connected_ = false;
}

void Client::Reconnect() {
  Close();
  path_ = socket_.path;
  Connect();
}

void Client::Connect() {
  if (const SshTarget* host = RemoteHost()) {
    ConnectOverSsh(*host);
    return;
  }
  const std::string& path = socket_.path;
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) Die(kExitUsage, "socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return;
  int error = errno;
  std::string message =
      "cannot reach deployd at " + path + ": " + std::strerror(error) + " (" + socket_.hint + ")";
  // Nothing there, or nothing listening: what a deployd that is restarting looks like.
  if (error == ENOENT || error == ECONNREFUSED) Lost(message, std::strerror(error));
  Die(kExitUnreachable, message);
}

// deployd's ping answer proves every layer: ssh connected, the host's deployctl ran, its
// socket answered and served this user. A refusal on the way names the layer that refused.
void Client::ConnectOverSsh(const SshTarget& host) {
  path_ = host.Url();
  Result<std::unique_ptr<SshChannel>> channel = SshChannel::Start(host, RemoteSocket(), SshMode{});
  if (!channel.ok()) Lost(channel.status().message(), channel.status().message());
  ssh_ = std::move(channel.value());
  fd_ = ssh_->fd();
  Send({{"op", "ping"}});
  json::object answer = Receive();
  if (!answer["ok"].as_bool()) {
    if (std::optional<std::string> why = Refusal(host, answer)) {
      // Refused for this user: waiting will not change that.
      if (answer["code"] == "unauthorized") Die(kExitUnreachable, *why);
      Lost(*why, *why);
    }
    Refused(answer);
  }
  connected_ = true;
}

void Client::Broken(const std::string& local) {
  if (ssh_) {
    std::string why = ssh_->Explain(connected_);
    Lost(why, why);
  }
  Lost(local, local);
}

void Client::Send(json::object request) {
  request["v"] = kProtocolVersion;
  std::string line = json::serialize(request) + "\n";
  for (size_t off = 0; off < line.size();) {
    // MSG_NOSIGNAL: a connection deployd has closed is an error to report, not a SIGPIPE.
    ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // deployd answers a peer it does not serve and closes at once, without reading the
      // request: when that answer is there, it explains the broken connection.
      std::optional<json::object> answer;
      try {
        answer = Receive();
      } catch (const Exit&) {
      }
      if (answer && answer->contains("ok") && !(*answer)["ok"].as_bool()) Refused(*answer);
      Broken("lost the connection to deployd at " + path_);
    }
    off += static_cast<size_t>(n);
  }
}

std::optional<json::object> Client::TakeLine() {
  auto nl = buffer_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) Die(kExitUnreachable, "deployd sent an unreadable answer");
  return v.as_object();
}

json::object Client::Receive() {
  for (;;) {
    if (std::optional<json::object> line = TakeLine()) return *line;
    char chunk[65536];
    ssize_t n = ::read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Broken("deployd closed the connection");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::optional<json::object> Client::Receive(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::optional<json::object> line = TakeLine()) return line;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{fd_, POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[65536];
    ssize_t n = ::read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Broken("deployd closed the connection");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::optional<json::object> Client::ReceiveReady() {
  if (std::optional<json::object> line = TakeLine()) return line;
  pollfd pfd{fd_, POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return std::nullopt;
  char chunk[65536];
  ssize_t n = ::read(fd_, chunk, sizeof(chunk));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return std::nullopt;
  if (n <= 0) Broken("deployd closed the connection");
  buffer_.append(chunk, static_cast<size_t>(n));
  return TakeLine();
}

json::object Client::Call(json::object request) {
  Send(std::move(request));
  json::object answer = Receive();
  if (!answer["ok"].as_bool()) Refused(answer);
  return answer;
}

void Client::Refused(const json::object& answer) {
  const json::value* code = answer.if_contains("code");
  const json::value* error = answer.if_contains("error");
  Die(code && *code == "unauthorized" ? kExitUnreachable : kExitUsage,
      error && error->is_string() ? std::string(error->as_string()) : "deployd refused");
}

std::string Str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

std::int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_int64() ? v->as_int64() : 0;
}

std::string Clock(std::int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Ago(std::int64_t ms, std::int64_t now_ms) {
  std::int64_t s = (now_ms - ms) / 1000;
  bool future = s < 0;
  if (future) s = -s;
  std::string n = s < 60      ? std::to_string(s) + "s"
                  : s < 3600  ? std::to_string(s / 60) + "m"
                  : s < 86400 ? std::to_string(s / 3600) + "h"
                              : std::to_string(s / 86400) + "d";
  return future ? "in " + n : n + " ago";
}

std::string When(std::int64_t ms, std::int64_t now_ms) {
  return Clock(ms) + " (" + Ago(ms, now_ms) + ")";
}

void Client::AwaitReturn(std::chrono::milliseconds wait) const {
  int watch = -1;
  if (size_t slash = path_.rfind('/'); !path_.starts_with("ssh://") && slash != std::string::npos) {
    watch = ::inotify_init1(IN_CLOEXEC);
    if (watch >= 0 && ::inotify_add_watch(watch, path_.substr(0, slash + 1).c_str(),
                                          IN_CREATE | IN_MOVED_TO | IN_ATTRIB) < 0) {
      ::close(watch);
      watch = -1;
    }
  }
  pollfd p{watch, POLLIN, 0};  // fd -1: poll ignores it, and waits out `wait`
  (void)::poll(&p, 1, static_cast<int>(wait.count()));
  if (watch >= 0) ::close(watch);
}

int WithReconnect(Client& client, const std::function<int(bool again)>& attempt) {
  for (bool again = false;; again = true) {
    try {
      return attempt(again);
    } catch (const Exit& e) {
      if (!e.lost) throw;
      auto away_since = std::chrono::steady_clock::now();
      std::chrono::seconds wait{1};
      std::cerr << "deployctl: lost deployd at " << client.where() << " (" << e.why
                << "); connecting again in " << wait.count() << "s" << std::endl;
      for (;;) {
        client.AwaitReturn(wait);
        try {
          client.Reconnect();
          break;
        } catch (const Exit& failed) {
          if (!failed.lost) throw;
          auto away = std::chrono::steady_clock::now() - away_since;
          if (away >= kReconnectFor)
            Die(kExitUnreachable,
                "deployd did not come back within " +
                    std::to_string(
                        std::chrono::duration_cast<std::chrono::minutes>(kReconnectFor).count()) +
                    " minutes: " + failed.message);
          wait = std::min(wait * 2, kMostBetweenTries);
          std::cerr << "deployctl: still no deployd at " << client.where() << " (" << failed.why
                    << "); trying again in " << wait.count() << "s" << std::endl;
        }
      }
      std::cerr << "deployctl: reconnected to deployd at " << client.where()
                << "; going on where it stopped" << std::endl;
    }
  }
}

int ExitFor(const std::string& run_state) {
  return run_state == "failed" || run_state == "cancelled" ? kExitRunFailed : kExitOk;
}

}  // namespace deployd::ctl
