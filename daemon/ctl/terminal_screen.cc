#include "ctl/terminal_screen.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace deployd::ctl {

winsize TerminalSize() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0) {
    ws.ws_col = 80;
    ws.ws_row = 24;
  }
  return ws;
}

OutputStyle StdoutStyle() {
  if (!::isatty(STDOUT_FILENO)) return {};
  const char* term = std::getenv("TERM");
  if (term && std::string_view(term) == "dumb") return {};
  const char* no_color = std::getenv("NO_COLOR");
  return {.color = !(no_color && *no_color), .cursor = true};
}

int ScreenWidth() { return ::isatty(STDOUT_FILENO) ? TerminalSize().ws_col : 0; }

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
