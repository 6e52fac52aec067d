// Utf8Text: making arbitrary bytes (a program's output) safe to carry in JSON, which clients
// decode strictly: invalid sequences become U+FFFD, and a stream cut in the middle of a
// character keeps that character's first bytes for the next piece.
#ifndef DEPLOYD_UTIL_UTF8_TEXT_H_
#define DEPLOYD_UTIL_UTF8_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace deployd {

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);

// The offset of the first byte of `text` that is not part of a valid UTF-8 sequence, or npos
// when the whole text is valid.
std::size_t FirstInvalidUtf8(std::string_view text);

// At most `max_bytes` of `text` (max_bytes >= 16) around `offset`, for quoting a long line in
// a message: from a quarter of the budget before `offset`, cut on character boundaries, with
// "…" where something was left out (the marks count in the budget). A text that fits is
// returned whole. Invalid UTF-8 stays as it is (ValidUtf8 the quote). `begin`, when given, is
// set to the offset in `text` of the first byte quoted.
std::string QuoteAround(std::string_view text, std::size_t offset, std::size_t max_bytes,
                        std::size_t* begin = nullptr);

// The length of `text` without a trailing sequence that is incomplete but could still become
// valid (at most 3 bytes): what can be converted now, the rest waiting for more bytes.
std::size_t CompleteUtf8Prefix(std::string_view text);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_UTF8_TEXT_H_
