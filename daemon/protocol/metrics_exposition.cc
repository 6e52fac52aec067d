#include "protocol/metrics_exposition.h"

#include <boost/json.hpp>
#include <charconv>
#include <cmath>

namespace deployd {

namespace json = boost::json;

namespace {

// Prometheus reads numbers as Go's ParseFloat does: the shortest form that reads back exactly.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return std::string(text, ec == std::errc() ? end : text);
}

// A label value escapes backslash, double quote and newline; HELP text backslash and newline.
std::string Escaped(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendSample(std::string& out, const MetricSample& s) {
  out += s.name;
  if (!s.labels.empty()) {
    out += '{';
    for (size_t i = 0; i < s.labels.size(); ++i) {
      if (i) out += ',';
      out += s.labels[i].first + "=\"" + Escaped(s.labels[i].second, true) + '"';
    }
    out += '}';
  }
  out += ' ' + Number(s.value) + '\n';
}

// Counts as whole numbers ("3", not Boost.JSON's "3E0"); other figures as they are.
json::value Json(double v) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: every whole number below is a double
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < kExact)
    return static_cast<std::int64_t>(v);
  return v;
}

const json::string* StringAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

std::optional<MetricSample> DecodeSample(const json::value& v) {
  const json::object* o = v.if_object();
  const json::string* name = o ? StringAt(*o, "name") : nullptr;
  const json::value* value = o ? o->if_contains("value") : nullptr;
  const json::value* labels = o ? o->if_contains("labels") : nullptr;
  if (!name || !value || !value->is_number() || !labels || !labels->is_object())
    return std::nullopt;
  MetricSample s{std::string(*name), {}, value->to_number<double>()};
  for (const auto& [key, text] : labels->as_object()) {
    if (!text.is_string()) return std::nullopt;
    s.labels.emplace_back(std::string(key), std::string(text.as_string()));
  }
  return s;
}

}  // namespace

void MetricFamily::Add(MetricLabels labels, double value) {
  samples.push_back({name, std::move(labels), value});
}

void MetricFamily::AddHistogram(const MetricLabels& labels, const std::vector<double>& bounds,
                                const std::vector<double>& cumulative, double count, double sum) {
  for (size_t i = 0; i < bounds.size() && i < cumulative.size(); ++i) {
    MetricLabels with_le = labels;
    with_le.emplace_back("le", Number(bounds[i]));
    samples.push_back({name + "_bucket", std::move(with_le), cumulative[i]});
  }
  MetricLabels with_inf = labels;
  with_inf.emplace_back("le", "+Inf");
  samples.push_back({name + "_bucket", std::move(with_inf), count});
  samples.push_back({name + "_sum", labels, sum});
  samples.push_back({name + "_count", labels, count});
}

std::string EncodeExposition(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    out += "# HELP " + f.name + ' ' + Escaped(f.help, false) + '\n';
    out += "# TYPE " + f.name + ' ' + f.type + '\n';
    for (const MetricSample& s : f.samples) AppendSample(out, s);
  }
  return out;
}

json::array EncodeMetricsJson(const std::vector<MetricFamily>& families) {
  json::array out;
  for (const MetricFamily& f : families) {
    json::array samples;
    for (const MetricSample& s : f.samples) {
      json::object labels;
      for (const auto& [key, value] : s.labels) labels[key] = value;
      samples.push_back(
          json::object{{"name", s.name}, {"labels", std::move(labels)}, {"value", Json(s.value)}});
    }
    out.push_back(json::object{
        {"name", f.name}, {"type", f.type}, {"help", f.help}, {"samples", std::move(samples)}});
  }
  return out;
}

std::optional<std::vector<MetricFamily>> DecodeMetricsJson(const json::array& families) {
  std::vector<MetricFamily> out;
  for (const json::value& v : families) {
    const json::object* o = v.if_object();
    const json::string* name = o ? StringAt(*o, "name") : nullptr;
    const json::string* type = o ? StringAt(*o, "type") : nullptr;
    const json::string* help = o ? StringAt(*o, "help") : nullptr;
    const json::value* samples = o ? o->if_contains("samples") : nullptr;
    if (!name || !type || !help || !samples || !samples->is_array()) return std::nullopt;
    MetricFamily f{std::string(*name), std::string(*type), std::string(*help), {}};
    for (const json::value& s : samples->as_array()) {
      std::optional<MetricSample> sample = DecodeSample(s);
      if (!sample) return std::nullopt;
      f.samples.push_back(std::move(*sample));
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace deployd
