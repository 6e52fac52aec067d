#include "engine/fail_on_matcher.h"

#include <spdlog/spdlog.h>

#include "util/utf8_text.h"

namespace deployd {

FailOnMatcher::FailOnMatcher(const std::vector<FailPattern>& patterns) {
  for (const FailPattern& p : patterns) patterns_.push_back(&p);
}

FailOnMatcher FailOnMatcher::ForKernel(const std::vector<FailPattern>& patterns) {
  FailOnMatcher matcher;
  for (const FailPattern& p : patterns)
    if (p.kernel) matcher.patterns_.push_back(&p);
  return matcher;
}

std::optional<FailOnHit> FailOnMatcher::Match(std::string_view line) {
  if (!set_) {
    std::vector<std::string> texts;
    for (const FailPattern* p : patterns_) texts.push_back(p->pattern);
    Result<PatternSet> set = PatternSet::Compile(texts);
    // The parser has checked them; should they still not compile, no line matches.
    if (!set.ok()) spdlog::error("fail_on: {}", set.status().message());
    set_ = set.ok() ? std::move(set.value()) : PatternSet();
  }
  std::optional<PatternMatch> match = set_->FirstMatch(line);
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

StepEventInfo KernelFailOnEvent(const FailPattern& pattern, std::string_view line) {
  StepEventInfo info = FailOnEvent(pattern, "kernel: " + std::string(line));
  info.evidence["line"] = line;
  info.evidence["from"] = "kernel";
  return info;
}

}  // namespace deployd
