// JournalFollower: the unit's journal beside a `service` step that starts it, so that fail_on
// also meets the server's own lines: a server that dies in its first seconds is caught from what
// it said. The unit's lines go to the step's log like the action's.
//
// Which lines are the unit's: those journaled from the step's fire on (the time committed with
// the attempt, so that a restart of deployd reads them again from there and misses nothing said
// while it was down), of any invocation but the one that came before the fire — the old
// server's last words during a restart are not the new one's. Each entry is judged by its
// invocation (_SYSTEMD_INVOCATION_ID, or INVOCATION_ID for systemd's own lines) and by the
// process that wrote it (a line of the old invocation's main process may carry the new
// invocation's id: util/journal_entry.h), never by its text or by where systemd's
// "Started …" falls: with Type=exec a server's first lines often come before it. Without blocking
// (no systemctl), in two steps:
//   journalctl -u UNIT --until=@FIRE -n 50 -o json     which invocation came last before the fire
//   journalctl -u UNIT -f --since=@FIRE -o json        followed, each entry judged as it comes
// When the action found the unit already running and left it (nothing to do), the invocation
// before the fire is the unit's own: Arm() counts it, once the action succeeded, unless another
// one has appeared. A follower started for a re-verify after a restart of deployd reads the
// unit's latest invocation first to decide the same.
//
// One thread: the io_context's.
#ifndef DEPLOYD_ENGINE_JOURNAL_FOLLOWER_H_
#define DEPLOYD_ENGINE_JOURNAL_FOLLOWER_H_

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

class JournalFollower {
 public:
  using LineHandler = std::function<void(std::string_view line)>;

  struct Options {
    std::string unit;
    std::int64_t fired_at_ms = 0;  // the attempt's fire (Unix time)
    bool recovering = false;       // a re-verify after a restart of deployd: the action is done
    // Recovering: lines journaled up to then are in the step's log already (its last change):
    // they meet fail_on again but are not logged twice.
    std::int64_t logged_until_ms = 0;
    std::string log_path;  // the step's log
    std::uint64_t log_cap_bytes = 64ull << 20;
    std::string run_id;  // names the run in the warning logged when journalctl ends on its own
  };

  // Fails when journalctl cannot be started.
  static Result<std::unique_ptr<JournalFollower>> Start(boost::asio::any_io_executor ex,
                                                        const Options& options,
                                                        LineHandler on_line);
  ~JournalFollower();

  // The action succeeded: if no other invocation has appeared since the fire, the one before it
  // is the unit's (the action left a running unit alone) and its lines count from now on.
  void Arm();
  // Stops journalctl (SIGTERM, SIGKILL after a second); lines already read may still come.
  // Also when the follower is destroyed.
  void Stop();

  struct State;  // the invocations seen and the journalctl running now; journal_follower.cc

 private:
  explicit JournalFollower(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;  // shared with journalctl's handlers, which may outlive us
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_JOURNAL_FOLLOWER_H_
