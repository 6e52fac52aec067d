// deployctl rollout-batch: one step of a rollout (rollout_spec.h), run by the coordinator. It
// reads the rollout from the coordinator (the run of the rollout's key), drives the batch's
// hosts at once (host_session.h: each host's run created once, under its key, and followed
// through lost connections), and exits with the batch's verdict: 1 when more hosts failed than
// --max-fail allows, else 0. `--batch all` is the verdict step: it creates nothing, waits for
// every host's run and fails when any host failed.
//
// Its output is the step's log: one line per thing that happens to a host ("h3: started run
// kimi-4", "h3: unreachable for 40s (…); next try in 8s"), with "[done/all]" as each host ends,
// which deployd reads as the step's progress.
#include <boost/json.hpp>
#include <iostream>
#include <memory>

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

}  // namespace

int RolloutBatch(const std::string& socket, const std::string& key, const std::string& batch) {
  RolloutRun rollout;
  {
    Client coordinator(socket);
    json::object answer = coordinator.Call({{"op", "status"}, {"key", key}});
    rollout.run = DecodeRun(answer["run"].as_object());
    Result<RolloutSpec> spec = DecodeSpec(rollout.run.vars["rollout"]);
    if (!spec.ok()) Die(kExitUsage, spec.status().message());
    rollout.spec = std::move(spec.value());
  }
  const RolloutSpec& spec = rollout.spec;
  bool verdict = batch == "all";
  size_t index = 0;
  if (!verdict) {
    index = static_cast<size_t>(std::atoi(batch.c_str()));
    if (index < 1 || index > spec.batches.size() || std::to_string(index) != batch)
      Die(kExitUsage, "--batch expects 1 to " + std::to_string(spec.batches.size()) +
                          " or all, not '" + batch + "'");
  }
  std::vector<std::string> names;
  if (verdict) {
    for (const RolloutHost& h : spec.hosts) names.push_back(h.name);
    std::cout << "verdict of rollout " << rollout.run.id << ": " << names.size() << " hosts\n";
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
    loop.sessions.push_back(sessions.back().get());
  }
  RunSessions(loop);

  std::vector<std::string> failed, not_started;
  for (const auto& s : sessions) {
    if (s->outcome() == HostSession::Outcome::kFailed) failed.push_back(s->host().name);
    if (s->outcome() == HostSession::Outcome::kNotStarted) not_started.push_back(s->host().name);
  }
  if (verdict) {
    if (!not_started.empty())
      std::cout << "not started (their batch was skipped): " << Names(not_started) << "\n";
    if (!failed.empty()) {
      std::cout << "rollout failed on " << failed.size() << " of " << names.size()
                << " hosts: " << Names(failed) << " (`deployctl why " << rollout.run.id
                << "`; `deployctl retry " << rollout.run.id << "` takes them on)" << std::endl;
      return kExitRunFailed;
    }
    std::cout << "rollout succeeded on " << names.size() - not_started.size() << " of "
              << names.size() << " hosts" << std::endl;
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
    std::cout.flush();
    return kExitRunFailed;
  }
  if (!failed.empty())
    std::cout << "batch " << index << ": " << failed.size() << " of " << names.size()
              << " hosts failed (" << Names(failed) << "), within --max-fail "
              << spec.max_fail.Text() << "; going on\n";
  else
    std::cout << "batch " << index << ": all " << names.size() << " hosts succeeded\n";
  std::cout.flush();
  return kExitOk;
}

}  // namespace deployd::ctl
