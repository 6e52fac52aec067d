// What every deployctl verb shares: one connection to deployd (newline-delimited JSON, see
// include/deployd/protocol.h), the way a verb ends with a message and an exit code, and the
// reading of answer fields. Only deployctl uses this; it lives in the core library so that
// each verb can have a file of its own (ctl_*.cc).
//
// A verb ends early by throwing Exit (through Die); main() catches it once, prints
// "deployctl: error: MESSAGE" and exits with its code. Single-threaded, blocking I/O.
#ifndef DEPLOYD_CTL_CTL_CLIENT_H_
#define DEPLOYD_CTL_CTL_CLIENT_H_

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ctl/ssh_transport.h"

namespace deployd::ctl {

// A failure that ends deployctl with a message and an exit code.
struct Exit {
  int code;
  std::string message;
  // deployd went away (the connection ended, or nothing listens yet): it may come back.
  bool lost = false;
  std::string why;  // `message` in a few words, for the lines of WithReconnect()
};

[[noreturn]] void Die(int code, const std::string& message);

// What a message that deployd cannot be reached ends with, by default.
inline constexpr const char* kStartHint =
    "is it running? start it with `deployd` or `systemctl start deployd`; --socket or "
    "DEPLOYD_SOCKET choose another socket";

// A socket to reach deployd at, and what to say when nothing answers there: what to do, and
// where else deployctl looked (socket_discovery.h).
struct SocketChoice {
  std::string path;
  std::string hint = kStartHint;
};

// One connection to the daemon. Lines in, lines out.
class Client {
 public:
  // Connects, or dies with kExitUnreachable and a hint. With a RemoteHost() (--host), to the
  // deployd there through ssh (ssh_transport.h) instead, its errors naming the layer.
  explicit Client(const SocketChoice& socket);
  // Closes the connection and connects again, as the constructor does; what was read and not
  // taken is dropped.
  void Reconnect();
  explicit Client(const std::string& path) : Client(SocketChoice{path}) {}
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void Send(boost::json::object request);
  // The next line; dies when the connection ends.
  boost::json::object Receive();
  // The next line, or nothing when none arrives within `timeout`.
  std::optional<boost::json::object> Receive(std::chrono::milliseconds timeout);
  // The next line if it can be had without waiting (what one read gives now).
  std::optional<boost::json::object> ReceiveReady();

  // Sends a request and returns its answer; a refusal ends deployctl with exit code 2 (3 when
  // this user may not talk to deployd at all).
  boost::json::object Call(boost::json::object request);
  [[noreturn]] static void Refused(const boost::json::object& answer);

  // The connection, for a poll(2) that waits on it among others (host_session.h).
  int fd() const { return fd_; }
  // Where deployd was reached: the socket's path, or the ssh address of --host.
  const std::string& where() const { return path_; }
  // Waits before trying to reach deployd again: at most `wait`, and on this host only until
  // the socket's directory changes (a deployd that comes back binds its socket anew), so a
  // restart is noticed at once. For --host nothing can be watched: `wait` is waited out.
  void AwaitReturn(std::chrono::milliseconds wait) const;

 private:
  void Connect();
  void Close();
  std::optional<boost::json::object> TakeLine();
  void ConnectOverSsh(const SshTarget& host);
  // The connection has ended: dies saying why (`local` when there is no ssh to ask).
  [[noreturn]] void Broken(const std::string& local);
  SocketChoice socket_;
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  std::unique_ptr<SshChannel> ssh_;
  bool connected_ = false;  // deployd answered through ssh_
};

// How long a stream that lost deployd (it stopped, restarted, crashed) goes on trying to
// connect again, and the longest wait between two tries.
inline constexpr std::chrono::minutes kReconnectFor{5};
inline constexpr std::chrono::seconds kMostBetweenTries{8};

// Runs `attempt` on `client`. When deployd goes away on the way, says so on stderr, connects
// again after 1 s, 2 s, 4 s … (at most kMostBetweenTries apart, sooner when the socket appears:
// AwaitReturn; each try said on stderr) and,
// once it answers, runs `attempt` again with `again` true: a stream then asks to go on where
// it stopped. Gives up (exit 3) once deployd has been away for kReconnectFor.
int WithReconnect(Client& client, const std::function<int(bool again)>& attempt);

// Fields of an answer: "" / 0 when absent or of another type.
std::string Str(const boost::json::object& o, std::string_view key);
std::int64_t Int(const boost::json::object& o, std::string_view key);

// Local wall-clock time "2026-11-30 17:01:51".
std::string Clock(std::int64_t ms);
// How long before `now_ms` `ms` was: "12s ago", "4m ago", "3h ago", "2d ago" ("in 5s" for a
// time to come: another host's clock).
std::string Ago(std::int64_t ms, std::int64_t now_ms);
// A time as people read it in deployctl's output: "2026-11-30 17:01:51 (4m ago)".
std::string When(std::int64_t ms, std::int64_t now_ms);

// 0 when the run (by its state's name) succeeded or is still going; 1 when it failed or was
// cancelled.
int ExitFor(const std::string& run_state);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_CTL_CLIENT_H_
