#include "checks/version.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

namespace deployd {
namespace {

constexpr std::int64_t kMinusInfinity = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kPlusInfinity = std::numeric_limits<std::int64_t>::max();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsSeparator(char c) { return c == '.' || c == '-' || c == '_'; }

// Reads digits at `pos`; saturates instead of overflowing (a version number has no business
// being that large, but it must not be undefined behaviour either).
std::int64_t ReadNumber(std::string_view s, size_t& pos) {
  std::int64_t n = 0;
  while (pos < s.size() && IsDigit(s[pos])) {
    if (n < kPlusInfinity / 10 - 10) n = n * 10 + (s[pos] - '0');
    ++pos;
  }
  return n;
}

std::string ReadWord(std::string_view s, size_t& pos) {
  std::string word;
  while (pos < s.size() && IsAlpha(s[pos]))
    word += static_cast<char>(std::tolower(static_cast<unsigned char>(s[pos++])));
  return word;
}

// PEP 440's sort key, as `packaging` builds it: the release without trailing zeros; a missing
// pre-release sorts after all pre-releases, except that a bare dev release (1.0.dev1) sorts
// before them; a missing post-release sorts first; a missing dev release sorts last.
struct VersionKey {
  std::int64_t epoch = 0;
  std::vector<std::int64_t> release;
  int pre_phase = 0;  // 0 a, 1 b, 2 rc; with the infinities below
  std::int64_t pre_number = 0;
  std::int64_t post = kMinusInfinity;
  std::int64_t dev = kPlusInfinity;

  auto Tie() const { return std::tie(epoch, release, pre_phase, pre_number, post, dev); }
};

constexpr int kNoPreBeforeAll = -1;
constexpr int kNoPreAfterAll = 3;

VersionKey ParseVersion(std::string_view s) {
  VersionKey key;
  size_t pos = 0;
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  if (pos < s.size() && (s[pos] == 'v' || s[pos] == 'V')) ++pos;

  size_t start = pos;
  std::int64_t first = ReadNumber(s, pos);
  if (pos < s.size() && s[pos] == '!' && pos > start) {
    key.epoch = first;
    ++pos;
    first = ReadNumber(s, pos);
  }
  key.release.push_back(first);
  while (pos + 1 < s.size() && s[pos] == '.' && IsDigit(s[pos + 1])) {
    ++pos;
    key.release.push_back(ReadNumber(s, pos));
  }
  while (key.release.size() > 1 && key.release.back() == 0) key.release.pop_back();
  if (key.release.size() == 1 && key.release[0] == 0) key.release.clear();

  std::optional<std::pair<int, std::int64_t>> pre;
  std::optional<std::int64_t> post;
  std::optional<std::int64_t> dev;
  while (pos < s.size() && s[pos] != '+') {
    size_t segment_start = pos;
    char separator = IsSeparator(s[pos]) ? s[pos++] : '\0';
    std::string word = ReadWord(s, pos);
    if (word.empty()) {
      // "1.0-3" is the implicit form of "1.0.post3".
      if (separator == '-' && pos < s.size() && IsDigit(s[pos]) && !post) {
        post = ReadNumber(s, pos);
        continue;
      }
      pos = segment_start;
      break;
    }
    if (pos < s.size() && IsSeparator(s[pos]) && pos + 1 < s.size() && IsDigit(s[pos + 1])) ++pos;
    std::int64_t number = ReadNumber(s, pos);
    if ((word == "a" || word == "alpha") && !pre) {
      pre.emplace(0, number);
    } else if ((word == "b" || word == "beta") && !pre) {
      pre.emplace(1, number);
    } else if ((word == "c" || word == "rc" || word == "pre" || word == "preview") && !pre) {
      pre.emplace(2, number);
    } else if ((word == "post" || word == "rev" || word == "r") && !post) {
      post = number;
    } else if (word == "dev" && !dev) {
      dev = number;
    } else {
      break;  // not PEP 440 from here on; order by what was read
    }
  }

  if (pre) {
    key.pre_phase = pre->first;
    key.pre_number = pre->second;
  } else {
    key.pre_phase = (!post && dev) ? kNoPreBeforeAll : kNoPreAfterAll;
  }
  if (post) key.post = *post;
  if (dev) key.dev = *dev;
  return key;
}

}  // namespace

int CompareVersions(std::string_view a, std::string_view b) {
  VersionKey ka = ParseVersion(a);
  VersionKey kb = ParseVersion(b);
  if (ka.Tie() < kb.Tie()) return -1;
  if (kb.Tie() < ka.Tie()) return 1;
  return 0;
}

std::optional<std::string> FindVersion(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!IsDigit(text[i])) continue;
    // Start only at the beginning of a number, never inside "x86_64" or "12.5.3"'s middle.
    if (i > 0 && (IsDigit(text[i - 1]) || text[i - 1] == '.' || text[i - 1] == '_')) continue;
    size_t end = i;
    while (end < text.size() && IsDigit(text[end])) ++end;
    if (end + 1 >= text.size() || text[end] != '.' || !IsDigit(text[end + 1])) {
      i = end;
      continue;
    }
    while (end < text.size() && (IsDigit(text[end]) || IsAlpha(text[end]) || text[end] == '.' ||
                                 text[end] == '+' || text[end] == '-'))
      ++end;
    while (end > i && (text[end - 1] == '.' || text[end - 1] == '+' || text[end - 1] == '-')) --end;
    return std::string(text.substr(i, end - i));
  }
  return std::nullopt;
}

}  // namespace deployd
