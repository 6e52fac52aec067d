#include "util/utf8_text.h"

#include <catch2/catch.hpp>

using namespace deployd;

TEST_CASE("ValidUtf8 keeps valid text and replaces each invalid byte") {
  CHECK(ValidUtf8("plain ascii\n") == "plain ascii\n");
  CHECK(ValidUtf8("é … 😀") == "é … 😀");
  CHECK(ValidUtf8("a\xFFz") == "a\xEF\xBF\xBDz");
  CHECK(ValidUtf8("\xC3") == "\xEF\xBF\xBD");                                  // cut short
  CHECK(ValidUtf8("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  CHECK(ValidUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(ValidUtf8("\xF4\x90\x80\x80").size() == 12);                           // past U+10FFFF
}

TEST_CASE("CompleteUtf8Prefix holds back a character cut at the end") {
  CHECK(CompleteUtf8Prefix("abc") == 3);
  CHECK(CompleteUtf8Prefix("ab\xC3") == 2);
  CHECK(CompleteUtf8Prefix("ab\xE2\x80") == 2);
  CHECK(CompleteUtf8Prefix("ab\xE2\x80\xA6") == 5);
  CHECK(CompleteUtf8Prefix("\xF0\x9F\x98") == 0);
  CHECK(CompleteUtf8Prefix("ab\xFF") == 3);      // invalid, not incomplete: converted now
  CHECK(CompleteUtf8Prefix("ab\xC3\x41") == 4);  // broken already
  CHECK(CompleteUtf8Prefix("") == 0);
}

TEST_CASE("FirstInvalidUtf8 finds the first byte that is not UTF-8") {
  CHECK(FirstInvalidUtf8("plain é … 😀") == std::string_view::npos);
  CHECK(FirstInvalidUtf8("") == std::string_view::npos);
  CHECK(FirstInvalidUtf8("ab\xFFz") == 2);
  CHECK(FirstInvalidUtf8("é\xC3") == 2);          // cut short
  CHECK(FirstInvalidUtf8("a\xED\xA0\x80") == 1);  // a surrogate
}

TEST_CASE("QuoteAround cuts a long text around an offset, on character boundaries") {
  CHECK(QuoteAround("short", 2, 16) == "short");
  std::string line = std::string(100, 'a') + "MATCH" + std::string(100, 'b');
  std::string quote = QuoteAround(line, 100, 40);
  // From a quarter of the budget before the offset.
  CHECK(quote == "…" + std::string(10, 'a') + "MATCH" + std::string(19, 'b') + "…");
  CHECK(quote.size() == 40);
  CHECK(QuoteAround(line, 0, 40) == std::string(37, 'a') + "…");
  CHECK(QuoteAround(line, 205, 40) == "…" + std::string(37, 'b'));
  // "é" is two bytes: a cut never splits one.
  std::string accents;
  for (int i = 0; i < 50; ++i) accents += "é";
  std::string cut = QuoteAround(accents, 51, 20);
  CHECK(cut == "…" + std::string("ééééééé") + "…");
}
