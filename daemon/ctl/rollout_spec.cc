#include "ctl/rollout_spec.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>

#include "ctl/ctl_client.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// A literal string in a plan: `${` would be read as a variable.
std::string Literal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '$' && i + 1 < s.size() && s[i + 1] == '{') out += '$';
    out += s[i];
  }
  return out;
}

json::object EncodeCount(const Count& c) { return {{"value", c.value}, {"percent", c.percent}}; }

}  // namespace

Result<Count> ParseCount(std::string_view text, const std::string& flag) {
  Count c;
  std::string_view digits = text;
  if (!digits.empty() && digits.back() == '%') {
    c.percent = true;
    digits.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), c.value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || c.value < 0 ||
      (c.percent && c.value > 100))
    return Status::Error(flag +
                         " expects a number of hosts or a percentage (e.g. 2 or 25%), not '" +
                         std::string(text) + "'");
  return c;
}

const RolloutHost* RolloutSpec::Host(const std::string& name) const {
  for (const RolloutHost& h : hosts)
    if (h.name == name) return &h;
  return nullptr;
}

std::vector<std::vector<std::string>> MakeBatches(const std::vector<std::string>& hosts,
                                                  const std::vector<Count>& serial) {
  std::vector<std::vector<std::string>> batches;
  size_t next = 0;
  for (size_t i = 0; next < hosts.size(); ++i) {
    size_t size = hosts.size();
    if (!serial.empty()) {
      const Count& c = serial[std::min(i, serial.size() - 1)];
      size = c.percent ? hosts.size() * static_cast<size_t>(c.value) / 100
                       : static_cast<size_t>(c.value);
      size = std::max<size_t>(size, 1);
    }
    size = std::min(size, hosts.size() - next);
    batches.emplace_back(hosts.begin() + static_cast<std::ptrdiff_t>(next),
                         hosts.begin() + static_cast<std::ptrdiff_t>(next + size));
    next += size;
  }
  return batches;
}

bool TooManyFailed(const Count& max_fail, size_t failed, size_t size) {
  if (!max_fail.percent) return failed > static_cast<size_t>(max_fail.value);
  return failed * 100 > static_cast<size_t>(max_fail.value) * size;
}

json::object EncodeSpec(const RolloutSpec& spec) {
  json::array hosts;
  for (const RolloutHost& h : spec.hosts) {
    json::object vars;
    for (const auto& [k, v] : h.vars) vars[k] = v;
    hosts.push_back(json::object{{"name", h.name}, {"address", h.address}, {"vars", vars}});
  }
  json::array batches;
  for (const auto& batch : spec.batches) {
    json::array names;
    for (const std::string& n : batch) names.push_back(json::string(n));
    batches.push_back(std::move(names));
  }
  return {{"id", spec.id},
          {"plan_file", spec.plan_file},
          {"plan_name", spec.plan_name},
          {"plan_text", spec.plan_text},
          {"inventory", spec.inventory},
          {"hosts", std::move(hosts)},
          {"batches", std::move(batches)},
          {"max_fail", EncodeCount(spec.max_fail)},
          {"unreachable_after_ms", spec.unreachable_after_ms}};
}

Result<RolloutSpec> DecodeSpec(std::string_view text) {
  auto bad = [] {
    return Status::Error("the rollout's record is damaged (its 'rollout' variable)");
  };
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return bad();
  try {
    const json::object& o = v.as_object();
    RolloutSpec spec;
    spec.id = Str(o, "id");
    spec.plan_file = Str(o, "plan_file");
    spec.plan_name = Str(o, "plan_name");
    spec.plan_text = Str(o, "plan_text");
    spec.inventory = Str(o, "inventory");
    for (const json::value& h : o.at("hosts").as_array()) {
      RolloutHost host{Str(h.as_object(), "name"), Str(h.as_object(), "address"), {}};
      for (const auto& [k, val] : h.at("vars").as_object())
        host.vars[std::string(k)] = std::string(val.as_string());
      spec.hosts.push_back(std::move(host));
    }
    for (const json::value& b : o.at("batches").as_array()) {
      spec.batches.emplace_back();
      for (const json::value& n : b.as_array()) {
        if (!spec.Host(std::string(n.as_string()))) return bad();
        spec.batches.back().push_back(std::string(n.as_string()));
      }
    }
    const json::object& mf = o.at("max_fail").as_object();
    spec.max_fail = {static_cast<int>(mf.at("value").as_int64()), mf.at("percent").as_bool()};
    spec.unreachable_after_ms = o.at("unreachable_after_ms").as_int64();
    if (spec.id.empty() || spec.hosts.empty()) return bad();
    return spec;
  } catch (const std::exception&) {
    return bad();
  }
}

std::string BatchStepId(size_t b) { return "batch-" + std::to_string(b + 1); }

std::string GeneratedPlan(const RolloutSpec& spec, const std::string& deployctl,
                          const std::string& socket,
                          const std::map<std::string, std::string>& env) {
  json::object env_json;
  for (const auto& [k, v] : env) env_json[k] = Literal(v);
  auto step = [&](const std::string& id, const std::string& batch) {
    json::array argv{json::string(Literal(deployctl))};
    if (!socket.empty()) {
      argv.push_back("--socket");
      argv.push_back(json::string(Literal(socket)));
    }
    for (const char* a : {"rollout-batch", "--key"}) argv.push_back(json::string(a));
    argv.push_back(json::string(Literal(spec.Key())));
    argv.push_back("--batch");
    argv.push_back(json::string(batch));
    // A step fired again after a restart finds each host's run by its key: safe to repeat.
    return json::object{
        {"id", id}, {"run", std::move(argv)}, {"idempotent", true}, {"env", env_json}};
  };
  json::array steps;
  for (size_t b = 0; b < spec.batches.size(); ++b)
    steps.push_back(step(BatchStepId(b), std::to_string(b + 1)));
  steps.push_back(step(std::string(kVerdictStep), "all"));
  json::object plan{
      {"version", 1},
      {"name", "rollout-" + spec.plan_name},
      {"description", Literal("rollout of " + spec.plan_file + " over " +
                              std::to_string(spec.hosts.size()) + " hosts of " + spec.inventory)},
      {"vars", json::object{{"rollout", ""}}},
      {"steps", std::move(steps)}};
  return json::serialize(plan) + "\n";
}

}  // namespace deployd::ctl
