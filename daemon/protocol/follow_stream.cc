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

json::object EncodeLogData(const std::string& text) { return {{"type", "data"}, {"text", text}}; }

json::object EncodeLogEnd(const std::string& run, const std::string& step,
                          const std::string& state) {
  return {{"type", "end"}, {"run", run}, {"step", step}, {"state", state}};
}

std::string LogDataText(const json::object& line) { return WireFields{line}.Str("text"); }

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
