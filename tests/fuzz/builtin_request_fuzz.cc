// The requests deployd hands its helper children, `deployd --action JSON` and `deployd --probe
// JSON` (actions/builtin_json.h, checks/probe_request.h): the child's decoders on any text.
// Only decoded: no action is run and nothing is probed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actions/builtin_json.h"
#include "checks/probe_request.h"

using namespace deployd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<BuiltinRequest> action = ParseActionRequest(text);
  if (!action.ok()) (void)action.status().message();
  Result<Check> probe = ParseProbeRequest(text);
  if (probe.ok()) (void)ProbeRequestJson(probe.value());
  return 0;
}
