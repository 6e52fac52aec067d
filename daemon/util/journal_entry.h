// Reading systemd's journal through `journalctl -o json` (one JSON object a line): what deployd
// needs of an entry — its message and the unit invocation it belongs to — and the arguments that
// ask for exactly that. Lines are judged by their invocation and the process that wrote them,
// never by their text: the old server's last words during a restart are not the new one's.
// journald stamps a line with the invocation the unit's cgroup names when it reads the line, so
// the old server's last words, read once a restart has begun, can carry the new invocation's
// id (seen with systemd 252): only their _PID, the old main process's, tells them apart.
#ifndef DEPLOYD_UTIL_JOURNAL_ENTRY_H_
#define DEPLOYD_UTIL_JOURNAL_ENTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deployd {

struct JournalEntry {
  std::string message;
  // _SYSTEMD_INVOCATION_ID (the service's own output), else INVOCATION_ID (systemd's lines about
  // the unit: "Started …", "Main process exited, …"); "" when the entry has neither.
  std::string invocation;
  std::int64_t realtime_us = 0;  // __REALTIME_TIMESTAMP: when journald received it
  // _PID: the process that wrote it; for a service's output, the process whose stdout the
  // stream is (its main process, whose children share the stream). 1 for systemd's lines.
  std::int64_t pid = 0;
};

// One line of `journalctl -o json`; nullopt for anything else (a notice of journalctl's own, a
// line cut short). MESSAGE given as an array of bytes (not UTF-8, or with control characters)
// is taken byte for byte.
std::optional<JournalEntry> ParseJournalEntry(std::string_view line);

// `-o json -a --output-fields=…`: only the fields above, never abbreviated.
inline constexpr const char* kJournalJsonArgs[] = {
    "-o", "json", "-a", "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,INVOCATION_ID,_PID"};

// A point in time as --since/--until take it: "@1700000000.123" (Unix time, milliseconds).
std::string JournalTime(std::int64_t unix_ms);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_JOURNAL_ENTRY_H_
