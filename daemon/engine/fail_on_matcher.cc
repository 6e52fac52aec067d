#include "engine/fail_on_matcher.h"

namespace deployd {

namespace {

std::regex CompileFailOn(const std::string& pattern) {
  // "(?i)" (Python's spelling) selects icase.
  auto flags = std::regex::ECMAScript | std::regex::optimize;
  if (pattern.rfind("(?i)", 0) == 0)
    return std::regex(pattern.substr(4), flags | std::regex::icase);
  return std::regex(pattern, flags);
}

}  // namespace

FailOnMatcher::FailOnMatcher(const std::vector<FailPattern>& patterns) {
  for (const FailPattern& p : patterns) compiled_.emplace_back(&p, CompileFailOn(p.pattern));
}

const FailPattern* FailOnMatcher::Match(std::string_view line) const {
  for (const auto& [pattern, re] : compiled_)
    if (std::regex_search(line.begin(), line.end(), re)) return pattern;
  return nullptr;
}

StepEventInfo FailOnEvent(const FailPattern& pattern, std::string_view line) {
  StepEventInfo info;
  if (pattern.explanation.empty()) {
    info.reason = "output matched fail_on '" + pattern.pattern + "': " + std::string(line);
  } else {
    info.reason = pattern.explanation + ": " + std::string(line);
    info.evidence["explanation"] = pattern.explanation;
  }
  info.final = pattern.fatal;
  info.evidence["fail_on"] = pattern.pattern;
  info.evidence["line"] = line;
  return info;
}

}  // namespace deployd
