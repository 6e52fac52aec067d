// deployctl metrics: what deployd exports to Prometheus, as Prometheus's text exposition (the
// same text as the node_exporter textfile and `/metrics`: one encoder, protocol/), or with
// --json the families as the `metrics` request answers them.
#include <boost/json.hpp>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "deployd/protocol.h"
#include "protocol/metrics_exposition.h"

namespace deployd::ctl {

namespace json = boost::json;

int Metrics(Client& client, bool json_out) {
  json::object answer = client.Call({{"op", "metrics"}});
  const json::value* families = answer.if_contains("metrics");
  std::optional<std::vector<MetricFamily>> decoded =
      families && families->is_array() ? DecodeMetricsJson(families->as_array()) : std::nullopt;
  if (!decoded) Die(kExitUsage, "deployd answered metrics without metric families");
  if (json_out) {
    std::cout << json::serialize(*families) << "\n";
  } else {
    std::cout << EncodeExposition(*decoded);
  }
  return kExitOk;
}

}  // namespace deployd::ctl
