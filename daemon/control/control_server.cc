#include "control/control_server.h"

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
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <deque>
#include <filesystem>
#include <fstream>

#include "control/failure_report.h"
#include "control/plan_preview.h"
#include "deployd/protocol.h"
#include "util/log_follower.h"
#include "util/utf8_text.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;
using asio::local::stream_protocol;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::uintmax_t kMaxLogBytes = 1u << 20;  // per file, per answer: the newest MiB

json::object Error(const std::string& message) { return {{"ok", false}, {"error", message}}; }

json::object Ok() { return {{"ok", true}}; }

std::string ReadTail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(kMaxLogBytes)
                             ? size - static_cast<std::streamoff>(kMaxLogBytes)
                             : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (start > 0) text = "[… earlier output omitted …]\n" + text.substr(text.find('\n') + 1);
  return text;
}

// "alice (uid 1000)": who approved a step, for its record.
std::string PeerName(uid_t uid) {
  struct passwd* pw = ::getpwuid(uid);
  std::string id = "uid " + std::to_string(uid);
  return pw ? std::string(pw->pw_name) + " (" + id + ")" : id;
}

const json::string* StringField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

}  // namespace

struct ControlServer::Acceptor {
  explicit Acceptor(asio::io_context& io) : acceptor(io) {}
  stream_protocol::acceptor acceptor;
};

class ControlServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ControlServer& server, stream_protocol::socket socket)
      : server_(server), socket_(std::move(socket)), wake_(socket_.get_executor()) {}

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
      json::object refusal = Error("permission denied: uid " + std::to_string(cred.uid) +
                                   " may not control deployd (allowed: root, uid " +
                                   std::to_string(::getuid()) + " and the configured group)");
      refusal["code"] = "unauthorized";
      co_await Send(refusal);
      Close();
      co_return;
    }
    peer_ = PeerName(cred.uid);
    std::string buffer;
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(
          socket_, asio::dynamic_buffer(buffer, kMaxRequestBytes), '\n', kTuple);
      if (ec == asio::error::not_found) {
        co_await Send(Error("request too large (the limit is " + std::to_string(kMaxRequestBytes) +
                            " bytes)"));
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
    std::string line = json::serialize(o);
    line += '\n';
    auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(line), kTuple);
    co_return !ec;
  }

  // Answers one request; false ends the connection.
  asio::awaitable<bool> Handle(const std::string& line) {
    boost::system::error_code ec;
    json::value parsed = json::parse(line, ec);
    if (ec || !parsed.is_object()) co_return co_await Send(Error("bad request: not a JSON object"));
    const json::object& req = parsed.as_object();
    const json::value* v = req.if_contains("v");
    if (!v || !v->is_int64())
      co_return co_await Send(Error("bad request: missing protocol version \"v\""));
    if (v->as_int64() != kProtocolVersion)
      co_return co_await Send(Error("protocol version " + std::to_string(v->as_int64()) +
                                    " is not supported (deployd " + DEPLOYD_VERSION + " speaks " +
                                    std::to_string(kProtocolVersion) + ")"));
    const json::string* op = StringField(req, "op");
    if (!op) co_return co_await Send(Error("bad request: missing \"op\""));
    if (*op == "follow") co_return co_await Follow(req);
    if (const json::value* f = req.if_contains("follow"); *op == "logs" && f && *f == true)
      co_return co_await FollowLog(req);
    if (*op == "plan") {
      json::object answer = co_await PreviewPlan(req);
      co_return co_await Send(answer);
    }
    co_return co_await Send(Answer(std::string(*op), req));
  }

  json::object Answer(const std::string& op, const json::object& req) {
    RunManager& runs = server_.runs_;
    RunStore& store = server_.store_;
    const json::string* run = StringField(req, "run");
    const json::string* step = StringField(req, "step");
    if (op == "ping") {
      json::object o = Ok();
      o["version"] = DEPLOYD_VERSION;
      o["protocol"] = kProtocolVersion;
      return o;
    }
    if (op == "apply") {
      const json::string* text = StringField(req, "plan_text");
      if (!text) return Error("bad request: apply needs \"plan_text\"");
      const json::string* file = StringField(req, "plan_file");
      std::map<std::string, std::string> vars;
      if (const json::value* vv = req.if_contains("vars")) {
        if (!vv->is_object()) return Error("bad request: \"vars\" must be an object");
        for (const auto& [k, val] : vv->as_object()) {
          if (!val.is_string()) return Error("bad request: variable values must be strings");
          vars[std::string(k)] = std::string(val.as_string());
        }
      }
      ApplyResult r = runs.Apply(std::string(*text), file ? std::string(*file) : "plan", vars);
      if (!r.status.ok()) {
        json::object o = Error(r.status.message());
        if (!r.diagnostics.empty()) {
          json::array d;
          for (const auto& s : r.diagnostics) d.emplace_back(s);
          o["diagnostics"] = std::move(d);
        }
        return o;
      }
      json::object o = Ok();
      o["run"] = r.run_id;
      return o;
    }
    if (op == "runs") {
      Result<std::vector<RunRecord>> list = store.ListRuns(true);
      if (!list.ok()) return Error(list.status().message());
      json::array a;
      for (const auto& r : list.value()) a.push_back(RunToJson(r));
      json::object o = Ok();
      o["runs"] = std::move(a);
      return o;
    }
    if (op != "status" && op != "logs" && op != "cancel" && op != "retry" && op != "skip" &&
        op != "approve" && op != "pause" && op != "resume" && op != "why")
      return Error("bad request: unknown op '" + op + "'");
    if (!run) return Error("bad request: " + op + " needs \"run\"");
    if (op == "cancel") return StatusAnswer(runs.Cancel(std::string(*run)));
    if (op == "pause") return StatusAnswer(runs.Pause(std::string(*run)));
    if (op == "resume") return StatusAnswer(runs.Resume(std::string(*run)));
    if (op == "approve") {
      if (!step) return Error("bad request: approve needs \"step\"");
      return StatusAnswer(runs.Approve(std::string(*run), std::string(*step), peer_));
    }
    if (op == "retry")
      return StatusAnswer(runs.Retry(std::string(*run), step ? std::string(*step) : ""));
    if (op == "skip") {
      if (!step) return Error("bad request: skip needs \"step\"");
      return StatusAnswer(runs.Skip(std::string(*run), std::string(*step)));
    }
    Result<std::optional<RunRecord>> loaded = store.LoadRun(std::string(*run), true);
    if (!loaded.ok()) return Error(loaded.status().message());
    if (!loaded.value()) return Error("no run '" + std::string(*run) + "'");
    const RunRecord& record = *loaded.value();
    if (op == "status") {
      json::object o = Ok();
      json::object run_json = RunToJson(record);
      runs.AddProgress(run_json);
      o["run"] = std::move(run_json);
      return o;
    }
    if (op == "why") {
      Result<std::vector<EventRecord>> events = store.Events(record.id);
      if (!events.ok()) return Error(events.status().message());
      json::object o = Ok();
      o["why"] = FailureReport(record, events.value(), [&](const std::string& step) {
        return runs.LogPath(record.id, step);
      });
      return o;
    }
    // logs
    json::array logs;
    bool found = false;
    for (const StepRecord& s : record.steps) {
      if (step && s.id != *step) continue;
      found = true;
      std::string path = runs.LogPath(record.id, s.id);
      std::string text = ReadTail(path + ".1") + ReadTail(path);
      if (step || !text.empty() || s.attempts > 0)
        logs.push_back(json::object{{"step", s.id}, {"text", text}, {"path", path}});
    }
    if (!found) return Error("run " + record.id + " has no step '" + std::string(*step) + "'");
    json::object o = Ok();
    o["logs"] = std::move(logs);
    return o;
  }

  static json::object StatusAnswer(const Status& s) { return s.ok() ? Ok() : Error(s.message()); }

  // Streams a run's events until it ends (or the client goes away).
  asio::awaitable<bool> Follow(const json::object& req) {
    const json::string* run_field = StringField(req, "run");
    if (!run_field) co_return co_await Send(Error("bad request: follow needs \"run\""));
    std::string run_id(*run_field);
    RunStore& store = server_.store_;
    Result<std::optional<RunRecord>> loaded = store.LoadRun(run_id, true);
    if (!loaded.ok()) co_return co_await Send(Error(loaded.status().message()));
    if (!loaded.value()) co_return co_await Send(Error("no run '" + run_id + "'"));

    std::deque<json::object> queue;
    bool ended = IsTerminal(loaded.value()->state);
    json::object snapshot = RunToJson(*loaded.value());
    server_.runs_.AddProgress(snapshot);
    queue.push_back({{"ok", true}, {"type", "snapshot"}, {"run", std::move(snapshot)}});
    // What happened before the client asked, then what happens next: one thread, so no event
    // falls between the two.
    Result<std::vector<EventRecord>> past = store.Events(run_id);
    if (!past.ok()) co_return co_await Send(Error(past.status().message()));
    for (const EventRecord& e : past.value()) queue.push_back(EventToJson(run_id, e));
    std::uint64_t token = 0;
    if (!ended) {
      token = server_.runs_.Subscribe(
          run_id, [this, &queue, &store, run_id](const json::object& event) {
            queue.push_back(event);
            const json::value* kind = event.if_contains("kind");
            const json::value* state = event.if_contains("state");
            if (kind && *kind == "run.state" && state && state->is_string()) {
              auto s = ParseRunState(std::string(state->as_string()));
              if (s && IsTerminal(*s)) {
                Result<std::optional<RunRecord>> final_run = store.LoadRun(run_id, true);
                if (final_run.ok() && final_run.value())
                  queue.push_back({{"type", "end"}, {"run", RunToJson(*final_run.value())}});
              }
            }
            wake_.cancel();
          });
    } else {
      queue.push_back({{"type", "end"}, {"run", RunToJson(*loaded.value())}});
    }
    bool open = true;
    bool done = false;
    while (open && !done) {
      while (!queue.empty() && open) {
        json::object next = std::move(queue.front());
        queue.pop_front();
        const json::value* type = next.if_contains("type");
        done = type && *type == "end";
        open = co_await Send(next);
        if (done) break;
      }
      if (!open || done) break;
      // Wait for the next event, or for the client to hang up.
      wake_.expires_at(asio::steady_timer::time_point::max());
      auto result = co_await (wake_.async_wait(kTuple) ||
                              socket_.async_wait(stream_protocol::socket::wait_read, kTuple));
      if (result.index() == 1 || !socket_.is_open()) open = false;
    }
    if (token) server_.runs_.Unsubscribe(token);
    co_return false;  // a follow stream ends its connection
  }

  // Streams a step's output as it grows (`logs RUN STEP -f`) until the step has ended and the
  // processes of its actions have exited, or the client goes away: {"ok": true, "type":
  // "start", "run", "step", "path"}, then {"type": "data", "text"} as output arrives (first
  // the last MiB of what is there), then {"type": "end", "run", "step", "state"}.
  asio::awaitable<bool> FollowLog(const json::object& req) {
    const json::string* run_field = StringField(req, "run");
    const json::string* step_field = StringField(req, "step");
    if (!run_field || !step_field)
      co_return co_await Send(Error("bad request: following logs needs \"run\" and \"step\""));
    std::string run_id(*run_field);
    std::string step_id(*step_field);
    RunManager& runs = server_.runs_;
    Result<std::optional<RunRecord>> loaded = server_.store_.LoadRun(run_id, true);
    if (!loaded.ok()) co_return co_await Send(Error(loaded.status().message()));
    if (!loaded.value()) co_return co_await Send(Error("no run '" + run_id + "'"));
    std::optional<StepState> state;
    for (const StepRecord& s : loaded.value()->steps)
      if (s.id == step_id) state = s.state;
    if (!state) co_return co_await Send(Error("run " + run_id + " has no step '" + step_id + "'"));

    // Shared with callbacks that may outlive this coroutine (a posted exit notice).
    struct Stream {
      std::deque<json::object> queue;
      std::string partial;  // the first bytes of a character cut at the end of a piece
      std::string state;
      bool step_done = false;
      bool exited = false;
      std::shared_ptr<void> exit_watch;  // waiting for the step's processes; dropped with us
    };
    auto stream = std::make_shared<Stream>();
    stream->state = ToString(*state);
    std::weak_ptr<Session> weak = shared_from_this();
    auto wake = [weak] {
      if (auto session = weak.lock()) session->wake_.cancel();
    };
    auto step_ended = [&runs, stream, wake, run_id, step_id] {
      stream->step_done = true;
      std::weak_ptr<Stream> weak_stream = stream;
      stream->exit_watch = runs.WhenActionsExit(run_id, step_id, [weak_stream, wake] {
        if (auto s = weak_stream.lock()) {
          s->exited = true;
          wake();
        }
      });
    };
    auto on_data = [stream, wake](std::string_view data) {
      std::string text = stream->partial + std::string(data);
      size_t complete = CompleteUtf8Prefix(text);
      stream->partial = text.substr(complete);
      text.resize(complete);
      if (text.empty()) return;
      stream->queue.push_back({{"type", "data"}, {"text", ValidUtf8(text)}});
      wake();
    };
    std::string path = runs.LogPath(run_id, step_id);
    std::error_code size_error;
    std::uintmax_t size = std::filesystem::file_size(path, size_error);
    std::uint64_t start = !size_error && size > kMaxLogBytes ? size - kMaxLogBytes : 0;
    Result<std::unique_ptr<LogFollower>> follower =
        LogFollower::Start(socket_.get_executor(), path, start, on_data);
    if (!follower.ok()) co_return co_await Send(Error(follower.status().message()));
    std::uint64_t token =
        runs.Subscribe(run_id, [stream, wake, step_ended, step_id](const json::object& event) {
          const json::string* kind = StringField(event, "kind");
          const json::string* step = StringField(event, "step");
          const json::string* entered = StringField(event, "state");
          if (!kind || *kind != "step.state" || !step || *step != step_id || !entered) return;
          stream->state = std::string(*entered);
          auto s = ParseStepState(stream->state);
          if (s && IsTerminal(*s) && !stream->step_done) step_ended();
          wake();
        });
    if (IsTerminal(*state)) step_ended();

    // Named, not braced inside co_await: GCC 12 miscompiles that (notes/build-facts.md).
    json::object start_line{
        {"ok", true}, {"type", "start"}, {"run", run_id}, {"step", step_id}, {"path", path}};
    bool open = co_await Send(start_line);
    while (open) {
      if (stream->step_done && stream->exited) {
        // The writers are gone: their last bytes may not have been announced yet.
        follower.value()->CatchUp();
        if (!stream->partial.empty())
          stream->queue.push_back({{"type", "data"}, {"text", ValidUtf8(stream->partial)}});
        stream->queue.push_back(
            {{"type", "end"}, {"run", run_id}, {"step", step_id}, {"state", stream->state}});
        stream->step_done = false;  // ends below, once the queue is sent
      }
      bool ended = false;
      while (!stream->queue.empty() && open) {
        json::object next = std::move(stream->queue.front());
        stream->queue.pop_front();
        ended = next.at("type") == "end";
        open = co_await Send(next);
      }
      if (ended || !open) break;
      // A wake-up while a line was being sent had no wait to cancel: look before waiting.
      if (!stream->queue.empty() || (stream->step_done && stream->exited)) continue;
      wake_.expires_at(asio::steady_timer::time_point::max());
      auto result = co_await (wake_.async_wait(kTuple) ||
                              socket_.async_wait(stream_protocol::socket::wait_read, kTuple));
      if (result.index() == 1 || !socket_.is_open()) open = false;
    }
    runs.Unsubscribe(token);
    follower.value()->Stop();
    co_return false;  // a stream ends its connection
  }

  ControlServer& server_;
  std::string peer_;  // who is connected, for the records of what they did
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
