// deployctl logs RUN STEP -f: a step's output as it grows, until the step has ended and its
// processes have exited (or deployctl is interrupted). The bytes are written as they come, so
// that a progress bar redrawn with '\r' looks on a terminal as it would have.
#include <boost/json.hpp>
#include <cstdio>

#include "ctl/ctl_verbs.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"

namespace deployd::ctl {

namespace json = boost::json;

int LogsFollow(Client& client, const std::string& run_id, const std::string& step_id) {
  client.Send({{"op", "logs"}, {"run", run_id}, {"step", step_id}, {"follow", true}});
  std::string path;
  for (;;) {
    json::object line = client.Receive();
    if (IsRefusal(line)) Client::Refused(line);
    std::string type = LineType(line);
    if (type == "start") path = Str(line, "path");
    if (type == "missed") {
      // Where the gap is, as `logs` marks output it leaves out; the stream goes on from now.
      std::string gap = "\n[… deployctl missed " + DescribeMissed(DecodeMissed(line)) +
                        " here: it did not read fast enough; the whole log is " + path + " …]\n";
      std::fwrite(gap.data(), 1, gap.size(), stdout);
    } else if (type == "data") {
      std::string text = LogDataText(line);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    } else if (type == "end") {
      return kExitOk;
    }
  }
}

}  // namespace deployd::ctl
