// The `http` check's grammar: a URL, or a map with the request (url, method, body) and what the
// response must show (status, body_contains, json expectations). A YAML `body` is sent as
// compact JSON. Problems go to the FieldReader.
#ifndef DEPLOYD_PLAN_HTTP_CHECK_GRAMMAR_H_
#define DEPLOYD_PLAN_HTTP_CHECK_GRAMMAR_H_

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

// `e` is the `http:` entry of a check whose kind is already set.
void ReadHttpCheck(FieldReader& in, const Field& e, Check& check);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_HTTP_CHECK_GRAMMAR_H_
