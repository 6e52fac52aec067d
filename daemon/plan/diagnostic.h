// Diagnostic: one problem found in an operator's YAML (a plan or deployd.yaml), with its
// position, printed gcc-style.
#ifndef DEPLOYD_PLAN_DIAGNOSTIC_H_
#define DEPLOYD_PLAN_DIAGNOSTIC_H_

#include <string>

namespace deployd {

struct Diagnostic {
  std::string file;
  int line = 0;    // 1-based; 0 when the problem has no position (e.g. a --var)
  int column = 0;  // 1-based
  std::string message;
  std::string source_line;  // the quoted line, without its newline, cut around `column` if long
  int caret = 0;            // the caret's 1-based byte column in source_line; 0: `column`

  // "FILE:LINE:COL: error: MESSAGE\nSOURCE_LINE\n    ^" (no trailing newline); without a
  // position: "FILE: error: MESSAGE".
  std::string Format() const;
};

}  // namespace deployd

#endif  // DEPLOYD_PLAN_DIAGNOSTIC_H_
