// `deployctl logs`'s printing of a step's output with its marks: attempt separators and
// per-line times.
#include "ctl/log_printer.h"

#include <catch2/catch.hpp>

#include "ctl/ctl_client.h"

using namespace deployd;
using namespace deployd::ctl;

namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000;

TextMarks Marks(std::vector<TextAttempt> attempts, std::vector<TextTime> times) {
  return TextMarks{std::move(attempts), std::move(times)};
}

}  // namespace

TEST_CASE("log printer: a separator where each attempt begins") {
  LogPrinter printer(false, kT0 + 60'000);
  std::string text = "one\nfailed\ntwo\n";
  std::string out =
      printer.Print(text, Marks({{0, {0, kT0, 1, 3}}, {11, {0, kT0 + 5'000, 2, 3}}}, {}));
  CHECK(out == AttemptLine({0, kT0, 1, 3}, kT0 + 60'000) + "\none\nfailed\n" +
                   AttemptLine({0, kT0 + 5'000, 2, 3}, kT0 + 60'000) + "\ntwo\n");
  CHECK(AttemptLine({0, kT0, 1, 3}, kT0 + 60'000) ==
        "── attempt 1 of 3, started " + Clock(kT0) + " (1m ago) ──");
  // The same attempt again (a rotation): no second separator.
  CHECK(printer.Print("three\n", Marks({{0, {0, kT0 + 5'000, 2, 3}}}, {})) == "three\n");
}

TEST_CASE("log printer: times at the start of each line, across pieces") {
  LogPrinter printer(true, kT0);
  std::string out = printer.Print("a\nb", Marks({}, {{0, kT0 + 1}, {2, kT0 + 2'345}}));
  CHECK(out == LineTime(kT0 + 1) + " a\n" + LineTime(kT0 + 2'345) + " b");
  // The rest of the line, then a line of the same time.
  out = printer.Print("c\nd\n", {});
  CHECK(out == "c\n" + LineTime(kT0 + 2'345) + " d\n");
  // A line whose time is not known.
  LogPrinter fresh(true, kT0);
  CHECK(fresh.Print("x\n", {}) == "-" + std::string(LineTime(0).size() - 1, ' ') + " x\n");
  CHECK(LineTime(kT0 + 45).size() == 29);
  CHECK(LineTime(kT0 + 45).substr(19, 4) == ".045");
}

TEST_CASE("log printer: an attempt that begins inside a line starts a line of its own") {
  LogPrinter printer(false, kT0);
  std::string out = printer.Print("no newline", Marks({{10, {0, kT0, 2, 2}}}, {}));
  CHECK(out == "no newline\n" + AttemptLine({0, kT0, 2, 2}, kT0) + "\n");
}

TEST_CASE(
    "log printer: the only attempt of a step has no separator, a second one after retry has") {
  LogPrinter printer(false, kT0);
  CHECK(printer.Print("first\n", Marks({{0, {0, kT0, 1, 1}}}, {})) == "first\n");
  CHECK(printer.Print("again\n", Marks({{0, {0, kT0 + 9'000, 1, 1}}}, {})) ==
        AttemptLine({0, kT0 + 9'000, 1, 1}, kT0) + "\nagain\n");
}
