// The marks beside a step's log (when its lines were written, where attempts begin): written
// as the log is, rotated with it, read back for a part of the log, and read on as it grows.
#include "util/log_marks.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "test_support.h"

using namespace deployd;
using deployd::testing::ReadFile;
using deployd::testing::TempDir;

namespace {

// A log writer as the supervisor is one: a mark, then the line.
struct Writer {
  explicit Writer(const std::string& path) : path(path), marks(path) { Open(); }
  ~Writer() { ::close(fd); }
  void Open() { fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640); }
  void Line(const std::string& line) {
    marks.BeforeLine(fd);
    std::string text = line + "\n";
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  void Rotate() {
    ::close(fd);
    std::rename(path.c_str(), (path + ".1").c_str());
    marks.Rotated();
    Open();
  }
  std::string path;
  LogMarkWriter marks;
  int fd = -1;
};

// A step's log in a directory of its own, and its writer.
struct StepLog {
  TempDir dir;
  std::string log = dir.File("step.log");
  Writer w{log};
};

}  // namespace

TEST_CASE("log marks: attempts and times are read back for a part of the log") {
  StepLog step;
  const std::string& log = step.log;
  Writer& w = step.w;
  w.marks.AttemptStarts(w.fd, 1, 2, 1000);
  w.Line("one");
  w.Line("two");
  w.marks.AttemptStarts(w.fd, 2, 2, 2000);
  w.Line("three");
  CHECK(ReadFile(log) == "one\ntwo\nthree\n");
  CHECK(ReadFile(log + ".attempts") == "0 1000 1 2\n8 2000 2 2\n");

  LogMarks all = ReadLogMarks(log, 0, 14, true);
  REQUIRE(all.attempts.size() == 2);
  CHECK(all.attempts[1].offset == 8);
  CHECK(all.attempts[1].attempt == 2);
  REQUIRE(!all.times.empty());
  CHECK(all.times[0].offset == 0);
  // From the middle: the attempt and the time in effect there come first.
  LogMarks part = ReadLogMarks(log, 4, 14, true);
  REQUIRE(part.attempts.size() == 2);
  CHECK(part.attempts[0].attempt == 1);
  REQUIRE(!part.times.empty());
  CHECK(part.times[0].offset <= 4);
  // Without times only the attempts are read.
  CHECK(ReadLogMarks(log, 0, 14, false).times.empty());
}

TEST_CASE("log marks: a rotated log keeps its marks; the attempt goes on in the new one") {
  StepLog step;
  const std::string& log = step.log;
  Writer& w = step.w;
  w.marks.AttemptStarts(w.fd, 3, 3, 5000);
  w.Line("before");
  w.Rotate();
  w.Line("after");
  CHECK(ReadFile(log + ".1.attempts") == "0 5000 3 3\n");
  CHECK(ReadFile(log + ".attempts") == "0 5000 3 3\n");
  LogMarks rotated = ReadLogMarks(log + ".1", 0, 7, true);
  CHECK(rotated.times.size() == 1);
  LogMarks fresh = ReadLogMarks(log, 0, 6, true);
  REQUIRE(fresh.times.size() == 1);
  CHECK(fresh.times[0].offset == 0);
}

TEST_CASE("log marks: a reader follows the log as it grows, each mark once") {
  StepLog step;
  const std::string& log = step.log;
  Writer& w = step.w;
  w.marks.AttemptStarts(w.fd, 1, 1, 1000);
  w.Line("a");
  LogMarkReader reader(log, true);
  LogMarks first = reader.Marks(0, 2);
  CHECK(first.attempts.size() == 1);
  CHECK(first.times.size() == 1);
  ::usleep(2000);  // another millisecond: another mark
  w.Line("b");
  LogMarks second = reader.Marks(2, 4);
  CHECK(second.attempts.empty());
  REQUIRE(second.times.size() == 1);
  CHECK(second.times[0].offset == 2);
  CHECK(reader.Marks(4, 4).times.empty());
}

TEST_CASE("log marks: lines that are not well formed are skipped; no files, no marks") {
  TempDir dir;
  std::string log = dir.File("step.log");
  dir.Write("step.log.attempts", "0 1000 1 2\ngarbage\n8 -1 2 2\n12 3000 2");
  dir.Write("step.log.times", "0 1000\nx y\n5 1001\n");
  LogMarks marks = ReadLogMarks(log, 0, 20, true);
  REQUIRE(marks.attempts.size() == 1);
  CHECK(marks.attempts[0].started_at_ms == 1000);
  REQUIRE(marks.times.size() == 2);
  CHECK(marks.times[1].offset == 5);
  LogMarks none = ReadLogMarks(dir.File("other.log"), 0, 10, true);
  CHECK((none.attempts.empty() && none.times.empty()));
}

TEST_CASE("log marks: the mark in effect is found in a long times file") {
  TempDir dir;
  std::string log = dir.File("step.log");
  std::string times;
  for (int i = 0; i < 20000; ++i)
    times += std::to_string(i * 10) + " " + std::to_string(1'000'000 + i) + "\n";
  dir.Write("step.log.times", times);
  for (std::uint64_t from : {0ull, 5ull, 12'345ull, 150'000ull, 199'990ull, 250'000ull}) {
    LogMarks marks = ReadLogMarks(log, from, from + 25, true);
    REQUIRE(!marks.times.empty());
    std::uint64_t expected = std::min<std::uint64_t>(from / 10 * 10, 199'990);
    CHECK(marks.times[0].offset == expected);
    CHECK(marks.times[0].at_ms == 1'000'000 + static_cast<std::int64_t>(expected / 10));
    for (size_t i = 1; i < marks.times.size(); ++i) CHECK(marks.times[i].offset > from);
  }
}
