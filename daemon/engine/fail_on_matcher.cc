#include "engine/fail_on_matcher.h"

#include <spdlog/spdlog.h>

#include "util/utf8_text.h"

namespace deployd {

FailOnMatcher::FailOnMatcher(const std::vector<FailPattern>& patterns) {
  std::vector<std::string> texts;
  for (const FailPattern& p : patterns) {
    patterns_.push_back(&p);
    texts.push_back(p.pattern);
  }
  Result<PatternSet> set = PatternSet::Compile(texts);
  if (set.ok()) {
    set_ = std::move(set.value());
  } else {
    // The parser refuses what does not compile; a plan stored by an older deployd may not.
    spdlog::error("fail_on: {}", set.status().message());
    patterns_.clear();
  }
}

std::optional<FailOnHit> FailOnMatcher::Match(std::string_view line) const {
  std::optional<PatternMatch> match = set_.FirstMatch(line);
  if (!match) return std::nullopt;
  return FailOnHit{patterns_[match->index],
                   ValidUtf8(QuoteAround(line, match->offset, kMaxQuotedLine))};
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
