// The spelling rules of the names and tokens a plan writes: shell identifiers (variables,
// environment variables, secrets), step ids, plan names, versions, systemd unit names and
// sha256 digests. Pure functions of the text; the plan grammars report what breaks them.
#ifndef DEPLOYD_PLAN_NAME_RULES_H_
#define DEPLOYD_PLAN_NAME_RULES_H_

#include <string_view>

namespace deployd {

// Variable, environment and secret names share the shell's rule: letters, digits and '_', not
// starting with a digit.
bool IsIdentifier(std::string_view s);
// Letters, digits, '.', '_' and '-'.
bool IsPlanName(std::string_view s);
// Lowercase letters, digits, '_' and '-'.
bool IsStepId(std::string_view s);
// "0.15.0", "0.16.0rc2", "2.1.0.post1", "1.0.0-beta": digits first, then anything version-like.
bool IsVersion(std::string_view s);
// At most 255 of letters, digits and ":-_.\@", not starting with '.' or '-'.
bool IsUnitName(std::string_view s);
// 64 hex digits, either case.
bool IsSha256Hex(std::string_view s);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_NAME_RULES_H_
