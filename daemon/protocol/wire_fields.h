// WireFields: reading the fields of a line deployd wrote to its socket (protocol.h), on either
// side of the connection. A line is never written by hand, so a missing field, or one of
// another type, reads as empty ("" or 0 or unknown) rather than as an error: a client of an
// older deployd shows what it can. Numbers are read whether they came as integers or doubles.
#ifndef DEPLOYD_PROTOCOL_WIRE_FIELDS_H_
#define DEPLOYD_PROTOCOL_WIRE_FIELDS_H_

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deployd {

struct WireFields {
  const boost::json::object& o;

  std::string Str(std::string_view key) const;
  std::int64_t Int(std::string_view key) const;                    // 0 when absent or not a number
  std::optional<std::int64_t> OptInt(std::string_view key) const;  // absent, null: unknown
  std::optional<double> Number(std::string_view key) const;
  // A present field as it is (an object, say); absent: unknown.
  std::optional<boost::json::value> Value(std::string_view key) const;
  // The field when it is an object, else nullptr.
  const boost::json::object* Object(std::string_view key) const;
};

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_WIRE_FIELDS_H_
