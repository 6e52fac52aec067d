// Answer: the envelope of every answer deployd gives (protocol.h): {"ok": true, …} or
// {"ok": false, "error": "one line for humans", …}, "code": "unauthorized" when the peer may
// not talk to deployd at all. Plain values, no I/O.
#ifndef DEPLOYD_PROTOCOL_ANSWER_H_
#define DEPLOYD_PROTOCOL_ANSWER_H_

#include <boost/json/object.hpp>
#include <string>

namespace deployd {

boost::json::object OkAnswer();
boost::json::object ErrorAnswer(const std::string& message);

// An answer or stream line that says {"ok": false}.
bool IsRefusal(const boost::json::object& line);

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_ANSWER_H_
