// deployctl's operator commands — cancel, pause, resume, approve, retry, skip — which steer a
// run and say what they did (a sentence, or with --json one object), and `version`.
#include <boost/json.hpp>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "deployd/protocol.h"
#include "protocol/run_wire.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// The sentence a command prints once deployd has done it.
std::string Done(const std::string& op, const std::string& run, const std::string& step) {
  if (op == "pause")
    return "run " + run + " paused: its current step finishes, no new step starts until " +
           "`deployctl resume " + run + "`";
  if (op == "approve") return "step " + step + " of run " + run + " approved";
  if (op == "cancel") return "run " + run + " cancelled";
  return "run " + run + " resumed";  // resume, retry, skip
}

}  // namespace

int RunCommand(Client& client, const OperatorCommand& c) {
  json::object request{{"op", c.op}, {"run", c.run}};
  if (!c.step.empty()) request["step"] = c.step;
  client.Call(request);
  if (!c.json_out) {
    std::cout << Done(c.op, c.run, c.step) << std::endl;
    return c.wait ? FollowPlain(client, c.run, false) : kExitOk;
  }
  // The run's state once deployd has done it: what a script checks next.
  json::object status = client.Call({{"op", "status"}, {"run", c.run}});
  json::object out{{"op", c.op}, {"run", c.run}};
  if (!c.step.empty()) out["step"] = c.step;
  out["state"] = DecodeRun(status["run"].as_object()).state;
  std::cout << json::serialize(out) << std::endl;
  return c.wait ? FollowJson(client, c.run) : kExitOk;
}

int Version(const std::function<std::unique_ptr<Client>()>& connect, bool json_out) {
  json::object client_json{{"version", DEPLOYD_VERSION}, {"protocol", kProtocolVersion}};
  json::object daemon;
  std::string unreachable;
  int code = kExitOk;
  try {
    std::unique_ptr<Client> client = connect();
    json::object ping = client->Call({{"op", "ping"}});
    daemon = {{"version", Str(ping, "version")},
              {"protocol", Int(ping, "protocol")},
              {"socket", client->where()}};
  } catch (const Exit& e) {
    unreachable = e.message;
    code = e.code;
  }
  if (json_out) {
    json::object out{{"client", client_json}};
    if (unreachable.empty()) {
      out["daemon"] = daemon;
    } else {
      out["daemon"] = nullptr;
      out["daemon_error"] = unreachable;
    }
    std::cout << json::serialize(out) << "\n";
  } else {
    std::cout << "client: deployctl " << DEPLOYD_VERSION << ", protocol " << kProtocolVersion
              << "\n";
    if (unreachable.empty()) {
      std::cout << "daemon: deployd " << Str(daemon, "version") << ", protocol "
                << Int(daemon, "protocol") << ", at " << Str(daemon, "socket") << "\n";
    } else {
      std::cout << "daemon: " << (code == kExitUnreachable ? "not reachable" : "refused") << " ("
                << unreachable << ")\n";
    }
  }
  return code;
}

}  // namespace deployd::ctl
