// LogMarks: what a step's log does not say itself, kept beside it by the log's writers — when
// its lines were written, and where each attempt of the step begins — so that `deployctl logs`
// can show per-line timestamps and attempt separators while the log holds exactly the output:
// deployd's followers (fail_on, progress, the tail of `why`) read the log as it is, and a
// marker in it would be a line of output to them.
//
//   LOG.times      "OFFSET MS\n"…              from byte OFFSET on, the lines were written at MS
//                                                (Unix ms); one mark when the millisecond changes
//   LOG.attempts   "OFFSET MS ATTEMPT OF\n"…   attempt ATTEMPT of OF began at OFFSET, at MS
//
// A mark is written before the line it marks, so that a reader that has a byte of the log has
// its mark. Rotated with the log (LOG.1.times, LOG.1.attempts); the attempt under way goes on at
// the start of the new log. A writer that cannot write its marks goes on without them: they
// are an aid, the log is the record. Lines that are not well formed (a crash mid-write) are
// skipped by the reader. Blocking file I/O (the supervisor's; the daemon reads them for
// `logs` as it reads the log).
#ifndef DEPLOYD_UTIL_LOG_MARKS_H_
#define DEPLOYD_UTIL_LOG_MARKS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace deployd {

struct TimeMark {
  std::uint64_t offset = 0;
  std::int64_t at_ms = 0;
};

struct AttemptMark {
  std::uint64_t offset = 0;
  std::int64_t started_at_ms = 0;
  int attempt = 0;
  int of = 0;
};

// The marks of a part of a log, offsets as in the log file.
struct LogMarks {
  std::vector<AttemptMark> attempts;
  std::vector<TimeMark> times;
};

// The side of a log's writer: one per open log.
class LogMarkWriter {
 public:
  explicit LogMarkWriter(std::string log_path) : log_path_(std::move(log_path)) {}
  ~LogMarkWriter();
  LogMarkWriter(const LogMarkWriter&) = delete;
  LogMarkWriter& operator=(const LogMarkWriter&) = delete;

  // Before a line is appended to the log open as `log_fd` (O_APPEND): a time mark at the log's
  // end, when the time is not that of the last mark.
  void BeforeLine(int log_fd);
  // Attempt `attempt` of `of` begins at the log's end, at `at_ms`.
  void AttemptStarts(int log_fd, int attempt, int of, std::int64_t at_ms);
  // The writer renamed LOG to LOG.1: the marks go with it, and the attempt under way goes on
  // at offset 0 of the new log.
  void Rotated();

 private:
  void Append(int& fd, const std::string& suffix, const std::string& line);
  std::string log_path_;
  int times_fd_ = -1;
  int attempts_fd_ = -1;
  std::int64_t last_ms_ = -1;
};

// The marks for bytes [from, to) of the log file at `log_path`, with the attempt (and the
// time, with `times`) in effect at `from`. Reads the times file from its end only as far back
// as `from` needs.
LogMarks ReadLogMarks(const std::string& log_path, std::uint64_t from, std::uint64_t to,
                      bool times);

// The same, read on as a log is followed: each call reads only what was added to the marks
// files since the last one. For the file at `log_path` as it is when made: its marks files are
// opened then (or, not there yet, as soon as they are), and a rotation opens nothing new:
// follow the new log with a new reader.
class LogMarkReader {
 public:
  LogMarkReader(std::string log_path, bool times);
  ~LogMarkReader();
  LogMarkReader(const LogMarkReader&) = delete;
  LogMarkReader& operator=(const LogMarkReader&) = delete;

  // REQUIRES: `from` at or after the `to` of the last call.
  LogMarks Marks(std::uint64_t from, std::uint64_t to);

 private:
  // Opened when made: a rotation renames the files, and these go on being the same ones.
  void Open();
  std::string log_path_;
  bool times_;
  int times_fd_ = -1;
  int attempts_fd_ = -1;
  std::uint64_t times_read_ = 0;  // of the times file
  std::uint64_t attempts_size_ = 0;
  std::vector<AttemptMark> attempts_;
  bool started_ = false;
  std::string partial_;  // what was read of the times file and not yet given
};

}  // namespace deployd

#endif  // DEPLOYD_UTIL_LOG_MARKS_H_
