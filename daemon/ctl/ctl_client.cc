#include "ctl/ctl_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "deployd/protocol.h"

namespace deployd::ctl {

namespace json = boost::json;

void Die(int code, const std::string& message) { throw Exit{code, message}; }

Client::Client(const std::string& path) : path_(path) {
  if (const SshTarget* host = RemoteHost()) {
    ConnectOverSsh(*host);
    return;
  }
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) Die(kExitUsage, "socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
    Die(kExitUnreachable, "cannot reach deployd at " + path + ": " + std::strerror(errno) +
                              " (is it running? start it with `deployd` or `systemctl start "
                              "deployd`; --socket or DEPLOYD_SOCKET choose another socket)");
}

Client::~Client() {
  if (!ssh_) ::close(fd_);
}

// deployd's ping answer proves every layer: ssh connected, the host's deployctl ran, its
// socket answered and served this user. A refusal on the way names the layer that refused.
void Client::ConnectOverSsh(const SshTarget& host) {
  path_ = host.Url();
  Result<std::unique_ptr<SshChannel>> channel = SshChannel::Start(host, RemoteSocket(), SshMode{});
  if (!channel.ok()) Die(kExitUnreachable, channel.status().message());
  ssh_ = std::move(channel.value());
  fd_ = ssh_->fd();
  Send({{"op", "ping"}});
  json::object answer = Receive();
  if (!answer["ok"].as_bool()) {
    if (std::optional<std::string> why = Refusal(host, answer)) Die(kExitUnreachable, *why);
    Refused(answer);
  }
  connected_ = true;
}

void Client::Broken(const std::string& local) {
  if (ssh_) Die(kExitUnreachable, ssh_->Explain(connected_));
  Die(kExitUnreachable, local);
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

int ExitFor(const std::string& run_state) {
  return run_state == "failed" || run_state == "cancelled" ? kExitRunFailed : kExitOk;
}

}  // namespace deployd::ctl
