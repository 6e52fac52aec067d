// watch, why and retry of a rollout: the coordinator's run says which batches have begun; each
// of their hosts is asked over ssh for its run (host_session.h).
//
// `watch` shows one row per host — its batch, state, run, current step, elapsed time and the
// step's progress (or how long it has been unreachable) — redrawn in place on a terminal,
// else as lines as things happen, then the final table. `why` gathers the failing hosts'
// evidence (each host's own `why`) and names the hosts left untouched. `retry` retries the
// failed hosts' runs from their failed steps, then the rollout from its failed step.
#include <unistd.h>

#include <boost/json.hpp>
#include <iostream>
#include <memory>

#include "ctl/ctl_verbs.h"
#include "ctl/host_session.h"
#include "ctl/rollout_verbs.h"
#include "ctl/terminal_screen.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "util/clock.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

using Sessions = std::map<std::string, std::unique_ptr<HostSession>>;

size_t BatchOf(const RolloutSpec& spec, const std::string& host) {
  for (size_t b = 0; b < spec.batches.size(); ++b)
    for (const std::string& h : spec.batches[b])
      if (h == host) return b;
  return 0;
}

// The batches whose step has begun, by the coordinator's view of its run.
std::vector<size_t> BegunBatches(const RolloutSpec& spec, const RunView& view) {
  std::vector<size_t> begun;
  for (size_t b = 0; b < spec.batches.size(); ++b)
    for (const StepView& s : view.steps)
      if (s.id == BatchStepId(b) && (s.started_at_ms || s.state != "pending")) begun.push_back(b);
  return begun;
}

void AddSessions(const RolloutSpec& spec, size_t batch, HostSession::Mode mode,
                 HostSession::Report report, Sessions& sessions, SessionLoop& loop) {
  for (const std::string& name : spec.batches[batch]) {
    if (sessions.count(name)) continue;
    auto s = std::make_unique<HostSession>(spec, *spec.Host(name), mode, report);
    loop.sessions.push_back(s.get());
    sessions[name] = std::move(s);
  }
}

const StepView* CurrentStep(const RunView& view) {
  for (const StepView& s : view.steps)
    if (s.state == "running" || s.state == "verifying" || s.state == "waiting") return &s;
  return nullptr;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// One row: HOST BATCH STATE RUN STEP TIME DETAIL.
std::vector<std::string> Row(const RolloutSpec& spec, const std::string& name, const HostSession* s,
                             bool ended, std::int64_t now) {
  std::string batch = std::to_string(BatchOf(spec, name) + 1);
  if (!s) return {name, batch, ended ? "untouched" : "pending", "", "", "", "not started"};
  std::string state, step, time, detail;
  const RunView& v = s->view();
  if (!s->run_id().empty() && v.created_at_ms)
    time = FormatElapsed((v.finished_at_ms ? v.finished_at_ms : now) - v.created_at_ms);
  if (const StepView* current = CurrentStep(v)) {
    step = current->id;
    detail = current->progress ? DescribeProgress(*current->progress, now) : current->detail;
  }
  switch (s->outcome()) {
    case HostSession::Outcome::kSucceeded:
      state = "succeeded";
      break;
    case HostSession::Outcome::kFailed:
      state = "failed";
      detail = s->failure();
      break;
    case HostSession::Outcome::kNotStarted:
      state = "not started";
      break;
    case HostSession::Outcome::kPending:
    case HostSession::Outcome::kUnfinished:
      state = s->run_id().empty() ? "starting" : v.state;
      if (s->unreachable_since_ms()) {
        state = "unreachable";
        detail = "unreachable for " + FormatElapsed(now - s->unreachable_since_ms()) + ": " +
                 s->last_error();
      }
      break;
  }
  return {name, batch, state, s->run_id(), step, time, detail};
}

std::vector<std::string> Table(const RolloutRun& r, const RunView& coordinator,
                               const Sessions& sessions, std::int64_t now, size_t width) {
  std::vector<std::vector<std::string>> rows{
      {"HOST", "BATCH", "STATE", "RUN", "STEP", "TIME", "DETAIL"}};
  for (const RolloutHost& h : r.spec.hosts) {
    auto it = sessions.find(h.name);
    rows.push_back(Row(r.spec, h.name, it == sessions.end() ? nullptr : it->second.get(),
                       !IsLive(coordinator), now));
  }
  std::vector<size_t> widths(7, 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < 6; ++c) widths[c] = std::max(widths[c], row[c].size());
  std::int64_t end = coordinator.finished_at_ms ? coordinator.finished_at_ms : now;
  std::vector<std::string> lines{
      "rollout " + r.run.id + " (" + r.spec.plan_file + " over " +
      std::to_string(r.spec.hosts.size()) + " hosts of " + r.spec.inventory +
      "): " + coordinator.state + ", " +
      FormatElapsed(end - (coordinator.created_at_ms ? coordinator.created_at_ms : now))};
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < 6; ++c) line += Pad(row[c], widths[c]) + "  ";
    line += row[6];
    lines.push_back(line.substr(0, width));
  }
  return lines;
}

// The sessions of the hosts of begun batches, in `mode`, run until each is done.
Sessions LookAtHosts(const RolloutRun& r, HostSession::Report report) {
  Sessions sessions;
  SessionLoop loop;
  RunView view = RunViewOf(r.run);
  for (size_t b : BegunBatches(r.spec, view))
    AddSessions(r.spec, b, HostSession::Mode::kLook, report, sessions, loop);
  RunSessions(loop);
  return sessions;
}

// A Client to one host's deployd, as `--host` makes one; the global choice is put back after.
template <typename Use>
void OnHost(const RolloutHost& host, Use use) {
  std::optional<SshTarget> before;
  if (const SshTarget* t = RemoteHost()) before = *t;
  std::string before_socket = RemoteSocket();
  UseRemoteHost(ParseSshUrl(host.address).value(), "");
  try {
    Client client("");
    use(client);
  } catch (const Exit& e) {
    std::cout << "  " << e.message << "\n";
  }
  UseRemoteHost(before, before_socket);
}

void Quiet(const HostSession&, const std::string&) {}

}  // namespace

std::optional<RolloutRun> FindRollout(Client& coordinator, const std::string& run_id) {
  json::object answer = coordinator.Call({{"op", "status"}, {"run", run_id}});
  WireRun run = DecodeRun(answer["run"].as_object());
  auto spec_var = run.vars.find("rollout");
  if (spec_var == run.vars.end() || !run.key.starts_with("rollout/")) return std::nullopt;
  Result<RolloutSpec> spec = DecodeSpec(spec_var->second);
  if (!spec.ok()) Die(kExitUsage, run_id + ": " + spec.status().message());
  return RolloutRun{std::move(run), std::move(spec.value())};
}

int WatchRollout(Client& coordinator, const RolloutRun& r) {
  bool terminal = ::isatty(STDOUT_FILENO);
  coordinator.Send({{"op", "follow"}, {"run", r.run.id}});
  RunView view = RunViewOf(r.run);
  Sessions sessions;
  SessionLoop loop;
  auto report = [&](const HostSession& s, const std::string& line) {
    if (!terminal) std::cout << s.host().name << ": " << line << std::endl;
  };
  auto apply = [&](const json::object& line) {
    if (IsRefusal(line)) Client::Refused(line);
    std::string type = LineType(line);
    if (type == "snapshot") {
      view = RunViewOf(LineRun(line));
    } else {
      ApplyFollowLine(view, line);
    }
    if (!terminal && type == "event") {
      WireEvent e = DecodeEvent(line);
      if (e.kind == "step.state" && e.state != "verifying")
        std::cout << "rollout: " << e.step << " " << e.state << std::endl;
    }
  };
  auto add_sessions = [&] {
    for (size_t b : BegunBatches(r.spec, view))
      AddSessions(r.spec, b, IsLive(view) ? HostSession::Mode::kAwait : HostSession::Mode::kLook,
                  report, sessions, loop);
  };
  auto take = [&] {
    while (!view.ended)
      if (std::optional<json::object> line = coordinator.ReceiveReady()) {
        apply(*line);
      } else {
        break;
      }
    add_sessions();
  };
  // The snapshot first: a rollout that has finished is read to its end at once, and its hosts
  // are looked at once; a live one is followed.
  apply(coordinator.Receive());
  if (!IsLive(view))
    while (!view.ended) apply(coordinator.Receive());
  Screen screen;
  auto draw = [&] {
    winsize ws = TerminalSize();
    screen.Draw(Table(r, view, sessions, NowMs(), ws.ws_col));
  };
  take();
  loop.extra = view.ended ? -1 : coordinator.fd();
  loop.on_extra = [&] {
    take();
    if (view.ended) loop.extra = -1;
    if (terminal) draw();
  };
  // Live: until the rollout ends. Ended already: until every host has been looked at.
  if (!view.ended) loop.stop = [&] { return view.ended; };
  if (terminal) {
    loop.tick_ms = 1000;
    loop.on_tick = draw;
    draw();
  }
  RunSessions(loop);
  // Hosts the live view had not heard the end of (a run that ended as the rollout did, a host
  // unreachable): one last look each.
  SessionLoop last;
  for (auto& [name, s] : sessions) {
    if (s->done()) continue;
    s = std::make_unique<HostSession>(r.spec, *r.spec.Host(name), HostSession::Mode::kLook, report);
    last.sessions.push_back(s.get());
  }
  RunSessions(last);
  std::vector<std::string> table = Table(r, view, sessions, NowMs(), 400);
  if (terminal) {
    screen.Draw(table);
  } else {
    for (const std::string& line : table) std::cout << line << "\n";
  }
  std::cout << "rollout " << r.run.id << " " << view.state
            << (view.reason.empty() ? "" : ": " + view.reason) << std::endl;
  if (view.state == "failed")
    std::cout << "(`deployctl why " << r.run.id << "` gathers the failing hosts' evidence)"
              << std::endl;
  return view.state == "succeeded"                             ? kExitOk
         : view.state == "failed" || view.state == "cancelled" ? kExitRunFailed
                                                               : kExitOk;
}

int WhyRollout(const RolloutRun& r, bool json_out) {
  Sessions sessions = LookAtHosts(r, Quiet);
  std::vector<std::string> untouched;
  for (const RolloutHost& h : r.spec.hosts)
    if (!sessions.count(h.name)) untouched.push_back(h.name);
  if (json_out) {
    json::array hosts;
    for (const RolloutHost& h : r.spec.hosts) {
      auto it = sessions.find(h.name);
      json::object o{
          {"name", h.name}, {"address", h.address}, {"batch", BatchOf(r.spec, h.name) + 1}};
      if (it == sessions.end()) {
        o["state"] = "untouched";
      } else {
        std::vector<std::string> row = Row(r.spec, h.name, it->second.get(), true, NowMs());
        o["state"] = row[2];
        o["run"] = row[3];
        o["reason"] = it->second->failure();
        if (row[2] == "failed" && !row[3].empty())
          OnHost(h, [&](Client& c) { o["why"] = c.Call({{"op", "why"}, {"run", row[3]}})["why"]; });
      }
      hosts.push_back(std::move(o));
    }
    std::cout << json::serialize(json::object{{"rollout", EncodeRun(r.run)}, {"hosts", hosts}})
              << "\n";
    return kExitOk;
  }
  std::cout << "rollout " << r.run.id << " (" << r.spec.plan_file << " over " << r.spec.hosts.size()
            << " hosts of " << r.spec.inventory << ") " << r.run.state
            << (r.run.reason.empty() ? "" : ": " + r.run.reason) << "\n";
  size_t failed = 0;
  for (const RolloutHost& h : r.spec.hosts) {
    auto it = sessions.find(h.name);
    if (it == sessions.end() || it->second->outcome() != HostSession::Outcome::kFailed) continue;
    ++failed;
    const HostSession& s = *it->second;
    std::cout << "\n== " << h.name << " (" << h.address << ", batch " << BatchOf(r.spec, h.name) + 1
              << "): " << s.failure() << " ==\n";
    if (s.run_id().empty() || s.view().state.empty()) continue;
    std::cout.flush();
    OnHost(h, [&](Client& c) { Why(c, s.run_id(), false); });
  }
  if (!failed) std::cout << "no host failed\n";
  if (!untouched.empty()) {
    std::string list;
    for (const std::string& n : untouched) list += (list.empty() ? "" : ", ") + n;
    std::cout << "\nuntouched (their batch never began): " << list << "\n";
  }
  return kExitOk;
}

int RetryRollout(Client& coordinator, const RolloutRun& r, bool wait) {
  if (r.run.state != "failed" && r.run.state != "cancelled")
    Die(kExitUsage, "rollout " + r.run.id + " is " + r.run.state +
                        "; only a failed or cancelled rollout can be retried");
  Sessions sessions = LookAtHosts(r, Quiet);
  for (const RolloutHost& h : r.spec.hosts) {
    auto it = sessions.find(h.name);
    if (it == sessions.end() || it->second->outcome() != HostSession::Outcome::kFailed) continue;
    const HostSession& s = *it->second;
    if (s.run_id().empty()) {
      std::cout << h.name << ": " << s.failure() << "; the rollout tries it again\n";
      continue;
    }
    OnHost(h, [&](Client& c) {
      c.Call({{"op", "retry"}, {"run", s.run_id()}});
      std::cout << h.name << ": run " << s.run_id() << " retried from its failed step\n";
    });
  }
  coordinator.Call({{"op", "retry"}, {"run", r.run.id}});
  std::cout << "rollout " << r.run.id << " resumed" << std::endl;
  if (!wait) return kExitOk;
  std::optional<RolloutRun> again = FindRollout(coordinator, r.run.id);
  return WatchRollout(coordinator, *again);
}

}  // namespace deployd::ctl
