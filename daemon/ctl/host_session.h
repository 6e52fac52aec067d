// HostSession: one host of a rollout, reached over ssh (ssh_transport.h) and followed until
// the run the rollout gave it has ended — through lost connections.
//
// Each connection first asks the host for the run of the host's key ("status" by key); only
// when there is none, and only in kApply mode, does it `apply` (with the key, so that even an
// apply sent twice makes one run). Then it follows the run. A connection that breaks makes
// the host *unreachable*: its deployd goes on by itself, and the session connects again after
// 1 s, 2 s, 4 s … (at most 30 s apart), and reattaches — nothing is applied again. Only when the
// host has been unreachable for the spec's `unreachable_after` is it called failed. A refusal
// that waiting will not cure (permission denied, no deployctl there, a deployd too old for
// keys, a plan the host refuses) fails it at once.
//
// RunSessions() is the loop: poll(2) over every session's connection, woken by what arrives or
// by the next timer a session asked for; no thread, no sleep.
#ifndef DEPLOYD_CTL_HOST_SESSION_H_
#define DEPLOYD_CTL_HOST_SESSION_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ctl/rollout_spec.h"
#include "ctl/ssh_transport.h"
#include "ctl/watch_view.h"

namespace deployd::ctl {

class HostSession {
 public:
  enum class Mode {
    kApply,  // create the host's run when it has none, and follow it (a batch)
    kFind,   // follow the run if there is one (the verdict)
    kAwait,  // wait for the run to appear, then follow it (watch)
    kLook,   // one look at the run, no following, no second try (why, retry)
  };
  // kUnfinished: kLook found the run still going.
  enum class Outcome { kPending, kSucceeded, kFailed, kNotStarted, kUnfinished };
  // What the session says about itself as it goes, one line without the host's name:
  // "started run kimi-4", "unreachable for 40s (ssh: …); next try in 8s", …
  using Report = std::function<void(const HostSession&, const std::string& line)>;

  HostSession(const RolloutSpec& spec, const RolloutHost& host, Mode mode, Report report);
  // Connect without a ControlMaster (a rollout's step: one connection per host, its own).
  void Unshared() { share_ = false; }
  ~HostSession();

  const RolloutHost& host() const { return host_; }
  bool done() const { return outcome_ != Outcome::kPending; }
  bool started() const { return started_; }
  Outcome outcome() const { return outcome_; }
  // Why it failed (the run's reason, the refusal, "unreachable for 10m: …").
  const std::string& failure() const { return failure_; }
  const std::string& run_id() const { return run_id_; }
  const RunView& view() const { return view_; }
  // When it was last found unreachable; 0 while it is reachable.
  std::int64_t unreachable_since_ms() const { return unreachable_since_ms_; }
  const std::string& last_error() const { return last_error_; }

  // The loop's side.
  int fd() const;
  bool wants_write() const { return !out_.empty(); }
  std::int64_t wake_at_ms() const;  // 0: no timer
  void Start(std::int64_t now_ms);
  void OnReadable(std::int64_t now_ms);
  void OnWritable(std::int64_t now_ms);
  void OnTimer(std::int64_t now_ms);

 private:
  enum class Phase { kWaiting, kAsking, kApplying, kFollowing };
  void Connect(std::int64_t now_ms);
  void Send(boost::json::object request);
  void OnLine(const boost::json::object& line, std::int64_t now_ms);
  void OnRun(const std::string& run_id, const std::string& how, std::int64_t now_ms);
  void Looked(const WireRun& run);
  // Closes the connection; the next one in `wait_ms`.
  void Retry(std::int64_t wait_ms, std::int64_t now_ms);
  // The connection ended: reconnect later, or give up (`permanent`, or unreachable too long).
  void Lost(const std::string& why, bool permanent, std::int64_t now_ms);
  void Finish(Outcome outcome, const std::string& failure);
  void Say(const std::string& line) { report_(*this, line); }

  const RolloutSpec& spec_;
  const RolloutHost& host_;
  Mode mode_;
  Report report_;
  std::unique_ptr<SshChannel> channel_;
  std::string in_, out_;
  Phase phase_ = Phase::kWaiting;
  bool started_ = false;
  bool share_ = true;
  bool answered_ = false;  // deployd answered on this connection
  Outcome outcome_ = Outcome::kPending;
  std::string failure_, run_id_, last_error_;
  RunView view_;
  std::int64_t retry_at_ms_ = 0;
  std::int64_t backoff_ms_ = 1000;
  std::int64_t unreachable_since_ms_ = 0;
};

// Runs `sessions` (starting those not started, also ones added on the way) until each is done,
// or until `stop()` (checked after every wake-up). `extra`
// (a descriptor, or -1) and `on_extra` watch one more connection (watch's, to the coordinator);
// `tick_ms` > 0 calls `on_tick` that often (a redraw).
struct SessionLoop {
  std::vector<HostSession*> sessions;
  std::function<bool()> stop;
  int extra = -1;
  std::function<void()> on_extra;
  int tick_ms = 0;
  std::function<void()> on_tick;
};
void RunSessions(SessionLoop& loop);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_HOST_SESSION_H_
