// deployctl rollout-batch: one step of a rollout (rollout_spec.h), run by the coordinator. It
// reads the rollout from the coordinator (the run of the rollout's key), drives the batch's
// hosts at once (host_session.h: each host's run created once, under its key, and followed
// through lost connections), and exits with the batch's verdict: 1 when more hosts failed than
// --max-fail allows, else 0. `--batch all` is the verdict step: it creates nothing, waits for
// every host's run and fails when any host failed.
//
// Its output is the step's log: one line per thing that happens to a host ("h3: started run
// kimi-4", "h3: unreachable for 40s (…); next try in 8s"), with "[done/all]" as each host ends,
// which deployd reads as the step's progress, and last the batch's outcome as one line of
// JSON ("outcome: {"succeeded": […], "failed": […]}"). The verdict reads those from the
// coordinator, and asks again only the hosts that did not succeed: a succeeded run stays so.
#include <boost/json.hpp>
#include <iostream>
#include <memory>
#include <set>

#include "ctl/host_session.h"
#include "ctl/rollout_verbs.h"
#include "deployd/protocol.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

std::string Names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// How many failed hosts of a batch of `size` the allowance lets through.
size_t Allowed(const Count& max_fail, size_t size) {
  size_t k = 0;
  while (k < size && !TooManyFailed(max_fail, k + 1, size)) ++k;
  return k;
}

constexpr std::string_view kOutcome = "outcome: ";

void PrintOutcome(const std::vector<std::string>& succeeded,
                  const std::vector<std::string>& failed) {
  json::array s, f;
  for (const std::string& n : succeeded) s.push_back(json::string(n));
  for (const std::string& n : failed) f.push_back(json::string(n));
  std::cout << kOutcome << json::serialize(json::object{{"succeeded", s}, {"failed", f}})
            << std::endl;
}

// The hosts the batches' last outcomes (their logs on the coordinator) say succeeded.
std::set<std::string> Succeeded(Client& coordinator, const RolloutRun& rollout) {
  std::set<std::string> done;
  for (size_t b = 0; b < rollout.spec.batches.size(); ++b) {
    json::object answer =
        coordinator.Call({{"op", "logs"}, {"run", rollout.run.id}, {"step", BatchStepId(b)}});
    const json::array& logs = answer["logs"].as_array();
    if (logs.empty()) continue;
    std::string text = Str(logs.at(0).as_object(), "text");
    size_t at = text.rfind("\n" + std::string(kOutcome));
    if (at == std::string::npos) continue;
    size_t end = text.find('\n', at + 1);
    boost::system::error_code ec;
    json::value outcome =
        json::parse(text.substr(at + 1 + kOutcome.size(), end - at - 1 - kOutcome.size()), ec);
    const json::value* names =
        ec || !outcome.is_object() ? nullptr : outcome.as_object().if_contains("succeeded");
    if (!names || !names->is_array()) continue;
    for (const json::value& n : names->as_array())
      if (n.is_string()) done.insert(std::string(n.as_string()));
  }
  return done;
}

}  // namespace

int RolloutBatch(const std::string& socket, const std::string& key, const std::string& batch) {
  RolloutRun rollout;
  bool verdict = batch == "all";
  std::set<std::string> settled;
  {
    Client coordinator(socket);
    json::object answer = coordinator.Call({{"op", "status"}, {"key", key}});
    rollout.run = DecodeRun(answer["run"].as_object());
    Result<RolloutSpec> spec = DecodeSpec(rollout.run.vars["rollout"]);
    if (!spec.ok()) Die(kExitUsage, spec.status().message());
    rollout.spec = std::move(spec.value());
    if (verdict) settled = Succeeded(coordinator, rollout);
  }
  const RolloutSpec& spec = rollout.spec;
  size_t index = 0;
  if (!verdict) {
    index = static_cast<size_t>(std::atoi(batch.c_str()));
    if (index < 1 || index > spec.batches.size() || std::to_string(index) != batch)
      Die(kExitUsage, "--batch expects 1 to " + std::to_string(spec.batches.size()) +
                          " or all, not '" + batch + "'");
  }
  std::vector<std::string> names;
  if (verdict) {
    for (const RolloutHost& h : spec.hosts)
      if (!settled.count(h.name)) names.push_back(h.name);
    std::cout << "verdict of rollout " << rollout.run.id << ": " << spec.hosts.size() << " hosts, "
              << settled.size() << " succeeded in their batch";
    if (!names.empty()) std::cout << "; asking " << Names(names);
    std::cout << "\n";
  } else {
    names = spec.batches[index - 1];
    std::cout << "batch " << index << " of " << spec.batches.size() << ": " << Names(names)
              << " (--max-fail " << spec.max_fail.Text() << ")\n";
  }
  std::cout.flush();
  size_t ended = 0;
  auto report = [&](const HostSession& s, const std::string& line) {
    std::string counter;
    if (s.done())
      counter = "[" + std::to_string(++ended) + "/" + std::to_string(names.size()) + "] ";
    std::cout << counter << s.host().name << ": " << line << std::endl;
  };
  std::vector<std::unique_ptr<HostSession>> sessions;
  SessionLoop loop;
  for (const std::string& name : names) {
    sessions.push_back(std::make_unique<HostSession>(
        spec, *spec.Host(name), verdict ? HostSession::Mode::kFind : HostSession::Mode::kApply,
        report));
    sessions.back()->Unshared();
    loop.sessions.push_back(sessions.back().get());
  }
  RunSessions(loop);

  std::vector<std::string> succeeded, failed, not_started;
  for (const auto& s : sessions) {
    if (s->outcome() == HostSession::Outcome::kSucceeded) succeeded.push_back(s->host().name);
    if (s->outcome() == HostSession::Outcome::kFailed) failed.push_back(s->host().name);
    if (s->outcome() == HostSession::Outcome::kNotStarted) not_started.push_back(s->host().name);
  }
  if (verdict) {
    if (!not_started.empty())
      std::cout << "not started (their batch was skipped): " << Names(not_started) << "\n";
    if (!failed.empty()) {
      std::cout << "rollout failed on " << failed.size() << " of " << spec.hosts.size()
                << " hosts: " << Names(failed) << " (`deployctl why " << rollout.run.id
                << "`; `deployctl retry " << rollout.run.id << "` takes them on)" << std::endl;
      return kExitRunFailed;
    }
    std::cout << "rollout succeeded on " << spec.hosts.size() - not_started.size() << " of "
              << spec.hosts.size() << " hosts" << std::endl;
    return kExitOk;
  }
  if (TooManyFailed(spec.max_fail, failed.size(), names.size())) {
    std::vector<std::string> untouched;
    for (size_t b = index; b < spec.batches.size(); ++b)
      untouched.insert(untouched.end(), spec.batches[b].begin(), spec.batches[b].end());
    std::cout << "batch " << index << " failed: " << failed.size() << " of " << names.size()
              << " hosts failed (" << Names(failed) << "), --max-fail " << spec.max_fail.Text()
              << " allows " << Allowed(spec.max_fail, names.size()) << "; the rollout stops\n";
    if (!untouched.empty()) std::cout << "not started, untouched: " << Names(untouched) << "\n";
    PrintOutcome(succeeded, failed);
    return kExitRunFailed;
  }
  if (!failed.empty())
    std::cout << "batch " << index << ": " << failed.size() << " of " << names.size()
              << " hosts failed (" << Names(failed) << "), within --max-fail "
              << spec.max_fail.Text() << "; going on\n";
  else
    std::cout << "batch " << index << ": all " << names.size() << " hosts succeeded\n";
  PrintOutcome(succeeded, failed);
  return kExitOk;
}

}  // namespace deployd::ctl
