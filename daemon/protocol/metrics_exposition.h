// Metrics: what deployd exports about itself (control/metrics_report.h), as plain values, and
// their two encodings — Prometheus's text exposition format 0.0.4 (what `deployctl metrics`
// prints, the node_exporter textfile holds and `/metrics` serves) and the JSON the `metrics`
// request answers with, which deployctl turns back into the same text. Plain values, no I/O.
//
//   # HELP deployd_runs_finished_total Runs that ended, by plan and the state they ended in.
//   # TYPE deployd_runs_finished_total counter
//   deployd_runs_finished_total{plan="demo",state="succeeded"} 3
//
//   [{"name": "deployd_runs_finished_total", "type": "counter", "help": "…",
//     "samples": [{"name": "deployd_runs_finished_total",
//                  "labels": {"plan": "demo", "state": "succeeded"}, "value": 3}]}, …]
#ifndef DEPLOYD_PROTOCOL_METRICS_EXPOSITION_H_
#define DEPLOYD_PROTOCOL_METRICS_EXPOSITION_H_

#include <boost/json/array.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace deployd {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

struct MetricSample {
  std::string name;  // the family's name, or with _bucket, _sum, _count for a histogram
  MetricLabels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;
  std::string type;  // "counter", "gauge" or "histogram"
  std::string help;
  std::vector<MetricSample> samples;

  // Adds a sample named as the family.
  void Add(MetricLabels labels, double value);
  // Adds a histogram's samples: one _bucket per upper bound (cumulative counts, `bounds` and
  // `cumulative` of the same length), then le="+Inf", _sum and _count.
  void AddHistogram(const MetricLabels& labels, const std::vector<double>& bounds,
                    const std::vector<double>& cumulative, double count, double sum);
};

// The text format: HELP and TYPE lines, then the samples, for each family in turn; label
// values escaped (\\, \", \n), numbers in their shortest exact form ("3", "57.8", "+Inf").
std::string EncodeExposition(const std::vector<MetricFamily>& families);

boost::json::array EncodeMetricsJson(const std::vector<MetricFamily>& families);
// nullopt when `families` is not what EncodeMetricsJson makes.
std::optional<std::vector<MetricFamily>> DecodeMetricsJson(const boost::json::array& families);

// The content type of the text format, for HTTP.
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_METRICS_EXPOSITION_H_
