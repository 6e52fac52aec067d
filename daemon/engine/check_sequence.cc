#include "engine/check_sequence.h"

#include <string>

namespace deployd {

boost::asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks) {
  CheckOutcome last;
  last.passed = true;
  for (const Check& check : checks) {
    last = co_await RunCheck(check);
    if (!last.passed) {
      last.evidence["check"] = DescribeCheck(check);
      last.evidence["summary"] = last.summary;
      last.evidence["attempts"] = last.attempts;
      co_return last;
    }
  }
  last.summary =
      std::to_string(checks.size()) + (checks.size() == 1 ? " check" : " checks") + " passed";
  co_return last;
}

}  // namespace deployd
