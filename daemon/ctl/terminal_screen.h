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

// Redraws the previous frame's lines in place: up to its first line, each line cleared and
// written again, and whatever the old frame had below the new one cleared.
class Screen {
 public:
  void Draw(const std::vector<std::string>& lines);

 private:
  size_t drawn_ = 0;
};

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_TERMINAL_SCREEN_H_
