// JsonFields: reading the fields of a JSON object that deployd itself wrote (a request to a
// built-in action's child, a record in the store): a missing or mistyped field keeps the
// caller's default, because such objects are never written by hand. Plus the few builders
// that go with it.
#ifndef DEPLOYD_UTIL_JSON_FIELDS_H_
#define DEPLOYD_UTIL_JSON_FIELDS_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

struct JsonFields {
  const boost::json::object& o;

  std::string Str(std::string_view key) const;
  bool Bool(std::string_view key, bool fallback) const;
  std::optional<std::uint64_t> U64(std::string_view key) const;
  Duration Ms(std::string_view key, Duration fallback) const;
  std::vector<std::string> Strs(std::string_view key) const;
  std::map<std::string, std::string> StrMap(std::string_view key) const;
  std::vector<int> Ints(std::string_view key) const;
};

boost::json::array JsonStrings(const std::vector<std::string>& values);
boost::json::object JsonStringMap(const std::map<std::string, std::string>& values);
boost::json::array JsonInts(const std::vector<int>& values);

// `text` as one JSON object; else "invalid WHAT request (expected a JSON object)".
Result<boost::json::object> ParseJsonObject(std::string_view text, std::string_view what);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_JSON_FIELDS_H_
