#include "util/json_fields.h"

#include <boost/json.hpp>

namespace deployd {

namespace json = boost::json;

std::string JsonFields::Str(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

bool JsonFields::Bool(std::string_view key, bool fallback) const {
  const json::value* v = o.if_contains(key);
  return v && v->is_bool() ? v->as_bool() : fallback;
}

std::optional<std::uint64_t> JsonFields::U64(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  if (v && v->is_uint64()) return v->as_uint64();
  if (v && v->is_int64() && v->as_int64() >= 0) return static_cast<std::uint64_t>(v->as_int64());
  return std::nullopt;
}

Duration JsonFields::Ms(std::string_view key, Duration fallback) const {
  std::optional<std::uint64_t> ms = U64(key);
  return ms ? Duration(static_cast<std::int64_t>(*ms)) : fallback;
}

std::vector<std::string> JsonFields::Strs(std::string_view key) const {
  std::vector<std::string> out;
  const json::value* v = o.if_contains(key);
  if (v && v->is_array())
    for (const auto& e : v->as_array())
      if (e.is_string()) out.emplace_back(e.as_string());
  return out;
}

std::map<std::string, std::string> JsonFields::StrMap(std::string_view key) const {
  std::map<std::string, std::string> out;
  const json::value* v = o.if_contains(key);
  if (v && v->is_object())
    for (const auto& [k, e] : v->as_object())
      if (e.is_string()) out[std::string(k)] = std::string(e.as_string());
  return out;
}

std::vector<int> JsonFields::Ints(std::string_view key) const {
  std::vector<int> out;
  const json::value* v = o.if_contains(key);
  if (v && v->is_array())
    for (const auto& e : v->as_array())
      if (e.is_int64()) out.push_back(static_cast<int>(e.as_int64()));
  return out;
}

json::array JsonStrings(const std::vector<std::string>& values) {
  json::array a;
  for (const auto& v : values) a.emplace_back(v);
  return a;
}

json::object JsonStringMap(const std::map<std::string, std::string>& values) {
  json::object o;
  for (const auto& [k, v] : values) o[k] = v;
  return o;
}

json::array JsonInts(const std::vector<int>& values) {
  json::array a;
  for (int v : values) a.emplace_back(v);
  return a;
}

Result<json::object> ParseJsonObject(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object())
    return Status::Error("invalid " + std::string(what) + " request (expected a JSON object)");
  return std::move(v.as_object());
}

}  // namespace deployd
