#include "ctl/host_session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>

#include "ctl/ctl_client.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "protocol/run_wire.h"
#include "util/clock.h"
#include "util/units.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

constexpr std::int64_t kFirstBackoffMs = 1000;
constexpr std::int64_t kMaxBackoffMs = 30'000;
// How often watch asks a host of a batch that has begun whether its run is there yet.
constexpr std::int64_t kAwaitMs = 1000;

std::string For(std::int64_t ms) { return FormatElapsed(ms); }

bool StartsWith(const std::string& s, std::string_view prefix) { return s.starts_with(prefix); }

}  // namespace

HostSession::HostSession(const RolloutSpec& spec, const RolloutHost& host, Mode mode, Report report)
    : spec_(spec), host_(host), mode_(mode), report_(std::move(report)) {}

HostSession::~HostSession() = default;

int HostSession::fd() const { return channel_ ? channel_->fd() : -1; }

std::int64_t HostSession::wake_at_ms() const {
  return !done() && phase_ == Phase::kWaiting ? retry_at_ms_ : 0;
}

void HostSession::Start(std::int64_t now_ms) {
  started_ = true;
  Connect(now_ms);
}

void HostSession::OnTimer(std::int64_t now_ms) {
  if (!done() && phase_ == Phase::kWaiting && now_ms >= retry_at_ms_) Connect(now_ms);
}

void HostSession::Connect(std::int64_t now_ms) {
  Result<SshTarget> target = ParseSshUrl(host_.address);
  if (!target.ok()) return Finish(Outcome::kFailed, target.status().message());
  Result<std::unique_ptr<SshChannel>> channel =
      SshChannel::Start(target.value(), "", SshMode{.batch = true, .share = share_});
  if (!channel.ok()) return Lost(channel.status().message(), true, now_ms);
  channel_ = std::move(channel.value());
  ::fcntl(channel_->fd(), F_SETFL, ::fcntl(channel_->fd(), F_GETFL) | O_NONBLOCK);
  answered_ = false;
  phase_ = Phase::kAsking;
  Send({{"op", "status"}, {"key", spec_.HostKey(host_.name)}});
}

void HostSession::Send(json::object request) {
  request["v"] = kProtocolVersion;
  out_ += json::serialize(request) + "\n";
  OnWritable(0);
}

void HostSession::OnWritable(std::int64_t) {
  while (channel_ && !out_.empty()) {
    ssize_t n = ::send(channel_->fd(), out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // full (EAGAIN), or broken: the read side finds out why
    out_.erase(0, static_cast<size_t>(n));
  }
}

void HostSession::OnReadable(std::int64_t now_ms) {
  if (!channel_) return;
  char chunk[65536];
  ssize_t n = ::read(channel_->fd(), chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    std::string why = channel_->Explain(answered_);
    std::optional<int> code = channel_->exit_code();
    // No deployctl there (127, 126), or one too old for dial-stdio (2): waiting will not help.
    return Lost(why, code && (*code == 127 || *code == 126 || *code == 2), now_ms);
  }
  in_.append(chunk, static_cast<size_t>(n));
  size_t nl;
  while (!done() && channel_ && (nl = in_.find('\n')) != std::string::npos) {
    std::string text = in_.substr(0, nl);
    in_.erase(0, nl + 1);
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) return Lost("deployd sent an unreadable line", false, now_ms);
    OnLine(v.as_object(), now_ms);
  }
}

void HostSession::OnLine(const json::object& line, std::int64_t now_ms) {
  if (IsRefusal(line)) {
    const SshTarget target = ParseSshUrl(host_.address).value();
    if (std::optional<std::string> why = Refusal(target, line)) {
      // deployd not running there may be a restart; permission denied will not change.
      return Lost(*why, Str(line, "code") == "unauthorized", now_ms);
    }
  }
  if (!answered_) {
    answered_ = true;
    if (unreachable_since_ms_) Say("reachable again after " + For(now_ms - unreachable_since_ms_));
    unreachable_since_ms_ = 0;
    backoff_ms_ = kFirstBackoffMs;
  }
  std::string error = IsRefusal(line) ? Str(line, "error") : "";
  switch (phase_) {
    case Phase::kAsking:
      if (StartsWith(error, "no run has key")) {
        if (mode_ == Mode::kAwait) return Retry(kAwaitMs, now_ms);
        if (mode_ != Mode::kApply) return Finish(Outcome::kNotStarted, "");
        phase_ = Phase::kApplying;
        json::object vars;
        for (const auto& [k, v] : host_.vars) vars[k] = v;
        return Send({{"op", "apply"},
                     {"plan_text", spec_.plan_text},
                     {"plan_file", spec_.plan_file},
                     {"vars", std::move(vars)},
                     {"key", spec_.HostKey(host_.name)}});
      }
      if (StartsWith(error, "bad request: status needs"))
        return Finish(Outcome::kFailed,
                      "deployd on " + host_.address +
                          " is older than rollouts (it knows no idempotency keys): upgrade it");
      if (!error.empty()) return Finish(Outcome::kFailed, "deployd refused: " + error);
      if (mode_ == Mode::kLook) return Looked(DecodeRun(line.at("run").as_object()));
      return OnRun(Str(line.at("run").as_object(), "id"),
                   !run_id_.empty()        ? "following run {} again"
                   : mode_ == Mode::kAwait ? "following run {}"
                                           : "found run {}, which this rollout started before",
                   now_ms);
    case Phase::kApplying: {
      if (!error.empty()) {
        if (const json::value* d = line.if_contains("diagnostics"); d && d->is_array())
          for (const json::value& diag : d->as_array())
            if (diag.is_string()) error += "\n  " + std::string(diag.as_string());
        return Finish(Outcome::kFailed, "apply refused: " + error);
      }
      const json::value* existing = line.if_contains("existing");
      return OnRun(Str(line, "run"),
                   existing && existing->is_bool() && existing->as_bool()
                       ? "found run {}, which this rollout started before"
                       : "started run {}",
                   now_ms);
    }
    case Phase::kFollowing: {
      if (!error.empty())
        return Finish(Outcome::kFailed, "cannot follow run " + run_id_ + ": " + error);
      std::string type = LineType(line);
      if (type == "snapshot") {
        view_ = RunViewOf(LineRun(line));
        return;
      }
      ApplyFollowLine(view_, line);
      if (type == "event") {
        WireEvent e = DecodeEvent(line);
        if (e.kind == "step.state" && e.state != "verifying" && e.state != "pending")
          Say("step " + e.step + " " + e.state + (e.detail.empty() ? "" : ": " + e.detail));
      }
      if (!view_.ended) return;
      std::int64_t took = view_.finished_at_ms - view_.created_at_ms;
      if (view_.state == "succeeded") return Finish(Outcome::kSucceeded, "");
      return Finish(Outcome::kFailed, "run " + run_id_ + " " + view_.state + " after " +
                                          FormatElapsed(took) +
                                          (view_.reason.empty() ? "" : ": " + view_.reason));
    }
    case Phase::kWaiting:
      return;
  }
}

void HostSession::OnRun(const std::string& run_id, const std::string& how, std::int64_t) {
  run_id_ = run_id;
  std::string said = how;
  said.replace(said.find("{}"), 2, run_id);
  Say(said);
  phase_ = Phase::kFollowing;
  Send({{"op", "follow"}, {"run", run_id}});
}

void HostSession::Looked(const WireRun& run) {
  run_id_ = run.id;
  view_ = RunViewOf(run);
  if (run.state == "succeeded") return Finish(Outcome::kSucceeded, "");
  if (run.state == "failed" || run.state == "cancelled")
    return Finish(Outcome::kFailed, "run " + run.id + " " + run.state +
                                        (run.reason.empty() ? "" : ": " + run.reason));
  Finish(Outcome::kUnfinished, "");
}

void HostSession::Retry(std::int64_t wait_ms, std::int64_t now_ms) {
  channel_.reset();
  in_.clear();
  out_.clear();
  phase_ = Phase::kWaiting;
  retry_at_ms_ = now_ms + wait_ms;
}

void HostSession::Lost(const std::string& why, bool permanent, std::int64_t now_ms) {
  Retry(0, now_ms);
  last_error_ = why;
  if (permanent || mode_ == Mode::kLook) return Finish(Outcome::kFailed, why);
  if (!unreachable_since_ms_) unreachable_since_ms_ = now_ms;
  std::int64_t down = now_ms - unreachable_since_ms_;
  std::int64_t left = spec_.unreachable_after_ms - down;
  if (left <= 0) return Finish(Outcome::kFailed, "unreachable for " + For(down) + ": " + why);
  std::int64_t wait = std::min(backoff_ms_, left);
  Retry(wait, now_ms);
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  Say(std::string(down ? "unreachable for " + For(down) : "unreachable") + " (" + why +
      "); next try in " + For(wait));
}

void HostSession::Finish(Outcome outcome, const std::string& failure) {
  outcome_ = outcome;
  failure_ = failure;
  channel_.reset();
  out_.clear();
  switch (outcome) {
    case Outcome::kSucceeded:
      Say("succeeded after " + FormatElapsed(view_.finished_at_ms - view_.created_at_ms));
      break;
    case Outcome::kFailed:
      Say("failed: " + failure);
      break;
    case Outcome::kNotStarted:
      Say("not started");
      break;
    case Outcome::kPending:
    case Outcome::kUnfinished:
      break;
  }
}

void RunSessions(SessionLoop& loop) {
  std::int64_t now = NowMs();
  std::int64_t next_tick = loop.tick_ms > 0 ? now + loop.tick_ms : 0;
  for (;;) {
    for (HostSession* s : loop.sessions)
      if (!s->started()) s->Start(NowMs());
    bool all_done = std::all_of(loop.sessions.begin(), loop.sessions.end(),
                                [](const HostSession* s) { return s->done(); });
    if (loop.stop ? loop.stop() : all_done) return;
    std::vector<pollfd> fds;
    std::vector<HostSession*> owners;
    for (HostSession* s : loop.sessions) {
      if (s->fd() < 0) continue;
      fds.push_back({s->fd(), static_cast<short>(POLLIN | (s->wants_write() ? POLLOUT : 0)), 0});
      owners.push_back(s);
    }
    if (loop.extra >= 0) fds.push_back({loop.extra, POLLIN, 0});
    std::int64_t wake = next_tick;
    for (HostSession* s : loop.sessions)
      if (std::int64_t at = s->wake_at_ms(); at && (!wake || at < wake)) wake = at;
    now = NowMs();
    int timeout = wake ? static_cast<int>(std::max<std::int64_t>(0, wake - now)) : -1;
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    now = NowMs();
    for (size_t i = 0; i < owners.size(); ++i) {
      if (fds[i].revents & POLLOUT) owners[i]->OnWritable(now);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) owners[i]->OnReadable(now);
    }
    if (loop.extra >= 0 && fds.back().revents) loop.on_extra();
    for (HostSession* s : loop.sessions)
      if (std::int64_t at = s->wake_at_ms(); at && at <= now) s->OnTimer(now);
    if (next_tick && now >= next_tick) {
      next_tick = now + loop.tick_ms;
      loop.on_tick();
    }
  }
}

}  // namespace deployd::ctl
