#include "util/journal_entry.h"

#include <boost/json.hpp>
#include <charconv>
#include <cstdio>

namespace deployd {

namespace json = boost::json;

namespace {

std::string Text(const json::value* v) {
  if (!v) return "";
  if (v->is_string()) return std::string(v->as_string());
  std::string bytes;
  if (v->is_array()) {
    for (const json::value& b : v->as_array())
      if (b.is_int64()) bytes += static_cast<char>(b.as_int64());
  }
  return bytes;
}

}  // namespace

std::optional<JournalEntry> ParseJournalEntry(std::string_view line) {
  if (line.empty() || line.front() != '{') return std::nullopt;
  boost::system::error_code ec;
  json::value value = json::parse(line, ec);
  if (ec || !value.is_object()) return std::nullopt;
  const json::object& o = value.as_object();
  JournalEntry entry;
  entry.message = Text(o.if_contains("MESSAGE"));
  entry.invocation = Text(o.if_contains("_SYSTEMD_INVOCATION_ID"));
  if (entry.invocation.empty()) entry.invocation = Text(o.if_contains("INVOCATION_ID"));
  std::string realtime = Text(o.if_contains("__REALTIME_TIMESTAMP"));
  std::from_chars(realtime.data(), realtime.data() + realtime.size(), entry.realtime_us);
  std::string pid = Text(o.if_contains("_PID"));
  std::from_chars(pid.data(), pid.data() + pid.size(), entry.pid);
  return entry;
}

std::string JournalTime(std::int64_t unix_ms) {
  char text[40];
  std::snprintf(text, sizeof text, "@%lld.%03lld", static_cast<long long>(unix_ms / 1000),
                static_cast<long long>(unix_ms % 1000));
  return text;
}

}  // namespace deployd
