// A step's fail_on patterns against output lines (engine/fail_on_matcher.h), and what a
// matching line says about the step.
#include "engine/fail_on_matcher.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace deployd;
namespace json = boost::json;

namespace {

FailPattern Pattern(const std::string& pattern, const std::string& explanation = "",
                    bool fatal = false) {
  FailPattern p;
  p.pattern = pattern;
  p.explanation = explanation;
  p.fatal = fatal;
  return p;
}

}  // namespace

TEST_CASE("fail_on matcher: the first pattern a line matches, case-insensitive with (?i)") {
  std::vector<FailPattern> patterns = {Pattern("Traceback"), Pattern("(?i)out of memory")};
  FailOnMatcher matcher(patterns);
  CHECK_FALSE(matcher.empty());
  CHECK(matcher.Match("all is well") == nullptr);
  CHECK(matcher.Match("Traceback (most recent call last):") == &patterns[0]);
  CHECK(matcher.Match("traceback") == nullptr);
  CHECK(matcher.Match("CUDA OUT OF MEMORY") == &patterns[1]);
  CHECK(FailOnMatcher().empty());
}

TEST_CASE("fail_on matcher: a matched line's reason and evidence") {
  StepEventInfo plain = FailOnEvent(Pattern("Traceback"), "Traceback (most recent call last):");
  CHECK(plain.reason == "output matched fail_on 'Traceback': Traceback (most recent call last):");
  CHECK(json::serialize(plain.evidence) ==
        R"({"fail_on":"Traceback","line":"Traceback (most recent call last):"})");
  CHECK_FALSE(plain.final);

  StepEventInfo named =
      FailOnEvent(Pattern("CUDA out of memory", "the GPU ran out of memory", true),
                  "torch.OutOfMemoryError: CUDA out of memory");
  CHECK(named.reason == "the GPU ran out of memory: torch.OutOfMemoryError: CUDA out of memory");
  CHECK(json::serialize(named.evidence) ==
        R"({"explanation":"the GPU ran out of memory","fail_on":"CUDA out of memory",)"
        R"("line":"torch.OutOfMemoryError: CUDA out of memory"})");
  CHECK(named.final);
}
