#include "plan/name_rules.h"

#include <algorithm>

namespace deployd {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsAlpha(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }

bool AllOf(std::string_view s, bool (*ok)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ok);
}

}  // namespace

bool IsIdentifier(std::string_view s) {
  return !s.empty() && !IsDigit(s[0]) &&
         AllOf(s, [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; });
}

bool IsPlanName(std::string_view s) {
  return AllOf(s,
               [](char c) { return IsAlpha(c) || IsDigit(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsStepId(std::string_view s) {
  return AllOf(s, [](char c) { return IsLower(c) || IsDigit(c) || c == '_' || c == '-'; });
}

bool IsVersion(std::string_view s) {
  if (s.empty() || !IsDigit(s[0])) return false;
  return AllOf(s, [](char c) {
    return IsAlpha(c) || IsDigit(c) || c == '.' || c == '+' || c == '-' || c == '_';
  });
}

bool IsUnitName(std::string_view s) {
  bool ok = s.size() <= 255 && std::all_of(s.begin(), s.end(), [](char c) {
              return IsAlpha(c) || IsDigit(c) ||
                     std::string_view(":-_.\\@").find(c) != std::string_view::npos;
            });
  return ok && !s.starts_with(".") && !s.starts_with("-");
}

bool IsSha256Hex(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

}  // namespace deployd
