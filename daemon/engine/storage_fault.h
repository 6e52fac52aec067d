// StorageFault: what deployd knows while the state database refuses its writes (a full disk,
// an I/O error, a read-only file system): since when, why, how often it has tried, and when it
// tries next. The transitions that wait meanwhile are the RunManager's (storage_retry.cc); this
// is the pure part — the backoff and the words for the operator — and takes the time as given.
#ifndef DEPLOYD_ENGINE_STORAGE_FAULT_H_
#define DEPLOYD_ENGINE_STORAGE_FAULT_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace deployd {

// What deployd's metrics say of the storage since deployd started: how often writes began to
// be refused, how many writes were refused, and how long the faults lasted.
struct StorageFaultTotals {
  std::uint64_t faults = 0;
  std::uint64_t failed_writes = 0;
  std::int64_t fault_ms = 0;  // of the faults that have cleared
};

class StorageFault {
 public:
  // The first try again comes this soon after a failed write, each next one twice as late, up
  // to kMaxBackoff: a disk freed by an operator is noticed within seconds, and a disk that
  // stays full costs one write and one log line every few seconds.
  static constexpr std::chrono::milliseconds kFirstBackoff{200};
  static constexpr std::chrono::milliseconds kMaxBackoff{5000};

  // The delay before the next try after `failures` failed writes in a row (1, 2, …).
  static std::chrono::milliseconds Backoff(int failures);

  // A write failed at `now_ms` with `error`: the fault begins, or goes on. Returns the delay
  // before the next try.
  std::chrono::milliseconds Failed(const std::string& error, std::int64_t now_ms);
  // The writes succeed again at `now_ms`: returns for how long they did not (ms).
  std::int64_t Cleared(std::int64_t now_ms);

  bool active() const { return since_ms_ != 0; }
  const std::string& error() const { return error_; }
  std::int64_t since_ms() const { return since_ms_; }
  int failures() const { return failures_; }
  std::int64_t next_try_at_ms() const { return next_try_at_ms_; }

  // One line for status, why and systemd's STATUS=: "cannot record: ERROR (for 12s, 5 tries;
  // next try in 2s; 3 transitions wait)".
  std::string Describe(std::int64_t now_ms, std::size_t waiting) const;

 private:
  std::string error_;
  std::int64_t since_ms_ = 0;
  int failures_ = 0;
  std::int64_t next_try_at_ms_ = 0;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_STORAGE_FAULT_H_
