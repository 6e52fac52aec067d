// deployctl logs RUN [STEP]: the output of a run's steps; with -f, a step's output as it grows,
// until the step has ended and its processes have exited (or deployctl is interrupted). The
// bytes are written as they come, so that a progress bar redrawn with '\r' looks on a
// terminal as it would have. A follow that loses deployd connects again and asks it to go on
// where the bytes printed end in the log (its file and offset), so that a restart of deployd
// shows nothing twice and loses nothing.
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/log_printer.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "util/clock.h"

namespace deployd::ctl {

namespace json = boost::json;

int ShowLogs(Client& client, const std::string& run_id, const std::string& step_id,
             const LogsOptions& o) {
  json::object request{{"op", "logs"}, {"run", run_id}};
  if (!step_id.empty()) request["step"] = step_id;
  if (o.timestamps) request["timestamps"] = true;
  json::object answer = client.Call(request);
  if (o.json_out) {
    std::cout << json::serialize(answer["logs"]) << "\n";
    return kExitOk;
  }
  for (const auto& ev : answer["logs"].as_array()) {
    const json::object& e = ev.as_object();
    if (step_id.empty()) std::cout << "==> " << Str(e, "step") << " <==\n";
    LogPrinter printer(o.timestamps, NowMs());
    std::cout << printer.Print(Str(e, "text"), DecodeTextMarks(e));
  }
  return kExitOk;
}

int LogsFollow(Client& client, const std::string& run_id, const std::string& step_id,
               const LogsOptions& o) {
  const bool json_out = o.json_out;
  std::string path;
  std::optional<LogPosition> last;  // where what was printed ends in the log
  LogPrinter printer(o.timestamps, NowMs());
  return WithReconnect(client, [&](bool again) {
    json::object request{{"op", "logs"}, {"run", run_id}, {"step", step_id}, {"follow", true}};
    if (o.timestamps) request["timestamps"] = true;
    if (again && last) request["resume"] = EncodeLogPosition(*last);
    client.Send(request);
    for (;;) {
      json::object line = client.Receive();
      if (IsRefusal(line)) Client::Refused(line);
      std::string type = LineType(line);
      if (type == "data") last = LogDataEnd(line).value_or(last.value_or(LogPosition{}));
      if (type == "start" && again && !(line.contains("resumed") && line["resumed"] == true))
        std::cerr << "deployctl: deployd cannot go on where the log stopped (it was rotated "
                     "meanwhile): the output from here may repeat or leave out some of it"
                  << std::endl;
      if (json_out) {
        std::cout << json::serialize(line) << std::endl;
        if (type == "end") return kExitOk;
        continue;
      }
      if (type == "start") path = Str(line, "path");
      if (type == "missed") {
        // Where the gap is, as `logs` marks output it leaves out; the stream goes on from now.
        std::string gap = "\n[… deployctl missed " + DescribeMissed(DecodeMissed(line)) +
                          " here: it did not read fast enough; the whole log is " + path + " …]\n";
        std::fwrite(gap.data(), 1, gap.size(), stdout);
      } else if (type == "data") {
        std::string text = printer.Print(LogDataText(line), DecodeTextMarks(line));
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      } else if (type == "end") {
        return kExitOk;
      }
    }
  });
}

}  // namespace deployd::ctl
