#include "util/pattern.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>

#include "util/utf8_text.h"

namespace deployd {
namespace {

RE2::Options PatternOptions() {
  RE2::Options options;
  options.set_log_errors(false);  // every problem is returned to the caller
  options.set_max_mem(kMaxPatternMemory);
  return options;
}

// How deeply the groups of `pattern` nest: each '(' that is not escaped, quoted (\Q…\E) or in
// a character class opens one. RE2 checks the syntax itself; this only bounds the depth.
int GroupNesting(std::string_view p) {
  int depth = 0;
  int deepest = 0;
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      if (p.substr(i, 2) == "\\Q") {
        std::size_t end = p.find("\\E", i + 2);
        i = end == std::string_view::npos ? p.size() : end + 1;
      } else {
        ++i;
      }
    } else if (in_class) {
      if (p.substr(i, 2) == "[:") {
        std::size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) i = end + 1;
      } else if (p[i] == ']') {
        in_class = false;
      }
    } else if (p[i] == '[') {
      in_class = true;
      // A ']' first in the class ("[]a]", "[^]a]") is a member, not its end.
      if (i + 1 < p.size() && p[i + 1] == '^') ++i;
      if (i + 1 < p.size() && p[i + 1] == ']') ++i;
    } else if (p[i] == '(') {
      deepest = std::max(deepest, ++depth);
    } else if (p[i] == ')') {
      depth = std::max(depth - 1, 0);
    }
  }
  return deepest;
}

// RE2's complaint, said the way an operator coming from Python or PCRE needs to hear it.
std::string CompileProblem(std::string_view pattern, const RE2& re) {
  const std::string& arg = re.error_arg();
  constexpr std::string_view kRe2 = " (patterns are RE2 syntax)";
  switch (re.error_code()) {
    case RE2::ErrorBadEscape:
      if (arg.size() >= 2 && arg[1] >= '1' && arg[1] <= '9')
        return "back-references (" + arg + ") are not supported" + std::string(kRe2);
      break;
    case RE2::ErrorBadPerlOp:
      if (arg.starts_with("(?=") || arg.starts_with("(?!"))
        return "lookahead (" + arg + ") is not supported" + std::string(kRe2);
      if (pattern.find("(?<=") != std::string_view::npos ||
          pattern.find("(?<!") != std::string_view::npos)
        return "lookbehind ((?<= or (?<!) is not supported" + std::string(kRe2);
      if (arg.starts_with("(?<"))
        return "a named group is written (?P<name>...)" + std::string(kRe2);
      break;
    case RE2::ErrorPatternTooLarge:
      return "too large once compiled (over " + std::to_string(kMaxPatternMemory >> 20) + "MiB)";
    default:
      break;
  }
  return re.error();
}

// Why `pattern` is refused before RE2 sees it, or "".
std::string ShapeProblem(std::string_view pattern) {
  if (pattern.size() > kMaxPatternBytes)
    return "longer than " + std::to_string(kMaxPatternBytes) + " bytes";
  if (FirstInvalidUtf8(pattern) != std::string_view::npos) return "not valid UTF-8";
  if (GroupNesting(pattern) > kMaxPatternNesting)
    return "groups nested deeper than " + std::to_string(kMaxPatternNesting);
  return "";
}

// `pattern` compiled, or why it cannot be.
std::unique_ptr<RE2> CompileOne(std::string_view pattern, std::string& problem) {
  problem = ShapeProblem(pattern);
  if (!problem.empty()) return nullptr;
  auto re = std::make_unique<RE2>(pattern, PatternOptions());
  if (re->ok()) return re;
  problem = CompileProblem(pattern, *re);
  return nullptr;
}

std::string TooLargeTogether() {
  return "the patterns together are too large once compiled (over " +
         std::to_string(kMaxPatternMemory >> 20) + "MiB)";
}

}  // namespace

CheckedPattern CheckPattern(std::string_view pattern) {
  CheckedPattern checked;
  if (std::unique_ptr<RE2> re = CompileOne(pattern, checked.problem))
    checked.instructions = re->ProgramSize();
  return checked;
}

std::string SetProblem(std::int64_t instructions) {
  return instructions > kMaxSetInstructions ? TooLargeTogether() : "";
}

struct PatternSet::Impl {
  Impl() : set(PatternOptions(), RE2::UNANCHORED) {}
  RE2::Set set;
  // Each pattern on its own: where the first one matched, and the matching itself should the
  // set's DFA run out of memory.
  std::vector<std::unique_ptr<RE2>> each;
};

Result<PatternSet> PatternSet::Compile(std::span<const std::string> patterns) {
  PatternSet out;
  if (patterns.empty()) return out;
  auto impl = std::make_shared<Impl>();
  std::int64_t instructions = 0;
  for (const std::string& pattern : patterns) {
    std::string problem;
    std::unique_ptr<RE2> re = CompileOne(pattern, problem);
    if (!re) return Status::Error("invalid pattern '" + pattern + "': " + problem);
    instructions += re->ProgramSize();
    impl->each.push_back(std::move(re));
    impl->set.Add(pattern, &problem);
  }
  if (!SetProblem(instructions).empty() || !impl->set.Compile())
    return Status::Error(TooLargeTogether());
  out.impl_ = std::move(impl);
  return out;
}

std::optional<PatternMatch> PatternSet::FirstMatch(std::string_view text) const {
  if (!impl_) return std::nullopt;
  // RE2 matches UTF-8, where `.` does not span an invalid byte: each one is matched as ASCII's
  // SUB, a character of the same length, so that offsets still point into `text`.
  std::string valid;
  if (std::size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
    valid = text;
    while (bad != std::string_view::npos) {
      valid[bad] = '\x1a';
      std::size_t next = FirstInvalidUtf8(std::string_view(valid).substr(bad + 1));
      bad = next == std::string_view::npos ? next : bad + 1 + next;
    }
    text = valid;
  }
  std::vector<int> matched;
  RE2::Set::ErrorInfo error{RE2::Set::kNoError};
  std::size_t first = impl_->each.size();
  if (impl_->set.Match(text, &matched, &error)) {
    first = static_cast<std::size_t>(*std::min_element(matched.begin(), matched.end()));
  } else if (error.kind != RE2::Set::kNoError) {
    // The set's DFA ran out of its memory on this text: each pattern alone falls back to a
    // slower linear matcher when its own DFA does.
    for (first = 0; first < impl_->each.size(); ++first)
      if (RE2::PartialMatch(text, *impl_->each[first])) break;
  }
  if (first == impl_->each.size()) return std::nullopt;
  re2::StringPiece where;
  PatternMatch match;
  match.index = first;
  if (impl_->each[first]->Match(text, 0, text.size(), RE2::UNANCHORED, &where, 1)) {
    match.offset = static_cast<std::size_t>(where.data() - text.data());
    match.length = where.size();
  }
  return match;
}

Result<PatternSet> CompilePattern(std::string_view pattern) {
  std::string one[] = {std::string(pattern)};
  return PatternSet::Compile(one);
}

}  // namespace deployd
