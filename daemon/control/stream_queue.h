// StreamQueue: the lines of one stream (answer_streams.h) on their way to a client that may
// not read them as fast as they come, held to a byte budget. While the lines waiting hold less
// than the budget, a new one is queued; past it, the line is dropped and counted, and one
// {"type": "missed", …} line (protocol/follow_stream.h) takes the place of all it dropped in a
// row. A client that stalls therefore costs the daemon at most its budget, what it did not read
// is released at once, and when it reads again it learns what it missed and goes on with what
// happens now. A progress line replaces the one of its step still waiting (only the newest
// sample matters), so that a flood of progress never fills the budget of a client that reads.
// The stream's last line is always kept.
//
// Why not disconnect the client instead: a `watch` in a terminal that was paused (Ctrl-S, a
// suspended ssh) would die for it, while the count tells it exactly what it lost and the
// stream can bring it back to the present (a `follow` stream sends a fresh snapshot). A log's
// bytes are not dropped at all: `logs -f` stops reading the file while its client's budget is
// full, and goes on where it stopped.
//
// Pure; one thread.
#ifndef DEPLOYD_CONTROL_STREAM_QUEUE_H_
#define DEPLOYD_CONTROL_STREAM_QUEUE_H_

#include <boost/json/object.hpp>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "protocol/follow_stream.h"

namespace deployd {

// One line as it goes out: JSON text without its newline.
struct StreamLine {
  std::string text;
  bool last = false;  // a "type": "end" line: the stream's last
};

class StreamQueue {
 public:
  // Each stream's budget: some thousand events, while a client that reads keeps at most a few
  // lines waiting (events come at most one commit, an fsync, apart).
  static constexpr std::size_t kBudgetBytes = 256u << 10;

  explicit StreamQueue(std::size_t budget = kBudgetBytes) : budget_(budget) {}

  // Queues `line`, or counts it as missed when the lines waiting hold the budget already.
  // `keep`: queued whatever the budget (what a stream starts with: the snapshot, the run's
  // history as recorded).
  void Push(const boost::json::object& line, bool keep = false);
  // Whether the lines waiting hold the budget (a log's reading waits then).
  bool full() const { return bytes_ >= budget_; }
  // The lines waiting, in order, a missed notice among them where lines were dropped; the
  // queue is empty afterwards.
  std::deque<StreamLine> Take();
  bool empty() const { return items_.empty(); }
  std::size_t bytes() const { return bytes_; }
  // Whether the lines the last Take() handed over missed an event.
  bool missed_events() const { return missed_events_; }

 private:
  struct Item {
    StreamLine line;
    std::optional<WireMissed> missed;  // a notice, counted until it is taken
  };
  void Count(const boost::json::object& line);

  std::size_t budget_;
  std::size_t bytes_ = 0;
  std::deque<Item> items_;
  std::map<std::string, size_t> progress_at_;  // step → its progress line waiting in items_
  bool missed_events_ = false;
};

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_STREAM_QUEUE_H_
