// TerminalScreen: a frame of lines redrawn in place on a terminal (ANSI: cursor up, clear line;
// no curses), for deployctl's live views (`watch` of a run or of a rollout).
#ifndef DEPLOYD_CTL_TERMINAL_SCREEN_H_
#define DEPLOYD_CTL_TERMINAL_SCREEN_H_

#include <sys/ioctl.h>

#include <string>
#include <vector>

namespace deployd::ctl {

// Read at every frame: the window may have been resized (80x24 when it cannot be read).
winsize TerminalSize();
// The width of the terminal standard output is, 0 when it is not one (no limit: a pipe, a file
// take whole lines).
int ScreenWidth();

// What deployctl's output may use where standard output goes: colours for states on a
// terminal, unless NO_COLOR is set to anything but "" (no-color.org) or TERM is "dumb"; cursor
// movement (a table redrawn in place) on a terminal unless TERM is "dumb". Neither when
// standard output is not a terminal.
struct OutputStyle {
  bool color = false;
  bool cursor = false;
};
OutputStyle StdoutStyle();

// Redraws the previous frame's lines in place: up to its first line, each line cleared and
// written again, and whatever the old frame had below the new one cleared.
class Screen {
 public:
  void Draw(const std::vector<std::string>& lines);
  // The next frame is drawn below what is on the screen now (lines written meanwhile stay).
  void Forget() { drawn_ = 0; }

 private:
  size_t drawn_ = 0;
};

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_TERMINAL_SCREEN_H_
