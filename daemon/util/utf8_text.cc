#include "util/utf8_text.h"

#include <algorithm>

namespace deployd {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The length of the valid sequence at text[i], 0 when there is none; `incomplete` is set when
// the text ends inside a sequence that is valid so far. RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF.
std::size_t SequenceAt(std::string_view text, std::size_t i, bool& incomplete) {
  incomplete = false;
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  unsigned char b = at(0);
  if (b < 0x80) return 1;
  std::size_t length;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    length = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    length = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    length = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= text.size()) {
      incomplete = true;
      return 0;
    }
    unsigned char c = at(k);
    if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    bool incomplete;
    std::size_t n = SequenceAt(text, i, incomplete);
    if (n) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

std::size_t FirstInvalidUtf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    bool incomplete;
    std::size_t n = SequenceAt(text, i, incomplete);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string QuoteAround(std::string_view text, std::size_t offset, std::size_t max_bytes,
                        std::size_t* quoted_from) {
  if (quoted_from) *quoted_from = 0;
  if (text.size() <= max_bytes) return std::string(text);
  constexpr std::string_view kEllipsis = "\xE2\x80\xA6";
  std::size_t begin = std::min(offset > max_bytes / 4 ? offset - max_bytes / 4 : 0, text.size());
  std::size_t room = max_bytes - (begin > 0 ? kEllipsis.size() : 0) - kEllipsis.size();
  if (begin + room >= text.size()) {  // the quote reaches the end: it takes the whole budget
    room = max_bytes - kEllipsis.size();
    begin = text.size() - room;
  }
  std::size_t end = begin + room;
  auto inside = [&](std::size_t i) {
    return i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  while (inside(begin)) ++begin;
  while (inside(end)) --end;
  if (quoted_from) *quoted_from = begin;
  std::string out;
  if (begin > 0) out += kEllipsis;
  out += text.substr(begin, end - begin);
  if (end < text.size()) out += kEllipsis;
  return out;
}

std::size_t CompleteUtf8Prefix(std::string_view text) {
  // Only the last 3 bytes can start a sequence that has not ended yet.
  std::size_t from = text.size() > 3 ? text.size() - 3 : 0;
  for (std::size_t i = from; i < text.size(); ++i) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b < 0xC0) continue;  // ASCII or a continuation byte: not a start
    bool incomplete;
    SequenceAt(text, i, incomplete);
    if (incomplete) return i;
  }
  return text.size();
}

}  // namespace deployd
