#include "util/log_marks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <optional>
#include <string_view>

#include "util/clock.h"

namespace deployd {

namespace {

// The attempts file is a line per attempt: more than this is not one.
constexpr std::uint64_t kMaxAttemptsBytes = 1u << 20;

// The numbers of a marks line, nullopt for one that is not well formed.
template <size_t N>
std::optional<std::array<std::int64_t, N>> Numbers(std::string_view line) {
  std::array<std::int64_t, N> n{};
  const char* p = line.data();
  const char* end = line.data() + line.size();
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) {
      if (p == end || *p != ' ') return std::nullopt;
      ++p;
    }
    auto [next, error] = std::from_chars(p, end, n[i]);
    if (error != std::errc() || n[i] < 0) return std::nullopt;
    p = next;
  }
  if (p != end) return std::nullopt;
  return n;
}

std::optional<TimeMark> ParseTime(std::string_view line) {
  auto n = Numbers<2>(line);
  if (!n) return std::nullopt;
  return TimeMark{static_cast<std::uint64_t>((*n)[0]), (*n)[1]};
}

std::optional<AttemptMark> ParseAttempt(std::string_view line) {
  auto n = Numbers<4>(line);
  if (!n) return std::nullopt;
  return AttemptMark{static_cast<std::uint64_t>((*n)[0]), (*n)[1], static_cast<int>((*n)[2]),
                     static_cast<int>((*n)[3])};
}

std::vector<AttemptMark> ParseAttempts(const std::string& text) {
  std::vector<AttemptMark> marks;
  for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    if (auto mark = ParseAttempt(std::string_view(text).substr(start, nl - start)))
      marks.push_back(*mark);
  return marks;
}

// The file open as `fd` from its start, at most `most` bytes of it.
std::string ReadAll(int fd, std::uint64_t most) {
  std::string text;
  char buffer[16384];
  for (;;) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() + static_cast<size_t>(n) > most) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

std::vector<AttemptMark> ReadAttempts(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::vector<AttemptMark> marks = ParseAttempts(ReadAll(fd, kMaxAttemptsBytes));
  ::close(fd);
  return marks;
}

// The first whole line of the times file at or after byte `pos` (its start and its mark).
std::pair<std::uint64_t, std::optional<TimeMark>> LineAfter(int fd, std::uint64_t pos) {
  char buffer[256];
  ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(pos));
  if (n <= 0) return {pos, std::nullopt};
  std::string_view text(buffer, static_cast<size_t>(n));
  size_t start = 0;
  if (pos > 0) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return {pos, std::nullopt};
    start = nl + 1;
  }
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) return {pos + start, std::nullopt};
  return {pos + start, ParseTime(text.substr(start, end - start))};
}

// Where in the times file to read from for the marks of log bytes from `from` on: the start of
// the last mark at or before it (a binary search over the file's bytes: the marks are in the
// order of their offsets).
std::uint64_t SeekTimes(int fd, std::uint64_t from) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return 0;
  std::uint64_t lo = 0, hi = static_cast<std::uint64_t>(st.st_size);
  while (hi - lo > 512) {
    std::uint64_t mid = lo + (hi - lo) / 2;
    auto [start, mark] = LineAfter(fd, mid);
    if (!mark || start >= hi || mark->offset > from) {
      hi = mid;
    } else {
      lo = start;
    }
  }
  return lo;
}

}  // namespace

LogMarkWriter::~LogMarkWriter() {
  if (times_fd_ >= 0) ::close(times_fd_);
  if (attempts_fd_ >= 0) ::close(attempts_fd_);
}

void LogMarkWriter::Append(int& fd, const std::string& suffix, const std::string& line) {
  if (fd < 0)
    fd = ::open((log_path_ + suffix).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd >= 0) (void)!::write(fd, line.data(), line.size());
}

void LogMarkWriter::BeforeLine(int log_fd) {
  std::int64_t now = NowMs();
  if (now == last_ms_ || log_fd < 0) return;
  off_t end = ::lseek(log_fd, 0, SEEK_END);
  if (end < 0) return;
  last_ms_ = now;
  Append(times_fd_, ".times", std::to_string(end) + " " + std::to_string(now) + "\n");
}

void LogMarkWriter::AttemptStarts(int log_fd, int attempt, int of, std::int64_t at_ms) {
  off_t end = log_fd >= 0 ? ::lseek(log_fd, 0, SEEK_END) : -1;
  if (end < 0) return;
  Append(attempts_fd_, ".attempts",
         std::to_string(end) + " " + std::to_string(at_ms) + " " + std::to_string(attempt) + " " +
             std::to_string(of) + "\n");
}

void LogMarkWriter::Rotated() {
  for (int* fd : {&times_fd_, &attempts_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  for (const char* suffix : {".times", ".attempts"})
    (void)::rename((log_path_ + suffix).c_str(), (log_path_ + ".1" + suffix).c_str());
  last_ms_ = -1;  // the new log's first line gets its time
  std::vector<AttemptMark> before = ReadAttempts(log_path_ + ".1.attempts");
  if (before.empty()) return;
  const AttemptMark& going_on = before.back();
  Append(attempts_fd_, ".attempts",
         "0 " + std::to_string(going_on.started_at_ms) + " " + std::to_string(going_on.attempt) +
             " " + std::to_string(going_on.of) + "\n");
}

LogMarkReader::LogMarkReader(std::string log_path, bool times)
    : log_path_(std::move(log_path)), times_(times) {
  Open();
}

LogMarkReader::~LogMarkReader() {
  if (times_fd_ >= 0) ::close(times_fd_);
  if (attempts_fd_ >= 0) ::close(attempts_fd_);
}

void LogMarkReader::Open() {
  if (attempts_fd_ < 0)
    attempts_fd_ = ::open((log_path_ + ".attempts").c_str(), O_RDONLY | O_CLOEXEC);
  if (times_ && times_fd_ < 0)
    times_fd_ = ::open((log_path_ + ".times").c_str(), O_RDONLY | O_CLOEXEC);
}

LogMarks LogMarkReader::Marks(std::uint64_t from, std::uint64_t to) {
  LogMarks marks;
  const bool first = !started_;
  started_ = true;
  const bool had_times = times_fd_ >= 0;
  Open();
  struct stat st;
  if (attempts_fd_ >= 0 && ::fstat(attempts_fd_, &st) == 0 &&
      static_cast<std::uint64_t>(st.st_size) != attempts_size_) {
    attempts_size_ = static_cast<std::uint64_t>(st.st_size);
    attempts_ = ParseAttempts(ReadAll(attempts_fd_, kMaxAttemptsBytes));
  }
  std::optional<AttemptMark> in_effect;
  for (const AttemptMark& a : attempts_) {
    if (a.offset <= from) in_effect = a;
    if (a.offset > from && a.offset < to) marks.attempts.push_back(a);
  }
  // On later calls the attempt in effect is the one the last call gave.
  if (in_effect && (first || in_effect->offset == from))
    marks.attempts.insert(marks.attempts.begin(), *in_effect);
  if (times_fd_ < 0) return marks;
  if (!had_times) times_read_ = SeekTimes(times_fd_, from);
  char buffer[65536];
  for (;;) {
    // The marks are ahead of the log (each is written before its line): read what is there.
    ssize_t n = ::pread(times_fd_, buffer, sizeof buffer, static_cast<off_t>(times_read_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    times_read_ += static_cast<std::uint64_t>(n);
    partial_.append(buffer, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buffer) break;
  }
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::optional<TimeMark> mark = ParseTime(std::string_view(partial_).substr(start, nl - start));
    if (!mark) continue;
    if (mark->offset >= to) break;  // a later piece's: read again then
    // Of the marks at or before `from`, the last is the one in effect there.
    if (mark->offset <= from && !marks.times.empty() && marks.times.back().offset <= from)
      marks.times.back() = *mark;
    else
      marks.times.push_back(*mark);
  }
  partial_.erase(0, start);
  return marks;
}

LogMarks ReadLogMarks(const std::string& log_path, std::uint64_t from, std::uint64_t to,
                      bool times) {
  return LogMarkReader(log_path, times).Marks(from, to);
}

}  // namespace deployd
