#include "protocol/follow_stream.h"

#include <boost/json.hpp>
#include <vector>

#include "protocol/wire_fields.h"
#include "util/units.h"

namespace deployd {

namespace json = boost::json;

std::string LineType(const json::object& line) { return WireFields{line}.Str("type"); }

json::object EncodeEvent(const WireEvent& e) {
  json::object o{{"type", "event"}, {"run", e.run},     {"seq", e.seq},       {"step", e.step},
                 {"kind", e.kind},  {"state", e.state}, {"detail", e.detail}, {"at_ms", e.at_ms}};
  if (e.attempt) o["attempt"] = *e.attempt;
  return o;
}

WireEvent DecodeEvent(const json::object& line) {
  WireFields f{line};
  WireEvent e;
  e.run = f.Str("run");
  e.seq = f.Int("seq");
  e.step = f.Str("step");
  e.kind = f.Str("kind");
  e.state = f.Str("state");
  e.detail = f.Str("detail");
  e.at_ms = f.Int("at_ms");
  if (line.contains("attempt")) e.attempt = f.Int("attempt");
  return e;
}

json::object EncodeProgressLine(const std::string& run, const std::string& step,
                                const WireProgress& progress) {
  json::object line{{"type", "progress"}, {"run", run}, {"step", step}};
  for (const auto& field : EncodeProgress(progress)) line[field.key()] = field.value();
  return line;
}

std::string ProgressLineStep(const json::object& line) { return WireFields{line}.Str("step"); }

json::object EncodeSnapshotLine(const WireRun& run) {
  return {{"ok", true}, {"type", "snapshot"}, {"run", EncodeRun(run)}};
}

json::object EncodeEndLine(const WireRun& run) {
  return {{"type", "end"}, {"run", EncodeRun(run)}};
}

WireRun LineRun(const json::object& line) {
  const json::object* run = WireFields{line}.Object("run");
  return run ? DecodeRun(*run) : WireRun{};
}

json::object EncodeLogStart(const std::string& run, const std::string& step,
                            const std::string& path) {
  return {{"ok", true}, {"type", "start"}, {"run", run}, {"step", step}, {"path", path}};
}

json::object EncodeLogData(const std::string& text, const std::optional<LogPosition>& end) {
  json::object o{{"type", "data"}, {"text", text}};
  if (end) {
    o["file"] = end->file;
    o["offset"] = end->offset;
  }
  return o;
}

std::optional<LogPosition> LogDataEnd(const json::object& line) { return DecodeLogPosition(line); }

json::object EncodeLogPosition(const LogPosition& p) {
  return {{"file", p.file}, {"offset", p.offset}};
}

std::optional<LogPosition> DecodeLogPosition(const json::value& value) {
  const json::object* o = value.if_object();
  if (!o) return std::nullopt;
  std::optional<std::int64_t> file = WireFields{*o}.OptInt("file");
  std::optional<std::int64_t> offset = WireFields{*o}.OptInt("offset");
  if (!file || !offset || *file < 0 || *offset < 0) return std::nullopt;
  return LogPosition{static_cast<std::uint64_t>(*file), static_cast<std::uint64_t>(*offset)};
}

json::object EncodeLogEnd(const std::string& run, const std::string& step,
                          const std::string& state) {
  return {{"type", "end"}, {"run", run}, {"step", step}, {"state", state}};
}

std::string LogDataText(const json::object& line) { return WireFields{line}.Str("text"); }

void AddLogMarks(json::object& o, const LogMarks& marks, std::uint64_t from, size_t base,
                 bool times) {
  auto at = [&](std::uint64_t offset) { return base + (offset > from ? offset - from : 0); };
  json::array& attempts =
      o["attempts"].is_array() ? o["attempts"].as_array() : o["attempts"].emplace_array();
  for (const AttemptMark& a : marks.attempts)
    attempts.push_back(json::object{{"at", at(a.offset)},
                                    {"attempt", a.attempt},
                                    {"of", a.of},
                                    {"started_at_ms", a.started_at_ms}});
  if (!times) return;
  json::array& list = o["times"].is_array() ? o["times"].as_array() : o["times"].emplace_array();
  for (const TimeMark& t : marks.times) list.push_back(json::array{at(t.offset), t.at_ms});
}

TextMarks DecodeTextMarks(const json::object& o) {
  TextMarks marks;
  auto array = [&](std::string_view key) -> const json::array* {
    const json::value* v = o.if_contains(key);
    return v ? v->if_array() : nullptr;
  };
  if (const json::array* attempts = array("attempts")) {
    for (const json::value& v : *attempts) {
      if (!v.is_object()) continue;
      WireFields f{v.as_object()};
      marks.attempts.push_back(
          {static_cast<size_t>(f.Int("at")),
           AttemptMark{0, f.Int("started_at_ms"), static_cast<int>(f.Int("attempt")),
                       static_cast<int>(f.Int("of"))}});
    }
  }
  if (const json::array* times = array("times")) {
    for (const json::value& v : *times) {
      const json::array* pair = v.if_array();
      if (!pair || pair->size() != 2 || !(*pair)[0].is_number() || !(*pair)[1].is_number())
        continue;
      marks.times.push_back({static_cast<size_t>((*pair)[0].to_number<std::int64_t>()),
                             (*pair)[1].to_number<std::int64_t>()});
    }
  }
  return marks;
}

json::object EncodeMissed(const WireMissed& m) {
  return {{"type", "missed"},       {"events", m.events},     {"first_seq", m.first_seq},
          {"last_seq", m.last_seq}, {"progress", m.progress}, {"bytes", m.bytes},
          {"other", m.other}};
}

WireMissed DecodeMissed(const json::object& line) {
  WireFields f{line};
  return {f.Int("events"),   f.Int("first_seq"), f.Int("last_seq"),
          f.Int("progress"), f.Int("bytes"),     f.Int("other")};
}

std::string DescribeMissed(const WireMissed& m) {
  std::vector<std::string> parts;
  auto count = [](std::int64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  if (m.events > 0) {
    std::string seqs = m.first_seq == m.last_seq ? "seq " + std::to_string(m.first_seq)
                                                 : "seq " + std::to_string(m.first_seq) + "–" +
                                                       std::to_string(m.last_seq);
    parts.push_back(count(m.events, "event", "events") + " (" + seqs + ")");
  }
  if (m.progress > 0) parts.push_back(count(m.progress, "progress update", "progress updates"));
  if (m.bytes > 0) parts.push_back(FormatSize(static_cast<std::uint64_t>(m.bytes)) + " of output");
  if (m.other > 0) parts.push_back(count(m.other, "other line", "other lines"));
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text.empty() ? "nothing" : text;
}

}  // namespace deployd
