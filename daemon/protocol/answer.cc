#include "protocol/answer.h"

#include <boost/json.hpp>

namespace deployd {

namespace json = boost::json;

json::object OkAnswer() { return {{"ok", true}}; }

json::object ErrorAnswer(const std::string& message) { return {{"ok", false}, {"error", message}}; }

bool IsRefusal(const json::object& line) {
  const json::value* ok = line.if_contains("ok");
  return ok && ok->is_bool() && !ok->as_bool();
}

}  // namespace deployd
