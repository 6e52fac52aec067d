// deployctl plan: a dry run through deployd (plan_preview.h). Shows each step as it would run,
// with ${vars} substituted, and which preflight and skip_if checks pass right now. Exit 1
// when a preflight check fails now (apply would fail before changing anything), else 0.
#include <boost/json.hpp>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/watch_view.h"
#include "deployd/protocol.h"
#include "util/units.h"
#include "util/utf8_text.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// An argument as a shell would need it to be typed: bare when safe, else single-quoted.
std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789@%+=:,./_-") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Ms(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_int64() ? FormatDuration(std::chrono::milliseconds(v->as_int64())) : "";
}

// "http GET http://…/ (after 1s, every 500ms, within 30s)"
std::string CheckLine(const json::object& c) {
  std::string timing;
  auto add = [&](const std::string& part) { timing += (timing.empty() ? "" : ", ") + part; };
  if (Int(c, "after_ms")) add("after " + Ms(c, "after_ms"));
  if (c.contains("within_ms") && !c.at("within_ms").is_null()) {
    add("every " + Ms(c, "every_ms"));
    add("within " + Ms(c, "within_ms"));
  }
  return Str(c, "check") + (timing.empty() ? "" : " (" + timing + ")");
}

std::string Verdict(const json::object& c) {
  return (c.at("passed").as_bool() ? "pass  " : "FAIL  ") + Str(c, "summary");
}

void PrintStep(const json::object& s, int number) {
  std::cout << "  " << number << ". " << Str(s, "id");
  if (s.at("background").as_bool()) std::cout << "  [background]";
  std::cout << "\n";
  const std::string pad = "       ";
  if (Str(s, "action") == "approval") {
    std::cout << pad << "approval: " << Str(s, "approval") << "\n";
    std::cout << pad << "          (waits for `deployctl approve RUN " << Str(s, "id") << "`)\n";
  } else if (Str(s, "action") != "run") {
    std::cout << pad << Str(s, "action") << ": " << Str(s, "description") << "\n";
  } else {
    const json::object& command = s.at("command").as_object();
    if (command.at("shell").as_bool()) {
      std::string script = Str(command, "script");
      std::cout << pad << "run (sh -c):";
      if (script.find('\n') == std::string::npos) {
        std::cout << " " << script << "\n";
      } else {
        std::cout << "\n";
        size_t pos = 0;
        while (pos < script.size()) {
          size_t nl = script.find('\n', pos);
          std::cout << pad << "  " << script.substr(pos, nl - pos) << "\n";
          pos = nl == std::string::npos ? script.size() : nl + 1;
        }
      }
    } else {
      std::string argv;
      for (const auto& a : command.at("argv").as_array())
        argv += (argv.empty() ? "" : " ") + ShellQuote(std::string(a.as_string()));
      std::cout << pad << "run (argv): " << argv << "\n";
    }
  }
  std::vector<std::string> options;
  if (!s.at("timeout_ms").is_null())
    options.push_back("timeout " + Ms(s, "timeout_ms") + " (then SIGTERM, SIGKILL after " +
                      Ms(s, "grace_ms") + ")");
  if (Int(s, "retries"))
    options.push_back("retries " + std::to_string(Int(s, "retries")) + " (delay " +
                      Ms(s, "retry_delay_ms") + ", doubling)");
  if (s.at("idempotent").as_bool()) options.push_back("idempotent");
  if (!Str(s, "cwd").empty()) options.push_back("cwd " + Str(s, "cwd"));
  for (const auto& [k, v] : s.at("env").as_object())
    options.push_back("env " + std::string(k) + "=" + std::string(v.as_string()));
  if (!options.empty()) {
    std::string joined;
    for (const auto& o : options) joined += (joined.empty() ? "" : ", ") + o;
    std::cout << pad << "options: " << joined << "\n";
  }
  for (const auto& p : s.at("fail_on").as_array())
    std::cout << pad << "fail_on: '" << std::string(p.as_string()) << "'\n";
  if (const json::value* p = s.if_contains("progress"); p && p->is_object()) {
    const json::object& progress = p->as_object();
    std::string what = Str(progress, "path").empty() ? "progress lines in the output"
                                                     : "bytes under " + Str(progress, "path");
    const json::value& total = progress.at("total_bytes");
    if (!total.is_null()) what += " (of " + FormatBytes(total.to_number<double>()) + ")";
    std::cout << pad << "progress: " << what << ", sampled every " << Ms(progress, "every_ms")
              << "; no progress for " << Ms(progress, "stall_after_ms") << " → "
              << (Str(progress, "on_stall") == "restart" ? "restart" : "fail") << "\n";
  }
  for (const auto& c : s.at("skip_if").as_array())
    std::cout << pad << "skip_if: " << Verdict(c.as_object()) << "\n";
  if (s.at("would_skip").as_bool())
    std::cout << pad << "         every skip_if check passes now: the step would be skipped\n";
  for (const auto& c : s.at("verify").as_array())
    std::cout << pad << "verify:  " << CheckLine(c.as_object()) << "\n";
}

}  // namespace

int PlanDryRun(Client& client, const std::string& path, const std::string& text,
               const std::map<std::string, std::string>& vars, bool json_out) {
  json::object vars_json;
  for (const auto& [k, v] : vars) vars_json[k] = v;
  // A file name need not be UTF-8; a request must be (the plan itself was checked).
  client.Send(
      {{"op", "plan"}, {"plan_text", text}, {"plan_file", ValidUtf8(path)}, {"vars", vars_json}});
  json::object answer = client.Receive();
  if (!answer["ok"].as_bool()) {
    if (const json::value* d = answer.if_contains("diagnostics"))
      for (const auto& line : d->as_array()) std::cerr << line.as_string().c_str() << "\n";
    Client::Refused(answer);
  }
  const json::object& plan = answer["plan"].as_object();
  bool preflight_passed = plan.at("preflight_passed").as_bool();
  int code = preflight_passed ? kExitOk : kExitRunFailed;
  if (json_out) {
    std::cout << json::serialize(plan) << "\n";
    return code;
  }
  const json::array& steps = plan.at("steps").as_array();
  const json::array& on_failure = plan.at("on_failure").as_array();
  std::cout << "plan " << Str(plan, "name") << " (" << path << "): " << steps.size()
            << (steps.size() == 1 ? " step" : " steps");
  if (!on_failure.empty())
    std::cout << ", " << on_failure.size()
              << (on_failure.size() == 1 ? " on_failure step" : " on_failure steps");
  std::cout << "\n";
  if (!Str(plan, "description").empty()) std::cout << Str(plan, "description") << "\n";
  const json::object& vars_out = plan.at("vars").as_object();
  if (!vars_out.empty()) {
    std::string line;
    for (const auto& [k, v] : vars_out)
      line += (line.empty() ? "" : ", ") + std::string(k) + "=" + std::string(v.as_string());
    std::cout << "vars: " << line << "\n";
  }
  std::cout << "dry run: nothing was changed; preflight and skip_if checks were probed once, "
               "now\n\n";
  const json::array& preflight = plan.at("preflight").as_array();
  std::cout << "preflight:" << (preflight.empty() ? " none" : "") << "\n";
  for (const auto& c : preflight) std::cout << "  " << Verdict(c.as_object()) << "\n";
  std::cout << "\nsteps:\n";
  int number = 0;
  for (const auto& s : steps) PrintStep(s.as_object(), ++number);
  if (!on_failure.empty()) {
    std::cout << "\non_failure (run when a step fails):\n";
    for (const auto& s : on_failure) PrintStep(s.as_object(), ++number);
  }
  if (!preflight_passed) {
    size_t failing = 0;
    for (const auto& c : preflight) failing += c.at("passed").as_bool() ? 0 : 1;
    std::cout << "\n"
              << failing << " of " << preflight.size()
              << " preflight checks fail now: apply would fail before changing anything\n";
  }
  return code;
}

}  // namespace deployd::ctl
