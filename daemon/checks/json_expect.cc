#include "checks/json_expect.h"

#include <boost/json.hpp>
#include <charconv>

namespace deployd {

namespace json = boost::json;

namespace {

constexpr size_t kShownValues = 3;
constexpr size_t kShownChars = 80;

std::vector<const json::value*> Select(const json::value& root, std::string_view path) {
  std::vector<const json::value*> current = {&root};
  while (!path.empty()) {
    size_t dot = path.find('.');
    std::string_view segment = path.substr(0, dot);
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    std::vector<const json::value*> next;
    for (const json::value* v : current) {
      if (segment == "*") {
        if (v->is_array())
          for (const json::value& e : v->as_array()) next.push_back(&e);
        if (v->is_object())
          for (const auto& member : v->as_object()) next.push_back(&member.value());
      } else if (v->is_object()) {
        if (const json::value* m = v->as_object().if_contains(segment)) next.push_back(m);
      } else if (v->is_array()) {
        size_t index = 0;
        auto [end, ec] = std::from_chars(segment.data(), segment.data() + segment.size(), index);
        if (ec == std::errc() && end == segment.data() + segment.size() &&
            index < v->as_array().size())
          next.push_back(&v->as_array()[index]);
      }
    }
    current = std::move(next);
  }
  return current;
}

std::string Text(const json::value& v) {
  return v.is_string() ? std::string(v.as_string()) : json::serialize(v);
}

bool Equals(const json::value& v, const std::string& expected) { return Text(v) == expected; }

bool Contains(const json::value& v, const std::string& expected) {
  if (v.is_string()) return v.as_string().find(expected) != json::string::npos;
  if (v.is_array()) {
    for (const json::value& e : v.as_array())
      if (Equals(e, expected)) return true;
    return false;
  }
  if (v.is_object()) return v.as_object().contains(expected);
  return Equals(v, expected);
}

}  // namespace

std::string DescribeExpectation(const JsonExpectation& x) {
  return x.path + (x.op == JsonExpectation::Op::kEquals ? " equals '" : " contains '") + x.value +
         "'";
}

std::optional<std::string> FirstUnmetExpectation(std::string_view body,
                                                 const std::vector<JsonExpectation>& expectations) {
  if (expectations.empty()) return std::nullopt;
  boost::system::error_code ec;
  json::value root = json::parse(body, ec);
  if (ec) return "the body is not JSON (" + ec.message() + ")";
  for (const JsonExpectation& x : expectations) {
    std::vector<const json::value*> values = Select(root, x.path);
    if (values.empty()) return "json " + x.path + ": nothing at this path";
    bool met = false;
    for (const json::value* v : values) {
      met = x.op == JsonExpectation::Op::kEquals ? Equals(*v, x.value) : Contains(*v, x.value);
      if (met) break;
    }
    if (met) continue;
    std::string saw;
    for (size_t i = 0; i < values.size() && i < kShownValues; ++i) {
      std::string shown = json::serialize(*values[i]);
      if (shown.size() > kShownChars) shown = shown.substr(0, kShownChars) + "…";
      saw += (i ? ", " : "") + shown;
    }
    if (values.size() > kShownValues) saw += ", …";
    return "json " + x.path + ": no value " +
           (x.op == JsonExpectation::Op::kEquals ? "equals '" : "contains '") + x.value +
           "' (saw " + saw + ")";
  }
  return std::nullopt;
}

}  // namespace deployd
