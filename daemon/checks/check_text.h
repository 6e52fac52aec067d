// How a check is named in what the probes report (checks.h): its kind, its target, the subject
// a summary starts with ("http GET http://…/health"), the evidence every outcome starts from,
// and excerpts of what a server or a program said, made valid UTF-8 for JSON. Shared by the
// probes; pure functions.
#ifndef DEPLOYD_CHECKS_CHECK_TEXT_H_
#define DEPLOYD_CHECKS_CHECK_TEXT_H_

#include <boost/json/object.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

// How much of a body or of a probe child's output evidence keeps.
inline constexpr size_t kBodyExcerptBytes = 512;

// The command as a shell would read it back: the script, or argv with words quoted as needed.
std::string CommandText(const Command& command);

// At most `max_bytes` of `text` as valid UTF-8 (invalid bytes become U+FFFD), with "…" when
// cut: a server's body or a program's output may be anything, and evidence is JSON text that
// clients decode strictly.
std::string Utf8Excerpt(std::string_view text, size_t max_bytes);

// "host:port", "[::1]:port" for an IPv6 literal.
std::string HostPort(const std::string& host, int port);
// Where a tcp check connects (127.0.0.1 unless given) and a port_free check binds (0.0.0.0).
std::string TcpHost(const Check& check);
std::string BindHost(const Check& check);

// The object of the check, for evidence's "target": "GET http://…/health", "127.0.0.1:5432".
std::string CheckTarget(const Check& check);
// What a summary starts with: the kind and its object, without the expectation
// ("tcp 127.0.0.1:5432", "run 'python3 -c …'").
std::string CheckSubject(const Check& check);

// {"check": kind, "target": CheckTarget(check)}
boost::json::object CheckEvidence(const Check& check);
// The outcome whose summary is "<subject>: <detail>".
CheckOutcome MakeOutcome(const Check& check, bool passed, const std::string& detail,
                         boost::json::object evidence);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_CHECK_TEXT_H_
