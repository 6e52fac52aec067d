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
