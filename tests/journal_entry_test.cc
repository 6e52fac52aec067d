// Entries of `journalctl -o json` as journalctl 252 prints them (taken from the test container
// of tests/systemd), and the time format --since/--until take.
#include "util/journal_entry.h"

#include <catch2/catch.hpp>

using namespace deployd;

TEST_CASE("A service's own line carries its invocation as _SYSTEMD_INVOCATION_ID",
          "[journal_entry]") {
  std::optional<JournalEntry> e = ParseJournalEntry(
      R"({"__CURSOR":"s=13;i=1ad;b=7e;m=7d;t=6619;x=2d","__REALTIME_TIMESTAMP":"1796184620992201",)"
      R"("__MONOTONIC_TIMESTAMP":"2101045672","_BOOT_ID":"7e55",)"
      R"("MESSAGE":"torch.OutOfMemoryError: CUDA out of memory.",)"
      R"("_SYSTEMD_INVOCATION_ID":"d34f0f994e654b919acf15d90083e1a9","_PID":"399"})");
  REQUIRE(e.has_value());
  CHECK(e->message == "torch.OutOfMemoryError: CUDA out of memory.");
  CHECK(e->invocation == "d34f0f994e654b919acf15d90083e1a9");
  CHECK(e->realtime_us == 1796184620992201);
  CHECK(e->pid == 399);  // which process wrote it: the invocation alone may be the next one's
}

TEST_CASE("systemd's line about a unit carries it as INVOCATION_ID", "[journal_entry]") {
  std::optional<JournalEntry> e = ParseJournalEntry(
      R"({"MESSAGE":"kimi.service: Main process exited, code=exited, status=1/FAILURE",)"
      R"("INVOCATION_ID":"0a1b"})");
  REQUIRE(e.has_value());
  CHECK(e->invocation == "0a1b");
  // Both: the service's own wins (a line a service logs through syslog about itself).
  e = ParseJournalEntry(R"({"MESSAGE":"x","INVOCATION_ID":"a","_SYSTEMD_INVOCATION_ID":"b"})");
  CHECK(e->invocation == "b");
  e = ParseJournalEntry(R"({"MESSAGE":"no unit"})");
  CHECK(e->invocation.empty());
}

TEST_CASE("A message journalctl gives as bytes is taken byte for byte", "[journal_entry]") {
  // "\x1b[31mERROR\x1b[0m" (vLLM's colours): not printable, so an array of bytes.
  std::optional<JournalEntry> e = ParseJournalEntry(
      R"({"MESSAGE":[27,91,51,49,109,69,82,82,79,82,27,91,48,109],"_SYSTEMD_INVOCATION_ID":"c"})");
  REQUIRE(e.has_value());
  CHECK(e->message == "\x1b[31mERROR\x1b[0m");
}

TEST_CASE("Anything but a JSON object is not an entry", "[journal_entry]") {
  CHECK_FALSE(ParseJournalEntry("-- No entries --").has_value());
  CHECK_FALSE(ParseJournalEntry(R"({"MESSAGE":"cut sh)").has_value());
  CHECK_FALSE(ParseJournalEntry("").has_value());
  CHECK_FALSE(ParseJournalEntry("[1,2]").has_value());
}

TEST_CASE("JournalTime is Unix time with milliseconds, as --since=@ takes it", "[journal_entry]") {
  CHECK(JournalTime(1796184620992) == "@1796184620.992");
  CHECK(JournalTime(1796184620007) == "@1796184620.007");
  CHECK(JournalTime(0) == "@0.000");
}
