// JournalFollower: `journalctl -u UNIT -f -n 0 -o cat` beside a `service` step that starts its
// unit, so that fail_on also meets the server's own lines: a server that dies in its first
// seconds is caught from what it said. Its output goes to the step's log like the action's.
//
// A follower starts disarmed: its lines reach `on_line` only once systemd has said
// "Started …" (or Arm() was called, when the action succeeded or the step is re-verified
// after a restart). What a restart's stop phase logs ("Main process exited, code=killed") is
// not a failure of the new server. One thread: the io_context's.
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

class ChildProcess;

class JournalFollower {
 public:
  using LineHandler = std::function<void(std::string_view line)>;

  // `run_id` names the run in the warning logged when journalctl ends on its own.
  static Result<std::unique_ptr<JournalFollower>> Start(
      boost::asio::any_io_executor ex, const std::string& unit, const std::string& log_path,
      std::uint64_t log_cap_bytes, const std::string& run_id, LineHandler on_line);
  ~JournalFollower();

  // Every line from now on reaches `on_line`.
  void Arm();
  // Stops journalctl (SIGTERM, SIGKILL after a second); lines already read may still come.
  void Stop();

 private:
  struct Gate {
    bool armed = false;
  };
  JournalFollower(std::shared_ptr<Gate> gate, std::shared_ptr<ChildProcess> child);

  std::shared_ptr<Gate> gate_;  // shared with the line handler, which may outlive us
  std::shared_ptr<ChildProcess> child_;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_JOURNAL_FOLLOWER_H_
