#include "engine/storage_fault.h"

#include <algorithm>

#include "util/units.h"

namespace deployd {

namespace {

// Whole seconds past the first: "for 12s", "next try in 3s", "in 200ms".
std::string Roughly(std::int64_t ms) {
  ms = std::max<std::int64_t>(0, ms);
  if (ms >= 1000) ms = (ms + 500) / 1000 * 1000;
  return FormatDuration(std::chrono::milliseconds(ms));
}

}  // namespace

std::chrono::milliseconds StorageFault::Backoff(int failures) {
  std::chrono::milliseconds delay = kFirstBackoff;
  for (int i = 1; i < failures && delay < kMaxBackoff; ++i) delay *= 2;
  return std::min(delay, kMaxBackoff);
}

std::chrono::milliseconds StorageFault::Failed(const std::string& error, std::int64_t now_ms) {
  if (since_ms_ == 0) since_ms_ = now_ms;
  error_ = error;
  ++failures_;
  std::chrono::milliseconds delay = Backoff(failures_);
  next_try_at_ms_ = now_ms + delay.count();
  return delay;
}

std::int64_t StorageFault::Cleared(std::int64_t now_ms) {
  std::int64_t lasted = since_ms_ == 0 ? 0 : std::max<std::int64_t>(0, now_ms - since_ms_);
  *this = StorageFault();
  return lasted;
}

std::string StorageFault::Describe(std::int64_t now_ms, std::size_t waiting) const {
  std::string text = "cannot record: " + error_ + " (for " + Roughly(now_ms - since_ms_) + ", " +
                     std::to_string(failures_) + (failures_ == 1 ? " try" : " tries") +
                     "; next try in " + Roughly(next_try_at_ms_ - now_ms);
  if (waiting > 0)
    text +=
        "; " + std::to_string(waiting) + (waiting == 1 ? " transition waits" : " transitions wait");
  return text + ")";
}

}  // namespace deployd
