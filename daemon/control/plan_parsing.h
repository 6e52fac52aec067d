// Plans that clients submit (`apply`, `plan`) are parsed on a thread of their own, never on the
// daemon's: within the limits of plan/plan_limits.h a plan still costs up to a few hundred
// milliseconds of CPU (yaml-cpp alone spends ~0.2 s on 50,000 nodes), and for that long the
// daemon's one thread would answer no one — not `status`, not a follower, not systemd's
// watchdog.
//
// Why a thread, in a daemon whose state is owned by one thread: parsing is a pure function of
// its input — the text, the file's name, the variables — to a value (ParsePlan touches no state
// of the daemon, and RE2, which it compiles patterns with, is thread-safe), so the parsing
// thread owns nothing and shares nothing; the result is handed back to the daemon's io_context,
// where everything that changes state happens, as before. A child process (as for probes,
// `deployd --probe`) is what blocking or unbounded work needs, work that may have to be killed;
// a parse is bounded, and a child would have to send the whole Plan back, in a form of its own.
//
// One thread: parses are done one at a time, in the order asked, so that at most one plan's
// memory is being parsed at once. It is started at the first parse (the children deployd runs
// as never start it) and joined at exit. Plans read back from the store (a restart, a retry)
// are parsed where they are needed, on the daemon's thread: they were accepted once, so they are
// within the same limits.
#ifndef DEPLOYD_CONTROL_PLAN_PARSING_H_
#define DEPLOYD_CONTROL_PLAN_PARSING_H_

#include <boost/asio/awaitable.hpp>
#include <map>
#include <string>

#include "plan/plan_parser.h"

namespace deployd {

// ParsePlan(text, file, vars) done on the parsing thread; the awaiting coroutine resumes on its
// own executor.
boost::asio::awaitable<ParseResult> ParsePlanAside(std::string text, std::string file,
                                                   std::map<std::string, std::string> vars);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_PLAN_PARSING_H_
