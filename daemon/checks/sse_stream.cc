#include "checks/sse_stream.h"

#include <boost/json.hpp>

#include "checks/check_text.h"

namespace deployd {

namespace json = boost::json;

namespace {

constexpr std::size_t kChunkExcerptBytes = 200;

const json::object* ObjectAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_object() : nullptr;
}

std::string StringAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

// {"error": {"message": …}}, {"error": "…"} or vLLM's older {"object": "error", "message": …}.
std::string ErrorOf(const json::object& chunk) {
  if (const json::value* e = chunk.if_contains("error"); e && !e->is_null()) {
    if (e->is_string()) return std::string(e->as_string());
    if (e->is_object() && !StringAt(e->as_object(), "message").empty())
      return StringAt(e->as_object(), "message");
    return json::serialize(*e);
  }
  if (StringAt(chunk, "object") == "error") return StringAt(chunk, "message");
  return "";
}

}  // namespace

Status SseParser::Feed(std::string_view bytes, std::vector<std::string>& events) {
  while (!bytes.empty()) {
    std::size_t nl = bytes.find('\n');
    std::string_view part = bytes.substr(0, nl);
    if (line_.size() + part.size() + data_.size() > kMaxSseEventBytes)
      return Status::Error("a streamed event is larger than 1MiB");
    line_.append(part);
    if (nl == std::string_view::npos) break;
    bytes.remove_prefix(nl + 1);
    std::string_view line = line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Line(line, events);
    line_.clear();
  }
  return Status::Ok();
}

void SseParser::Finish(std::vector<std::string>& events) {
  if (!line_.empty()) {
    std::string_view line = line_;
    if (line.back() == '\r') line.remove_suffix(1);
    Line(line, events);
    line_.clear();
  }
  Line("", events);
}

void SseParser::Line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (!line.starts_with("data:")) return;  // a comment or a field a completion does not use
  std::string_view value = line.substr(5);
  if (value.starts_with(' ')) value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

Result<CompletionChunk> ReadCompletionChunk(std::string_view data) {
  CompletionChunk chunk;
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n'))
    trimmed.remove_suffix(1);
  if (trimmed == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  boost::system::error_code ec;
  json::value parsed = json::parse(data, ec);
  if (ec || !parsed.is_object())
    return Status::Error("not a JSON chunk: " + Utf8Excerpt(data, kChunkExcerptBytes));
  const json::object& o = parsed.as_object();
  chunk.error = ErrorOf(o);
  if (const json::object* usage = ObjectAt(o, "usage")) {
    if (const json::value* n = usage->if_contains("completion_tokens"); n && n->is_int64())
      chunk.completion_tokens = n->as_int64();
  }
  const json::value* choices = o.if_contains("choices");
  if (!choices || !choices->is_array() || choices->as_array().empty()) return chunk;
  const json::value& first = choices->as_array().front();
  if (!first.is_object()) return chunk;
  chunk.text = StringAt(first.as_object(), "text");
  if (const json::object* delta = ObjectAt(first.as_object(), "delta")) {
    chunk.text += StringAt(*delta, "content");
    chunk.reasoning = StringAt(*delta, "reasoning_content");
  }
  return chunk;
}

}  // namespace deployd
