// Version strings as printed by tools (`python3 -c 'import vllm; print(vllm.__version__)'`):
// finding one in output and ordering two of them, for a `run` check's `version_at_least`.
//
// Ordering follows PEP 440, the scheme of the Python packages deployments are made of:
// 1.10 > 1.9, 0.15 == 0.15.0, 0.16.0rc2.dev313 < 0.16.0rc2 < 0.16.0 < 0.16.0.post1. A local
// label (+cu128) does not take part in the ordering. Text that is not PEP 440 is compared by
// what can be read of it (its leading release numbers), never rejected.
#ifndef DEPLOYD_CHECKS_VERSION_H_
#define DEPLOYD_CHECKS_VERSION_H_

#include <optional>
#include <string>
#include <string_view>

namespace deployd {

// < 0 when a orders before b, 0 when equal, > 0 when after.
int CompareVersions(std::string_view a, std::string_view b);

// The first version-like token in `text`: digits, at least one ".digits", then any of
// [A-Za-z0-9.+-] ("vllm 0.16.0rc2.dev313+gabc123" → "0.16.0rc2.dev313+gabc123"). A leading
// "v" ("v1.2") is not part of the token; a trailing '.', '+' or '-' is dropped.
std::optional<std::string> FindVersion(std::string_view text);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_VERSION_H_
