#include "plan/diagnostic.h"

namespace deployd {

std::string Diagnostic::Format() const {
  if (line <= 0) return file + ": error: " + message;
  std::string out = file + ":" + std::to_string(line) + ":" + std::to_string(column) +
                    ": error: " + message + "\n" + source_line + "\n";
  // Copy tabs so the caret lines up however the terminal expands them; a UTF-8 character is one
  // column on screen, so its continuation bytes add nothing.
  int at = caret > 0 ? caret : column;
  for (int i = 0; i + 1 < at; ++i) {
    char c = i < static_cast<int>(source_line.size()) ? source_line[i] : ' ';
    if (c == '\t') {
      out += '\t';
    } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      out += ' ';
    }
  }
  out += '^';
  return out;
}

}  // namespace deployd
