// Patterns: the regular expressions of plans (`fail_on`, `output_matches`, `kill` and
// `process` matches) and of deployd's own output readers, in RE2 syntax. RE2 matches in time
// linear in the text with bounded memory and never recurses on its input, so no line a child
// prints can stall or crash the daemon. "(?i)" makes what follows it case-insensitive.
//
// A pattern is refused (PatternProblem) when RE2 cannot take it (a back-reference or
// lookaround: they need backtracking), or when it is over the bounds below. Compiled patterns
// are immutable and may be shared between threads.
#ifndef DEPLOYD_UTIL_PATTERN_H_
#define DEPLOYD_UTIL_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace re2 {
class RE2;
}

namespace deployd {

// The bounds of one pattern: its text, how deeply its groups nest, and the memory RE2 may use
// for its compiled program and the cache it matches with (RE2's default; a pattern whose
// program does not fit is refused). The patterns of one PatternSet share one such budget.
inline constexpr std::size_t kMaxPatternBytes = 4096;
inline constexpr int kMaxPatternNesting = 32;
inline constexpr std::int64_t kMaxPatternMemory = 8 << 20;

// A pattern checked: why it cannot be used — "back-references (\1) are not supported (patterns
// are RE2 syntax)", "missing ): (", "groups nested deeper than 32" — or "" when it can, and then
// the size of its compiled program in RE2 instructions. The problem does not quote the pattern.
struct CheckedPattern {
  std::string problem;
  std::int64_t instructions = 0;
};
CheckedPattern CheckPattern(std::string_view pattern);
inline std::string PatternProblem(std::string_view pattern) {
  return CheckPattern(pattern).problem;
}

// RE2::Set does not hold its program to max_mem: the sizes of its patterns' programs, added up,
// are held to about kMaxPatternMemory (some 16 bytes an instruction between the set and each
// pattern kept on its own). Why patterns of `instructions` in all cannot be one set, or "".
inline constexpr std::int64_t kMaxSetInstructions = kMaxPatternMemory / 16;
std::string SetProblem(std::int64_t instructions);

// Where a pattern matched in a text (byte offsets).
struct PatternMatch {
  std::size_t index = 0;  // which pattern of the set
  std::size_t offset = 0;
  std::size_t length = 0;
};

// Patterns searched (unanchored) in a text all at once: the text is scanned once, whatever
// their number, and the first pattern in the order given that matches is named. A text that is
// not valid UTF-8 is matched as if each invalid byte were a control character (SUB), so that
// `.` still spans it.
class PatternSet {
 public:
  PatternSet() = default;
  // Each pattern must be one PatternProblem() accepts; the set must fit kMaxPatternMemory.
  static Result<PatternSet> Compile(std::span<const std::string> patterns);

  bool empty() const { return impl_ == nullptr; }
  // The first pattern that matches `text` and where, or nullopt.
  std::optional<PatternMatch> FirstMatch(std::string_view text) const;
  bool Matches(std::string_view text) const { return FirstMatch(text).has_value(); }

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// One pattern: a set of one.
Result<PatternSet> CompilePattern(std::string_view pattern);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_PATTERN_H_
