#include "actions/gpu/gpus_free_action.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actions/gpu/gpu_state.h"
#include "actions/gpu/gpus_free_verdict.h"
#include "process/process_kill.h"
#include "process/process_stop.h"
#include "util/units.h"

namespace deployd {
namespace {

using Clock = std::chrono::steady_clock;

// The GPU state, read again and again: NVML's init is the slow part (seconds without
// persistence mode), so one session stays open while polling; nvidia-smi when NVML cannot be
// opened or read (or is turned off).
class GpuReader {
 public:
  GpuReader() : run_nvidia_smi_(BlockingCommandRunner()) {
    nvml_error_ = NvmlOffReason();
    if (!nvml_error_.empty()) return;
    auto session = NvmlSession::Open();
    if (session.ok()) {
      session_ = std::move(session.value());
    } else {
      nvml_error_ = session.status().message();
    }
  }

  // Errors give both reasons, as ReadGpuState does.
  Result<GpuSnapshot> Read() {
    if (session_) {
      auto snapshot = session_->Read();
      if (snapshot.ok()) return snapshot;
      nvml_error_ = snapshot.status().message();
    }
    auto smi = ReadNvidiaSmi(run_nvidia_smi_);
    if (smi.ok()) return smi;
    return GpuStateError(nvml_error_, smi.status().message());
  }

 private:
  CommandRunner run_nvidia_smi_;
  std::unique_ptr<NvmlSession> session_;
  std::string nvml_error_;
};

// One read, judged. A GPU that is not there will not appear by waiting: that is an error at
// once (a wrong index in the plan, or a GPU that fell off the bus), as is a host without GPUs.
Result<GpusFreeResult> ReadVerdict(GpuReader& reader, const GpuSelection& gpu) {
  auto snapshot = reader.Read();
  if (!snapshot.ok()) return snapshot.status();
  GpusFreeResult result = EvaluateGpusFree(*snapshot, gpu.gpus, gpu.max_used);
  bool missing =
      result.gpus.empty() || std::any_of(result.gpus.begin(), result.gpus.end(),
                                         [](const GpuFreeVerdict& v) { return !v.present; });
  if (missing) return Status::Error(result.summary);
  return result;
}

// "GPU 0" / "GPUs 0,1,2,3", for the GPUs judged.
std::string GpusText(const GpusFreeResult& result) {
  std::string list;
  for (const GpuFreeVerdict& v : result.gpus) {
    list += (list.empty() ? "" : ",") + std::to_string(v.index);
  }
  return (result.gpus.size() == 1 ? "GPU " : "GPUs ") + list;
}

// The library's summary without its "gpus_free 0,1: " prefix: "free (…)" or "GPU 0: …".
std::string Detail(const GpusFreeResult& result) {
  size_t colon = result.summary.find(": ");
  return colon == std::string::npos ? result.summary : result.summary.substr(colon + 2);
}

std::string VerdictText(const GpuFreeVerdict& v) {
  if (v.free) return "free";
  std::string text;
  for (const std::string& reason : v.reasons) text += (text.empty() ? "" : ", ") + reason;
  return text;
}

// Says "GPU 0: pid 812 (VLLM::Worker_TP0) holds 70.2GiB" for each GPU whose state changed
// since the last line about it ("GPU 0: free" while others are not); GPUs first seen free are
// not mentioned.
void SayChanges(const GpusFreeResult& result, std::map<int, std::string>& said,
                const ActionContext& ctx) {
  for (const GpuFreeVerdict& v : result.gpus) {
    std::string text = VerdictText(v);
    auto it = said.find(v.index);
    // When all are free, the line that says so covers each.
    bool quiet = it == said.end() ? v.free : it->second == text || result.all_free;
    if (quiet) {
      said[v.index] = text;
      continue;
    }
    said[v.index] = text;
    ctx.say("GPU " + std::to_string(v.index) + ": " + text);
  }
}

// Stops the processes holding the GPUs that are not free, as `kill` would. Pids that cannot
// be stopped here (another pid namespace, protected) are said; the wait that follows then
// fails naming them.
Status StopHolders(const GpusFreeResult& result, Duration grace, const ActionContext& ctx) {
  std::vector<pid_t> pids;
  std::map<pid_t, std::string> names;
  for (const GpuFreeVerdict& v : result.gpus) {
    if (v.free) continue;
    for (const GpuProcess& p : v.processes) {
      if (!names.emplace(p.pid, p.name).second) continue;
      // The pid as the GPU reported it, a moment ago: signalled only if it still names that
      // process (a pid reused since, or a host pid seen from a container, is not).
      std::optional<ProcessInfo> now = ReadProcess(p.pid);
      if (now && !p.name.empty() && !SameProcessName(p.name, *now)) {
        ctx.say("not signalling pid " + std::to_string(p.pid) + ": the GPU reported " + p.name +
                ", the pid is " + now->Title() + " now");
        names.erase(p.pid);
        continue;
      }
      pids.push_back(p.pid);
    }
  }
  if (pids.empty()) {
    ctx.say("no process holds them: waiting for the memory to be released");
    return Status::Ok();
  }
  KillOptions options;
  options.pids = pids;
  options.whole_groups = true;
  Result<KillPlan> plan = KillPlan::Select(options);
  if (!plan.ok()) return plan.status();
  for (const ExcludedProcess& e : plan->excluded()) {
    ctx.say("not signalling " + e.process.Name() + ": " + e.why);
    names.erase(e.process.pid);
  }
  for (const KillTarget& t : plan->targets()) names.erase(t.pid);
  for (const auto& [pid, name] : names) {
    ctx.say("pid " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")") +
            " is not visible here (another pid namespace?): cannot stop it");
  }
  if (plan->targets().empty()) return Status::Ok();
  return StopProcesses(*plan, grace, ctx.say);
}

}  // namespace

bool SameProcessName(const std::string& reported, const ProcessInfo& info) {
  auto base = [](const std::string& path) { return path.substr(path.rfind('/') + 1); };
  std::vector<std::string> names = {info.Title(), info.stat.comm};
  if (!info.argv.empty()) names.insert(names.end(), {info.argv[0], base(info.argv[0])});
  char exe[4096];
  ssize_t n = ::readlink(("/proc/" + std::to_string(info.pid()) + "/exe").c_str(), exe, sizeof exe);
  if (n > 0) names.push_back(std::string(exe, static_cast<size_t>(n)));
  for (const std::string& name : names) {
    if (name == reported || base(name) == base(reported)) return true;
  }
  // comm is cut to 15 characters.
  return info.stat.comm.size() == 15 && base(reported).starts_with(info.stat.comm);
}

Status RunGpusFreeAction(const GpusFreeAction& action, const ActionContext& ctx) {
  GpuReader reader;
  Result<GpusFreeResult> result = ReadVerdict(reader, action.gpu);
  if (!result.ok()) return result.status();
  std::map<int, std::string> said;
  SayChanges(*result, said, ctx);
  if (!result->all_free && action.kill) {
    Status stopped = StopHolders(*result, action.grace, ctx);
    if (!stopped.ok()) return stopped;
    result = ReadVerdict(reader, action.gpu);
    if (!result.ok()) return result.status();
    SayChanges(*result, said, ctx);
  }

  const std::string gpus = GpusText(*result);
  const std::string stable = FormatDuration(action.stable_for);
  auto deadline = Clock::now() + action.within;
  std::optional<Clock::time_point> free_since;
  for (;;) {
    auto now = Clock::now();
    if (result->all_free) {
      if (!free_since) {
        free_since = now;
        ctx.say(
            gpus + " " + Detail(*result) +
            (action.stable_for.count() > 0 ? "; waiting " + stable + " for it to stay so" : ""));
      }
      if (now - *free_since >= action.stable_for) {
        if (action.stable_for.count() > 0) ctx.say("free for " + stable);
        return Status::Ok();
      }
    } else if (free_since) {
      ctx.say("not free any more after " +
              FormatDuration(std::chrono::duration_cast<Duration>(now - *free_since)) +
              ": waiting for " + stable + " of free reads again");
      free_since.reset();
    }
    if (now >= deadline) {
      if (free_since) {
        return Status::Error(
            gpus + " not free for " + stable + " within " + FormatDuration(action.within) +
            " (free for the last " +
            FormatDuration(std::chrono::duration_cast<Duration>(now - *free_since)) + ")");
      }
      return Status::Error(gpus + " not free within " + FormatDuration(action.within) + ": " +
                           Detail(*result));
    }
    // Read again after `every`; sooner when `stable_for` or `within` runs out before that.
    auto next = std::min(now + action.every, deadline);
    if (free_since) next = std::min(next, *free_since + action.stable_for);
    std::this_thread::sleep_until(next);
    result = ReadVerdict(reader, action.gpu);
    if (!result.ok()) return result.status();
    SayChanges(*result, said, ctx);
  }
}

CheckOutcome ProbeGpusFree(const Check& check) {
  CheckOutcome outcome;
  std::string target;
  for (int index : check.gpu.gpus) target += (target.empty() ? "" : ",") + std::to_string(index);
  std::string subject = "gpus_free " + (target.empty() ? std::string("(all)") : target);
  if (target.empty()) target = "all";
  auto snapshot = ReadGpuState(BlockingCommandRunner(check.timeout));
  if (!snapshot.ok()) {
    outcome.summary = subject + ": " + snapshot.status().message();
    outcome.evidence["check"] = "gpus_free";
    outcome.evidence["target"] = target;
    outcome.evidence["error"] = snapshot.status().message();
    return outcome;
  }
  GpusFreeResult result = EvaluateGpusFree(*snapshot, check.gpu.gpus, check.gpu.max_used);
  outcome.passed = result.all_free;
  outcome.summary = std::move(result.summary);
  outcome.evidence = std::move(result.evidence);
  outcome.evidence["target"] = target;
  return outcome;
}

}  // namespace deployd
