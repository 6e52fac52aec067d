#include "protocol/wire_fields.h"

namespace deployd {

namespace json = boost::json;

std::string WireFields::Str(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

std::int64_t WireFields::Int(std::string_view key) const { return OptInt(key).value_or(0); }

std::optional<std::int64_t> WireFields::OptInt(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (v->is_double()) return static_cast<std::int64_t>(v->as_double());
  return std::nullopt;
}

std::optional<double> WireFields::Number(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64()) return static_cast<double>(v->as_int64());
  if (v->is_uint64()) return static_cast<double>(v->as_uint64());
  if (v->is_double()) return v->as_double();
  return std::nullopt;
}

std::optional<json::value> WireFields::Value(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  if (!v) return std::nullopt;
  return *v;
}

const json::object* WireFields::Object(std::string_view key) const {
  const json::value* v = o.if_contains(key);
  return v ? v->if_object() : nullptr;
}

}  // namespace deployd
