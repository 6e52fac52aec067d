// The request a blocking probe's child gets (`deployd --probe JSON`): the probes of the checks
// that must not run on the daemon's thread (service, process, gpus_free, weights_complete with
// sha256). The check's plan keys only; never a secret.
#ifndef DEPLOYD_CHECKS_PROBE_REQUEST_H_
#define DEPLOYD_CHECKS_PROBE_REQUEST_H_

#include <boost/json/object.hpp>
#include <string>
#include <string_view>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "util/json_fields.h"

namespace deployd {

// The hidden flag deployd re-executes itself with for a probe: `deployd --probe JSON`.
inline constexpr std::string_view kBuiltinProbeFlag = "--probe";

std::string ProbeRequestJson(const Check& check);
Result<Check> ParseProbeRequest(std::string_view text);

// A GPU selection in requests: {"gpus": [0, 1], "max_used": BYTES}.
boost::json::object GpuToJson(const GpuSelection& gpu);
GpuSelection GpuFromJson(const JsonFields& fields);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_PROBE_REQUEST_H_
