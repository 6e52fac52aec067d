// The `http` check's grammar: a URL, or a map with the request (url, method, body) and what the
// response must show (status, body_contains, json expectations). A YAML `body` is sent as
// compact JSON. Problems go to the FieldReader.
#ifndef DEPLOYD_PLAN_HTTP_CHECK_GRAMMAR_H_
#define DEPLOYD_PLAN_HTTP_CHECK_GRAMMAR_H_

#include <optional>
#include <string>
#include <string_view>

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

// `e` is the `http:` entry of a check whose kind is already set.
void ReadHttpCheck(FieldReader& in, const Field& e, Check& check);

// `url` when it is http://HOST[:PORT]/PATH; else reported at `pos` (an https URL with a word
// on probing over loopback, the `kind` check naming the kind) and nullopt.
std::optional<std::string> ReadHttpUrl(FieldReader& in, const std::string& url, SourcePos pos,
                                       std::string_view kind);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_HTTP_CHECK_GRAMMAR_H_
