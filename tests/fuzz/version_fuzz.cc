// Version extraction and ordering (checks/version.h), as a `run` check's `version_at_least`
// uses them: FindVersion on output, CompareVersions of what it found and of the text's two
// halves (split at the first newline). The order must be one: a == a, and a < b iff b > a
// (else abort, a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "checks/version.h"

using namespace deployd;

namespace {

int Sign(int v) { return (v > 0) - (v < 0); }

void CheckOrder(std::string_view a, std::string_view b) {
  if (CompareVersions(a, a) != 0 || CompareVersions(b, b) != 0) std::abort();
  if (Sign(CompareVersions(a, b)) != -Sign(CompareVersions(b, a))) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<std::string> found = FindVersion(text);
  size_t newline = text.find('\n');
  std::string_view a = text.substr(0, newline);
  std::string_view b = newline == std::string_view::npos ? "" : text.substr(newline + 1);
  CheckOrder(a, b);
  if (found) CheckOrder(*found, b);
  return 0;
}
