// deployctl watch: the live view of a run. On a terminal the table of watch_view.h is redrawn
// in place (ANSI: cursor up, clear line; no curses), after each line of the `follow` stream and
// once a second while the run goes on, so that elapsed times, rates and "no progress for …"
// keep moving between events. Elsewhere it is the plain follow of ctl_follow.cc. Both go on
// through a restart of deployd (WithReconnect).
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/terminal_screen.h"
#include "ctl/watch_view.h"
#include "deployd/protocol.h"
#include "protocol/answer.h"
#include "util/clock.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

constexpr auto kTick = std::chrono::seconds(1);

// Follows the run into `view` until it has ended, drawing it on `screen`.
void FollowIntoView(Client& client, const std::string& run_id, RunView& view, Screen& screen,
                    std::int64_t& last_seq) {
  client.Send(FollowRequest(run_id, last_seq));
  auto draw = [&] {
    winsize ws = TerminalSize();
    // One line fewer than the screen: a frame that fills it would scroll on its last newline.
    screen.Draw(RenderRunView(view, NowMs(), ws.ws_col, ws.ws_row - 1, StdoutStyle().color));
  };
  for (;;) {
    // Everything that has arrived is applied before the next frame (the stream first replays
    // the run's history: one frame for it, not one per event).
    std::optional<json::object> line =
        client.Receive(IsLive(view) ? kTick : std::chrono::hours(24));
    while (line) {
      if (IsRefusal(*line)) Client::Refused(*line);
      if (!SeenBefore(*line, last_seq)) ApplyFollowLine(view, *line);
      if (view.ended) break;
      line = client.Receive(std::chrono::milliseconds(0));
    }
    draw();
    if (view.ended) return;
  }
}

int WatchTerminal(Client& client, const std::string& run_id) {
  RunView view;
  Screen screen;
  std::int64_t last_seq = 0;
  WithReconnect(client, [&](bool again) {
    // What was said on stderr stays above; the view is drawn afresh below it.
    if (again) screen.Forget();
    FollowIntoView(client, run_id, view, screen, last_seq);
    return 0;
  });
  std::cout << "run " << run_id << " " << view.state << " after "
            << FormatElapsed(view.finished_at_ms - view.created_at_ms);
  if (!view.reason.empty()) std::cout << ": " << view.reason;
  std::cout << std::endl;
  if (view.state == "failed")
    std::cout << "(`deployctl why " << run_id << "` shows the evidence)" << std::endl;
  return view.state == "succeeded" ? kExitOk : kExitRunFailed;
}

}  // namespace

int WatchRun(Client& client, const std::string& run_id) {
  // A terminal that cannot move its cursor (TERM=dumb) gets the plain lines too.
  if (!StdoutStyle().cursor) return FollowPlain(client, run_id, true);
  return WatchTerminal(client, run_id);
}

}  // namespace deployd::ctl
