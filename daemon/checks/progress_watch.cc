#include "checks/progress_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "util/clock.h"

namespace deployd {

namespace asio = boost::asio;

namespace {

// Deeper trees than this are not model directories; the bound also bounds open descriptors.
constexpr int kMaxDepth = 32;
// Bars remembered per step; an output that keeps inventing new ones starts over.
constexpr size_t kMaxBars = 256;
constexpr size_t kMaxLastLine = 512;

// Takes ownership of dir_fd.
void AddBytesUnder(int dir_fd, int depth, std::uint64_t& total) {
  DIR* dir = ::fdopendir(dir_fd);
  if (!dir) {
    ::close(dir_fd);
    return;
  }
  while (const dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      total += static_cast<std::uint64_t>(st.st_size);
    } else if (S_ISDIR(st.st_mode) && depth < kMaxDepth) {
      int fd = ::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) AddBytesUnder(fd, depth + 1, total);
    }
  }
  ::closedir(dir);
}

std::int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool SameReading(const ProgressReading& a, const ProgressReading& b) {
  return a.label == b.label && a.done == b.done && a.total == b.total && a.fraction == b.fraction;
}

}  // namespace

std::uint64_t BytesUnder(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  if (S_ISREG(st.st_mode)) return static_cast<std::uint64_t>(st.st_size);
  if (!S_ISDIR(st.st_mode)) return 0;
  std::uint64_t total = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) AddBytesUnder(fd, 0, total);
  return total;
}

std::string FormatBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + "B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", value);
  std::string text = buf;
  if (text.ends_with(".0")) text.resize(text.size() - 2);
  return text + kUnits[unit];
}

// --- ProgressTracker ---

ProgressTracker::ProgressTracker(const ProgressSpec& spec, std::int64_t now_ms,
                                 std::optional<std::uint64_t> initial_bytes)
    : spec_(spec),
      window_ms_(std::max<std::int64_t>(kWindowMs, 3 * spec.every.count())),
      last_progress_ms_(now_ms),
      bytes_(initial_bytes) {
  window_.push_back({now_ms, bytes_, Fraction()});
}

std::optional<double> ProgressTracker::Fraction() const {
  if (spec_.total && bytes_) {
    if (*spec_.total == 0) return 1.0;
    return std::min(1.0, static_cast<double>(*bytes_) / static_cast<double>(*spec_.total));
  }
  if (reading_) return reading_->fraction;
  return std::nullopt;
}

bool ProgressTracker::Sample(std::int64_t now_ms, std::optional<std::uint64_t> bytes) {
  // Growth is progress; shrinking is not (a partial file deleted to start over), but the next
  // growth from there is.
  bool progress = bytes && bytes_ && *bytes > *bytes_;
  if (bytes != bytes_) changed_ = true;
  bytes_ = bytes;
  if (progress) last_progress_ms_ = now_ms;
  window_.push_back({now_ms, bytes_, Fraction()});
  while (window_.size() > 3 && window_.front().at_ms < now_ms - window_ms_) window_.pop_front();
  return progress;
}

bool ProgressTracker::Line(std::int64_t now_ms, std::string_view line) {
  last_line_ = std::string(line.substr(0, kMaxLastLine));
  std::optional<ProgressReading> reading = ParseProgressLine(line);
  if (!reading) return false;
  if (!reading_ || !SameReading(*reading_, *reading)) changed_ = true;
  // A bar seen for the first time is progress (a new file started); a known one must advance.
  auto known = bars_.find(reading->label);
  bool progress = known == bars_.end();
  if (!progress) {
    const ProgressReading& before = known->second;
    progress = (reading->done && before.done) ? *reading->done > *before.done
                                              : reading->fraction > before.fraction;
  }
  if (known == bars_.end() && bars_.size() >= kMaxBars) bars_.clear();
  bars_[reading->label] = *reading;
  reading_ = std::move(reading);
  if (progress) last_progress_ms_ = now_ms;
  return progress;
}

std::optional<std::int64_t> ProgressTracker::StalledFor(std::int64_t now_ms) const {
  std::int64_t idle = now_ms - last_progress_ms_;
  if (idle >= spec_.stall_after.count()) return idle;
  return std::nullopt;
}

bool ProgressTracker::TakeChanged() {
  bool changed = changed_;
  changed_ = false;
  return changed;
}

ProgressSnapshot ProgressTracker::Snapshot(std::int64_t now_ms) const {
  ProgressSnapshot s;
  s.bytes = bytes_;
  s.total_bytes = spec_.total;
  if (reading_) {
    s.done = reading_->done;
    s.total = reading_->total;
  }
  s.fraction = Fraction();
  s.last_progress_at_ms = last_progress_ms_;
  s.at_ms = now_ms;
  s.last_line = last_line_;

  // Both paces are measured from the oldest sample in the window that knew the value.
  const Point& last = window_.back();
  auto oldest = [&](auto known) { return std::find_if(window_.begin(), window_.end(), known); };
  auto seconds_since = [&](const Point& p) {
    return static_cast<double>(last.at_ms - p.at_ms) / 1000;
  };
  if (auto first = oldest([](const Point& p) { return p.bytes.has_value(); });
      last.bytes && first != window_.end() && seconds_since(*first) > 0) {
    double grown = static_cast<double>(*last.bytes) - static_cast<double>(*first->bytes);
    s.rate_bps = std::max(0.0, grown / seconds_since(*first));
  }
  // The ETA: bytes left at the byte rate when the total is known, else the fraction left at
  // the pace the fraction has kept over the window.
  auto first = oldest([](const Point& p) { return p.fraction.has_value(); });
  if (s.fraction && *s.fraction >= 1) {
    s.eta_s = 0;
  } else if (s.total_bytes && s.bytes && s.rate_bps && *s.rate_bps > 0) {
    s.eta_s =
        static_cast<double>(*s.total_bytes - std::min(*s.total_bytes, *s.bytes)) / *s.rate_bps;
  } else if (s.fraction && last.fraction && first != window_.end() && seconds_since(*first) > 0 &&
             *last.fraction > *first->fraction) {
    double per_second = (*last.fraction - *first->fraction) / seconds_since(*first);
    s.eta_s = (1 - *s.fraction) / per_second;
  }
  return s;
}

// --- ProgressWatch ---

ProgressWatch::ProgressWatch(asio::any_io_executor ex, const ProgressSpec& spec,
                             ChangeHandler on_change, StallHandler on_stall)
    : spec_(spec),
      timer_(std::move(ex)),
      on_change_(std::move(on_change)),
      on_stall_(std::move(on_stall)),
      tracker_(spec, SteadyMs(),
               spec.path.empty() ? std::nullopt : std::optional(BytesUnder(spec.path))) {}

std::shared_ptr<ProgressWatch> ProgressWatch::Start(asio::any_io_executor ex,
                                                    const ProgressSpec& spec,
                                                    ChangeHandler on_change,
                                                    StallHandler on_stall) {
  std::shared_ptr<ProgressWatch> watch(
      new ProgressWatch(std::move(ex), spec, std::move(on_change), std::move(on_stall)));
  std::int64_t now = SteadyMs();
  watch->next_ms_ = now;
  watch->Arm(now);
  return watch;
}

ProgressWatch::~ProgressWatch() { Stop(); }

void ProgressWatch::Arm(std::int64_t now_ms) {
  // A fixed cadence; a tick that came late (a busy loop) is not made up for with a burst.
  next_ms_ += spec_.every.count();
  if (next_ms_ <= now_ms) next_ms_ = now_ms + spec_.every.count();
  timer_.expires_at(asio::steady_timer::time_point(std::chrono::milliseconds(next_ms_)));
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->Tick();
  });
}

void ProgressWatch::Tick() {
  if (stopped_) return;
  auto self = shared_from_this();  // a handler may drop the owner's reference
  std::int64_t now = SteadyMs();
  tracker_.Sample(now, spec_.path.empty() ? std::nullopt : std::optional(BytesUnder(spec_.path)));
  if (std::optional<std::int64_t> idle = tracker_.StalledFor(now)) {
    stopped_ = true;
    if (on_stall_) on_stall_(WallSnapshot(now), *idle);
    return;
  }
  if (tracker_.TakeChanged() && on_change_) on_change_(WallSnapshot(now));
  if (!stopped_) Arm(now);
}

void ProgressWatch::OnLine(std::string_view line) {
  if (!stopped_) tracker_.Line(SteadyMs(), line);
}

void ProgressWatch::Stop() {
  stopped_ = true;
  timer_.cancel();
}

ProgressSnapshot ProgressWatch::Snapshot() const { return WallSnapshot(SteadyMs()); }

ProgressSnapshot ProgressWatch::WallSnapshot(std::int64_t now_ms) const {
  ProgressSnapshot s = tracker_.Snapshot(now_ms);
  std::int64_t offset = NowMs() - now_ms;
  s.last_progress_at_ms += offset;
  s.at_ms += offset;
  return s;
}

}  // namespace deployd
