// The JSON expectations of an `http` check (JsonExpectation in plan.h): a dotted path selects
// values in the body ("data.*.id": `*` is every element of an array or member of an object, a
// number indexes an array, anything else names a member), and one of them must equal the
// expected value or contain it (a substring of a string, an element of an array, a member of an
// object). A scalar is compared by its text: equals: 200 matches 200 and "200".
#ifndef DEPLOYD_CHECKS_JSON_EXPECT_H_
#define DEPLOYD_CHECKS_JSON_EXPECT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"

namespace deployd {

// Nothing when every expectation is met; else what the first unmet one saw, e.g.
// "json data.*.id: no value equals '/models/kimi' (saw \"/models/glm5\")".
std::optional<std::string> FirstUnmetExpectation(std::string_view body,
                                                 const std::vector<JsonExpectation>& expectations);

// "data.*.id equals '/models/kimi'": for descriptions.
std::string DescribeExpectation(const JsonExpectation& expectation);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_JSON_EXPECT_H_
