#include "control/control_server.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <cstring>
#include <filesystem>
#include <optional>

#include "control/answer_streams.h"
#include "control/request_handlers.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;
using asio::local::stream_protocol;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// "alice (uid 1000)": who approved a step, for its record.
std::string PeerName(uid_t uid) {
  struct passwd* pw = ::getpwuid(uid);
  std::string id = "uid " + std::to_string(uid);
  return pw ? std::string(pw->pw_name) + " (" + id + ")" : id;
}

}  // namespace

struct ControlServer::Acceptor {
  explicit Acceptor(asio::io_context& io) : acceptor(io) {}
  stream_protocol::acceptor acceptor;
};

// One connection: its peer is checked, then each request line is answered in turn, by the
// handlers (request_handlers.h); a stream (answer_streams.h) is sent as its lines come and
// ends the connection.
class ControlServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ControlServer& server, stream_protocol::socket socket)
      : server_(server),
        context_{server.runs_, server.store_, ""},
        socket_(std::move(socket)),
        wake_(socket_.get_executor()) {}

  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
    wake_.cancel();
  }

  asio::awaitable<void> Serve() {
    auto self = shared_from_this();
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
        !server_.Authorized(cred.uid, cred.gid)) {
      spdlog::warn("refused a connection from uid {} (pid {}): not authorized", cred.uid, cred.pid);
      json::object refusal = ErrorAnswer("permission denied: uid " + std::to_string(cred.uid) +
                                         " may not control deployd (allowed: root, uid " +
                                         std::to_string(::getuid()) + " and the configured group)");
      refusal["code"] = "unauthorized";
      co_await Send(refusal);
      Close();
      co_return;
    }
    context_.peer = PeerName(cred.uid);
    std::string buffer;
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(
          socket_, asio::dynamic_buffer(buffer, kMaxRequestBytes), '\n', kTuple);
      if (ec == asio::error::not_found) {
        co_await Send(ErrorAnswer("request too large (the limit is " +
                                  std::to_string(kMaxRequestBytes) + " bytes)"));
        break;
      }
      if (ec) break;
      std::string line = buffer.substr(0, n - 1);
      buffer.erase(0, n);
      if (!co_await Handle(line)) break;
    }
    Close();
  }

 private:
  asio::awaitable<bool> Send(const json::object& o) {
    co_return co_await SendText(json::serialize(o));
  }

  asio::awaitable<bool> SendText(std::string line) {
    line += '\n';
    auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(line), kTuple);
    co_return !ec;
  }

  // Answers one request; false ends the connection.
  asio::awaitable<bool> Handle(const std::string& line) {
    Result<json::object> request = DecodeRequest(line);
    if (!request.ok()) co_return co_await Send(ErrorAnswer(request.status().message()));
    const json::object& req = request.value();
    const std::string op = RequestOp(req);
    if (op == "follow") co_return co_await SendStream(FollowRun(context_, req, Waker()));
    if (const json::value* f = req.if_contains("follow"); op == "logs" && f && *f == true)
      co_return co_await SendStream(FollowLog(context_, req, socket_.get_executor(), Waker()));
    if (op == "plan") {
      json::object answer = co_await HandlePlan(req);
      co_return co_await Send(answer);
    }
    if (op == "apply") {
      json::object answer = co_await HandleApply(context_, req);
      co_return co_await Send(answer);
    }
    co_return co_await Send(co_await AnswerOf(req));
  }

  // The answer, which may come later (a cancel waits until the run's processes are gone).
  asio::awaitable<json::object> AnswerOf(const json::object& request) {
    auto ex = co_await asio::this_coro::executor;
    auto answered = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
    auto answer = std::make_shared<std::optional<json::object>>();
    Answer(context_, request, [answered, answer](json::object a) {
      *answer = std::move(a);
      answered->cancel();
    });
    if (!*answer) co_await answered->async_wait(kTuple);
    co_return std::move(**answer);
  }

  // Ends the wait of SendStream() for the next line; safe to call once the session is gone.
  std::function<void()> Waker() {
    std::weak_ptr<Session> weak = shared_from_this();
    return [weak] {
      if (auto session = weak.lock()) session->wake_.cancel();
    };
  }

  // Sends a stream's lines as they come until its end line, or until the client goes away,
  // and ends the connection (false). A refusal is one answer like any other.
  asio::awaitable<bool> SendStream(StreamAnswer answer) {
    if (auto* refusal = std::get_if<json::object>(&answer)) co_return co_await Send(*refusal);
    AnswerStream& stream = *std::get<std::unique_ptr<AnswerStream>>(answer);
    bool open = true;
    bool ended = false;
    while (open && !ended) {
      std::deque<StreamLine> lines = stream.Take();
      while (!lines.empty()) {
        StreamLine next = std::move(lines.front());
        lines.pop_front();  // each line's memory goes as soon as it is sent
        ended = next.last;
        open = co_await SendText(std::move(next.text));
        if (ended || !open) break;
      }
      if (ended || !open) break;
      // A line that arrived while one was being sent had no wait to wake: look before waiting.
      if (stream.Ready()) continue;
      wake_.expires_at(asio::steady_timer::time_point::max());
      auto result = co_await (wake_.async_wait(kTuple) ||
                              socket_.async_wait(stream_protocol::socket::wait_read, kTuple));
      if (result.index() == 1 || !socket_.is_open()) open = false;
    }
    co_return false;
  }

  ControlServer& server_;
  RequestContext context_;  // peer: who is connected, for the records of what they did
  stream_protocol::socket socket_;
  asio::steady_timer wake_;
};

ControlServer::ControlServer(asio::io_context& io, RunManager& runs, RunStore& store,
                             ControlServerOptions options)
    : io_(io), runs_(runs), store_(store), options_(std::move(options)) {}

ControlServer::~ControlServer() = default;

bool ControlServer::Authorized(uid_t uid, gid_t gid) const {
  if (uid == 0 || uid == ::getuid()) return true;
  if (!options_.group) return false;
  if (gid == *options_.group) return true;
  // Supplementary groups of the peer's user.
  struct passwd* pw = ::getpwuid(uid);
  if (!pw) return false;
  int count = 64;
  std::vector<gid_t> groups(count);
  if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &count) < 0) {
    groups.resize(count);
    if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &count) < 0) return false;
  }
  groups.resize(count);
  return std::find(groups.begin(), groups.end(), *options_.group) != groups.end();
}

Status ControlServer::Listen() {
  const std::string& path = options_.socket_path;
  if (path.size() > 107) return Status::Error("socket path is too long (max 107): " + path);
  std::error_code fec;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, fec);

  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Status::Error(path + " exists and is not a socket; refusing to replace it");
    // A socket file is left behind by a daemon that was killed; one that answers is in use.
    stream_protocol::socket probe(io_);
    boost::system::error_code ec;
    probe.connect(stream_protocol::endpoint(path), ec);
    if (!ec) return Status::Error("another deployd is already listening on " + path);
    ::unlink(path.c_str());
  }
  acceptor_ = std::make_unique<Acceptor>(io_);
  boost::system::error_code ec;
  acceptor_->acceptor.open(stream_protocol(), ec);
  if (!ec) acceptor_->acceptor.bind(stream_protocol::endpoint(path), ec);
  if (!ec) acceptor_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("cannot listen on " + path + ": " + ec.message());
  ::fcntl(acceptor_->acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  if (::chmod(path.c_str(), 0660) < 0)
    return Status::Error("cannot chmod " + path + ": " + ::strerror(errno));
  if (options_.group && ::chown(path.c_str(), static_cast<uid_t>(-1), *options_.group) < 0)
    return Status::Error("cannot give " + path + " to its group: " + ::strerror(errno));
  Accept();
  return Status::Ok();
}

void ControlServer::Accept() {
  asio::co_spawn(
      io_,
      [this]() -> asio::awaitable<void> {
        for (;;) {
          auto [ec, socket] = co_await acceptor_->acceptor.async_accept(kTuple);
          if (ec == asio::error::operation_aborted || !acceptor_->acceptor.is_open()) co_return;
          if (ec) continue;
          ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
          auto session = std::make_shared<Session>(*this, std::move(socket));
          sessions_.insert(session);
          asio::co_spawn(io_, session->Serve(), [this, session](std::exception_ptr e) {
            if (e) {
              try {
                std::rethrow_exception(e);
              } catch (const std::exception& ex) {
                spdlog::warn("control connection ended: {}", ex.what());
              }
            }
            sessions_.erase(session);
          });
        }
      },
      asio::detached);
}

void ControlServer::Stop() {
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->acceptor.close(ec);
    ::unlink(options_.socket_path.c_str());
  }
  for (const auto& s : sessions_) s->Close();
}

}  // namespace deployd
