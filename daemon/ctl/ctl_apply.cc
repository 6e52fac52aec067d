// deployctl validate, apply and plan: the verbs that take a plan file. The plan is always checked
// here first, so that an invalid plan is refused with every problem before deployd is involved
// (validate needs no deployd at all).
#include <boost/json.hpp>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/plan_input.h"
#include "deployd/protocol.h"
#include "plan/plan_parser.h"
#include "util/utf8_text.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

json::object VarsJson(const std::map<std::string, std::string>& vars) {
  json::object o;
  for (const auto& [k, v] : vars) o[k] = v;
  return o;
}

}  // namespace

int Validate(const std::vector<std::string>& plans, const std::vector<std::string>& var_args,
             bool json_out) {
  auto vars = ParseVars(var_args);
  bool bad = false;
  json::array results;
  for (const auto& path : plans) {
    ParseResult r = ParsePlan(ReadPlan(path), path, vars);
    json::array errors;
    for (const auto& d : r.errors) {
      // With --json the diagnostics are in the array; stderr keeps them for people too.
      std::cerr << d.Format() << "\n";
      errors.emplace_back(d.file + ":" + std::to_string(d.line) + ":" + std::to_string(d.column) +
                          ": error: " + d.message);
    }
    if (!r.plan) bad = true;
    if (json_out) {
      json::object o{{"file", ValidUtf8(path)}, {"ok", r.plan.has_value()}, {"errors", errors}};
      if (r.plan) {
        o["plan"] = r.plan->name;
        o["steps"] = r.plan->steps.size();
      }
      results.push_back(std::move(o));
    } else if (r.plan) {
      std::cout << path << ": ok (plan " << r.plan->name << ", " << r.plan->steps.size()
                << " steps)\n";
    }
  }
  if (json_out) std::cout << json::serialize(results) << "\n";
  return bad ? kExitUsage : kExitOk;
}

CheckedPlan CheckPlan(const std::string& path, const std::vector<std::string>& var_args) {
  CheckedPlan plan{path, ReadPlan(path), ParseVars(var_args)};
  ParseResult parsed = ParsePlan(plan.text, path, plan.vars);
  for (const auto& d : parsed.errors) std::cerr << d.Format() << "\n";
  // Every problem is on stderr already: the exit status says the rest.
  if (!parsed.plan) Die(kExitUsage, "");
  return plan;
}

int ApplyPlan(Client& client, const CheckedPlan& plan, const ApplyOptions& o) {
  json::object request{{"op", "apply"},
                       {"plan_text", plan.text},
                       {"plan_file", ValidUtf8(plan.path)},
                       {"vars", VarsJson(plan.vars)}};
  if (o.wait_lock) request["wait_lock"] = true;
  client.Send(request);
  json::object answer = client.Receive();
  if (!answer["ok"].as_bool()) {
    if (const json::value* d = answer.if_contains("diagnostics"))
      for (const auto& line : d->as_array()) std::cerr << line.as_string().c_str() << "\n";
    Client::Refused(answer);
  }
  std::string id = Str(answer, "run");
  if (o.json_out) {
    std::cout << json::serialize(json::object{{"run", id}}) << std::endl;
    return o.wait ? FollowJson(client, id) : kExitOk;
  }
  std::cout << id << std::endl;
  return o.wait ? FollowPlain(client, id, false) : kExitOk;
}

}  // namespace deployd::ctl
