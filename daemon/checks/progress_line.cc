#include "checks/progress_line.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace deployd {
namespace {

constexpr size_t kMaxLabel = 80;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAlnum(char c) { return IsDigit(c) || IsAlpha(c); }

struct Number {
  double value = 0;
  bool has_fraction = false;
  size_t end = 0;
};

// `D+(.D+)?` at i.
std::optional<Number> ReadNumber(std::string_view s, size_t i) {
  Number n;
  size_t j = i;
  while (j < s.size() && IsDigit(s[j])) n.value = n.value * 10 + (s[j++] - '0');
  if (j == i || j - i > 15) return std::nullopt;  // 15 digits: exact in a double
  if (j + 1 < s.size() && s[j] == '.' && IsDigit(s[j + 1])) {
    n.has_fraction = true;
    double scale = 0.1;
    for (++j; j < s.size() && IsDigit(s[j]); ++j, scale /= 10) n.value += (s[j] - '0') * scale;
  }
  n.end = j;
  return n;
}

struct Unit {
  double scale = 1;
  size_t end = 0;
};

// A size unit at i, optionally after one space: B, k/K/M/G/T/P[B], Ki/Mi/Gi/Ti/Pi[B]. It
// must not run on into a word ("5 Minutes", "3 GPUs" are not sizes).
std::optional<Unit> ReadUnit(std::string_view s, size_t i) {
  size_t j = i;
  if (j < s.size() && s[j] == ' ') ++j;
  if (j >= s.size()) return std::nullopt;
  static constexpr std::string_view kPrefixes = "kMGTP";
  Unit u;
  size_t start = j;
  char c = s[j] == 'K' ? 'k' : s[j];
  if (size_t p = kPrefixes.find(c); p != std::string_view::npos) {
    ++j;
    bool binary = j < s.size() && s[j] == 'i';
    if (binary) ++j;
    for (size_t k = 0; k <= p; ++k) u.scale *= binary ? 1024.0 : 1000.0;
    if (j < s.size() && s[j] == 'B') ++j;
  } else if (s[j] == 'B') {
    ++j;
  }
  if (j == start || (j < s.size() && IsAlpha(s[j]))) return std::nullopt;
  u.end = j;
  return u;
}

enum class Kind { kPercent, kPair };

struct Token {
  Kind kind;
  size_t begin = 0;
  size_t end = 0;
  double a = 0;  // percent, or done
  double b = 0;  // total
  bool sized = false;
};

// A number must not continue a word, a version, a path, a date or a time.
bool StartsToken(std::string_view s, size_t i) {
  if (!IsDigit(s[i])) return false;
  if (i == 0) return true;
  char p = s[i - 1];
  return !IsAlnum(p) && p != '.' && p != '/' && p != ':' && p != '-' && p != '_';
}

std::optional<Token> ReadToken(std::string_view s, size_t i) {
  std::optional<Number> n1 = ReadNumber(s, i);
  if (!n1) return std::nullopt;
  size_t j = n1->end;
  if (j < s.size() && s[j] == '%') {
    if (n1->value > 100 || (j + 1 < s.size() && IsAlnum(s[j + 1]))) return std::nullopt;
    return Token{Kind::kPercent, i, j + 1, n1->value, 0, false};
  }
  std::optional<Unit> u1 = ReadUnit(s, j);
  if (u1) j = u1->end;
  if (j >= s.size() || s[j] != '/') return std::nullopt;
  std::optional<Number> n2 = ReadNumber(s, j + 1);
  if (!n2) return std::nullopt;
  j = n2->end;
  std::optional<Unit> u2 = ReadUnit(s, j);
  if (u2) j = u2->end;
  if (j < s.size() && (IsAlnum(s[j]) || s[j] == '.' || s[j] == '/' || s[j] == ':'))
    return std::nullopt;
  bool sized = u1 || u2;
  if (!sized && (n1->has_fraction || n2->has_fraction)) return std::nullopt;
  // "453.6/906.4 MB": a unit written once applies to both sides.
  double done = n1->value * (u1 ? u1->scale : u2 ? u2->scale : 1);
  double total = n2->value * (u2 ? u2->scale : u1 ? u1->scale : 1);
  if (total <= 0 || done > total) return std::nullopt;
  return Token{Kind::kPair, i, j, done, total, sized};
}

char PrevNonSpace(std::string_view s, size_t i) {
  while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) --i;
  return i > 0 ? s[i - 1] : '\0';
}

char NextNonSpace(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i < s.size() ? s[i] : '\0';
}

bool AfterWordProgress(std::string_view s, size_t i) {
  while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == ':' || s[i - 1] == '=')) --i;
  constexpr std::string_view kWord = "progress";
  if (i < kWord.size()) return false;
  for (size_t k = 0; k < kWord.size(); ++k) {
    if (std::tolower(static_cast<unsigned char>(s[i - kWord.size() + k])) != kWord[k]) return false;
  }
  return true;
}

// In a place that only progress takes (see the header).
bool Placed(std::string_view s, const Token& t) {
  char prev = PrevNonSpace(s, t.begin);
  char next = NextNonSpace(s, t.end);
  if (t.kind == Kind::kPair)
    return t.sized || prev == '|' || ((prev == '[' || prev == '(') && (next == ']' || next == ')'));
  return next == '|' || (prev == '[' && next == ']') || prev == '\0' ||
         AfterWordProgress(s, t.begin);
}

std::string Label(std::string_view s) {
  auto in_word = [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; };
  size_t end = s.size();
  while (end > 0) {
    while (end > 0 && !in_word(s[end - 1])) --end;
    size_t begin = end;
    while (begin > 0 && in_word(s[begin - 1])) --begin;
    std::string_view word = s.substr(begin, end - begin);
    if (std::any_of(word.begin(), word.end(), IsAlpha))
      return std::string(word.substr(0, kMaxLabel));
    end = begin;
  }
  return "";
}

}  // namespace

std::optional<ProgressReading> ParseProgressLine(std::string_view line) {
  std::vector<Token> tokens;
  for (size_t i = 0; i < line.size();) {
    if (!StartsToken(line, i)) {
      ++i;
      continue;
    }
    std::optional<Token> t = ReadToken(line, i);
    if (t) {
      tokens.push_back(*t);
      i = t->end;
    } else {
      while (i < line.size() && (IsAlnum(line[i]) || line[i] == '.')) ++i;  // skip the word
    }
  }
  const Token* percent = nullptr;
  const Token* pair = nullptr;
  bool placed = false;
  for (const Token& t : tokens) {
    const Token*& slot = t.kind == Kind::kPercent ? percent : pair;
    bool here = Placed(line, t);
    // The first placed token of each kind wins over an unplaced one.
    if (!slot || (here && !Placed(line, *slot))) slot = &t;
    placed = placed || here;
  }
  if (!placed && !(percent && pair)) return std::nullopt;
  // A placed token vouches for the other kind on the same line (tqdm's "6%|…| 8/140").
  ProgressReading r;
  size_t begin = line.size();
  if (pair) {
    r.done = pair->a;
    r.total = pair->b;
    r.fraction = pair->a / pair->b;
    begin = pair->begin;
  }
  if (percent) {
    if (!pair) r.fraction = percent->a / 100;
    begin = std::min(begin, percent->begin);
  }
  r.label = Label(line.substr(0, begin));
  return r;
}

}  // namespace deployd
