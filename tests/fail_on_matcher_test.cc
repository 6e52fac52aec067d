// A step's fail_on patterns against output lines (engine/fail_on_matcher.h), and what a
// matching line says about the step.
#include "engine/fail_on_matcher.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "plan/fail_on_sets.h"

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
  CHECK_FALSE(matcher.Match("all is well"));
  CHECK(matcher.Match("Traceback (most recent call last):")->pattern == &patterns[0]);
  CHECK_FALSE(matcher.Match("traceback"));
  CHECK(matcher.Match("CUDA OUT OF MEMORY")->pattern == &patterns[1]);
  CHECK(matcher.Match("CUDA OUT OF MEMORY")->line == "CUDA OUT OF MEMORY");
  CHECK(FailOnMatcher().empty());
  CHECK_FALSE(FailOnMatcher().Match("anything"));
}

TEST_CASE("fail_on matcher: of several patterns that match a line, the first in plan order") {
  std::vector<FailPattern> patterns = {Pattern("engine"), Pattern("core"), Pattern("Engine core")};
  FailOnMatcher matcher(patterns);
  CHECK(matcher.Match("Engine core initialization failed")->pattern == &patterns[1]);
  CHECK(matcher.Match("the engine core died")->pattern == &patterns[0]);
}

// libstdc++'s std::regex recursed once per character: this line crashed deployd.
TEST_CASE("fail_on matcher: a 64 KiB line with .* patterns and the vllm set, quoted cut") {
  std::vector<FailPattern> patterns = {Pattern("(?i)error.*cuda")};
  Watch vllm;
  AddFailOnSet("vllm", {}, vllm);
  patterns.insert(patterns.end(), vllm.fail_on.begin(), vllm.fail_on.end());
  FailOnMatcher matcher(patterns);
  std::string blob(64 * 1024 - 100, 'x');
  CHECK_FALSE(matcher.Match("config: {" + blob + "}"));
  CHECK_FALSE(matcher.Match("Model architectures [" + blob));

  std::optional<FailOnHit> hit = matcher.Match(blob + " ERROR: no CUDA device " + blob);
  REQUIRE(hit);
  CHECK(hit->pattern == &patterns[0]);
  CHECK(hit->line.size() <= kMaxQuotedLine);
  // From a little before where the pattern matched, with "…" where the line was cut.
  CHECK(hit->line.starts_with("\xE2\x80\xA6xxx"));
  CHECK(hit->line.find(" ERROR: no CUDA") != std::string::npos);
  CHECK(hit->line.ends_with("xxx\xE2\x80\xA6"));

  hit = matcher.Match("Model architectures [" + blob + "] are not supported for now");
  REQUIRE(hit);
  CHECK(hit->pattern->set == "vllm");
  CHECK(hit->line.starts_with("Model architectures [xxx"));
  CHECK(hit->line.size() <= kMaxQuotedLine);
}

TEST_CASE("fail_on matcher: a line that is not valid UTF-8 still matches across the bad bytes") {
  std::vector<FailPattern> patterns = {Pattern("error.*cuda")};
  FailOnMatcher matcher(patterns);
  std::optional<FailOnHit> hit = matcher.Match("error \xff\xfe in cuda");
  REQUIRE(hit);
  // Quoted as valid UTF-8: the evidence is JSON.
  CHECK(hit->line == "error \xEF\xBF\xBD\xEF\xBF\xBD in cuda");
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

TEST_CASE("fail_on matcher: the kernel's lines meet only the patterns meant for them") {
  Watch watch;
  watch.fail_on.push_back(Pattern("fallen"));  // the plan's own: for the action's output
  AddFailOnSet("vllm", SourcePos{}, watch);
  FailOnMatcher kernel = FailOnMatcher::ForKernel(watch.fail_on);
  REQUIRE_FALSE(kernel.empty());
  const std::string xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.";
  std::optional<FailOnHit> hit = kernel.Match(xid);
  REQUIRE(hit);
  CHECK(hit->pattern->kernel);
  CHECK(hit->pattern->set == "vllm");
  CHECK_FALSE(kernel.Match("CUDA out of memory"));  // vLLM's line, not the kernel's
  // On the output, the plan's own pattern comes first, as ever.
  CHECK(FailOnMatcher(watch.fail_on).Match(xid)->pattern == &watch.fail_on[0]);

  StepEventInfo info = KernelFailOnEvent(*hit->pattern, hit->line);
  CHECK(info.reason ==
        "a GPU hardware fault (Xid): the GPU may need a reset or the host a reboot: kernel: " +
            xid);
  CHECK(info.final);
  CHECK(info.evidence.at("from") == "kernel");
  CHECK(info.evidence.at("line").as_string() == xid);
  // A step without such patterns follows no kernel log.
  CHECK(FailOnMatcher::ForKernel({Pattern("fallen")}).empty());
}
