// ProgressWatch: watches one running step for progress (`watch.progress`, DESIGN.md §1 "Watch")
// and says when it has stalled.
//
// Progress is bytes under a path growing (sampled every `every` on one steady_timer — the only
// timer; nothing else polls) or a progress line in the step's output advancing (OnLine, fed by
// whoever reads the output). No progress for `stall_after` → on_stall, once; a stall is noticed
// at the first sample after `stall_after` has passed, so within stall_after + every.
//
// ProgressTracker is the arithmetic behind it — what counts as progress, the rate over a sliding
// window, the fraction and ETA — pure, on times the caller gives (steady milliseconds), and
// tested on its own. Progress is observation, not state: nothing here is persisted.
//
// One thread: everything runs on the executor given to Start(). Callbacks are never invoked
// from OnLine() or Stop(), only from the timer; destroying the watch stops it.
#ifndef DEPLOYD_CHECKS_PROGRESS_WATCH_H_
#define DEPLOYD_CHECKS_PROGRESS_WATCH_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "checks/progress_line.h"
#include "deployd/plan.h"

namespace deployd {

// The apparent size (like `du -sb --apparent-size`) of every regular file under `path`,
// hidden and partial ones (`.cache/huggingface/download/*.incomplete`) included. Symbolic links
// are not followed (a Hugging Face cache links snapshots to blobs: they would count twice).
// Entries that vanish or cannot be read while it walks are skipped; a missing path is 0 bytes.
std::uint64_t BytesUnder(const std::string& path);

// "512B", "1.5KiB", "1.2GiB": for messages.
std::string FormatBytes(std::uint64_t bytes);

// What is known about a step's progress at one moment. Absent fields are unknown.
struct ProgressSnapshot {
  std::optional<std::uint64_t> bytes;        // under the path (a watch with a path only)
  std::optional<std::uint64_t> total_bytes;  // `progress.total`
  std::optional<double> done;                // units done / total, from the last progress line
  std::optional<double> total;
  std::optional<double> fraction;  // 0..1: bytes/total_bytes, else the last progress line's
  std::optional<double> rate_bps;  // bytes per second over the sliding window (with a path)
  std::optional<double> eta_s;     // at the current pace; unknown without a fraction
  // When progress was last seen, and when this snapshot was taken: the tracker's clock in a
  // ProgressTracker's snapshot, Unix milliseconds in a ProgressWatch's.
  std::int64_t last_progress_at_ms = 0;
  std::int64_t at_ms = 0;
  std::string last_line;  // the last output line seen ("" if none)
};

class ProgressTracker {
 public:
  // The rate and ETA look back this far (or over the last three samples, if longer).
  static constexpr std::int64_t kWindowMs = 30'000;

  // `initial_bytes`: the bytes under the path when the watch starts (absent without a path);
  // what was there already is not progress.
  ProgressTracker(const ProgressSpec& spec, std::int64_t now_ms,
                  std::optional<std::uint64_t> initial_bytes);

  // A sample of the bytes under the path (absent without a path). Returns true when it was
  // progress.
  bool Sample(std::int64_t now_ms, std::optional<std::uint64_t> bytes);
  // An output line; returns true when it was progress (a bar that is new or has advanced).
  bool Line(std::int64_t now_ms, std::string_view line);

  // How long without progress, when that is at least stall_after.
  std::optional<std::int64_t> StalledFor(std::int64_t now_ms) const;
  ProgressSnapshot Snapshot(std::int64_t now_ms) const;
  // True once after anything a viewer would see has changed.
  bool TakeChanged();

 private:
  struct Point {
    std::int64_t at_ms;
    std::optional<std::uint64_t> bytes;
    std::optional<double> fraction;
  };
  std::optional<double> Fraction() const;

  ProgressSpec spec_;
  std::int64_t window_ms_;
  std::int64_t last_progress_ms_;
  std::optional<std::uint64_t> bytes_;
  std::optional<ProgressReading> reading_;  // the last progress line
  std::string last_line_;
  std::map<std::string, ProgressReading> bars_;  // bar → its last reading
  std::deque<Point> window_;
  bool changed_ = true;  // the first sample is news
};

class ProgressWatch : public std::enable_shared_from_this<ProgressWatch> {
 public:
  using ChangeHandler = std::function<void(const ProgressSnapshot&)>;
  // `stalled_for_ms`: since the last progress. Called once; the watch has stopped by then.
  using StallHandler = std::function<void(const ProgressSnapshot&, std::int64_t stalled_for_ms)>;

  // Takes the first sample now and arms the timer. `on_change` is called after a sample that
  // changed something (new bytes, a new progress line).
  static std::shared_ptr<ProgressWatch> Start(boost::asio::any_io_executor ex,
                                              const ProgressSpec& spec, ChangeHandler on_change,
                                              StallHandler on_stall);
  ~ProgressWatch();

  // One line of the step's output (foreground: from ChildProcess; background: from the
  // follower of its log).
  void OnLine(std::string_view line);
  void Stop();

  const ProgressSpec& spec() const { return spec_; }
  ProgressSnapshot Snapshot() const;

 private:
  ProgressWatch(boost::asio::any_io_executor ex, const ProgressSpec& spec, ChangeHandler on_change,
                StallHandler on_stall);
  void Arm(std::int64_t now_ms);
  void Tick();
  // The tracker's snapshot with its times turned into Unix milliseconds.
  ProgressSnapshot WallSnapshot(std::int64_t now_ms) const;

  ProgressSpec spec_;
  boost::asio::steady_timer timer_;
  ChangeHandler on_change_;
  StallHandler on_stall_;
  ProgressTracker tracker_;
  std::int64_t next_ms_ = 0;
  bool stopped_ = false;
};

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_PROGRESS_WATCH_H_
