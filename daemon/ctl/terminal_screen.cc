#include "ctl/terminal_screen.h"

#include <unistd.h>

#include <cstdio>

namespace deployd::ctl {

winsize TerminalSize() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0) {
    ws.ws_col = 80;
    ws.ws_row = 24;
  }
  return ws;
}

void Screen::Draw(const std::vector<std::string>& lines) {
  std::string out;
  if (drawn_ > 0) out += "\x1b[" + std::to_string(drawn_) + "A";
  for (const std::string& line : lines) out += "\r\x1b[2K" + line + "\n";
  out += "\x1b[J";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  drawn_ = lines.size();
}

}  // namespace deployd::ctl
