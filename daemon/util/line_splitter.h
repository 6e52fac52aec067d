// LineSplitter: cuts a byte stream into output lines the way a terminal shows them — at '\n'
// and at '\r' (progress bars redraw with '\r'), dropping empty pieces; a line longer than
// kMaxLineBytes is cut there. Bytes after the last line end wait for the next Feed().
#ifndef DEPLOYD_UTIL_LINE_SPLITTER_H_
#define DEPLOYD_UTIL_LINE_SPLITTER_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace deployd {

class LineSplitter {
 public:
  using LineHandler = std::function<void(std::string_view line)>;
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  // Calls `on_line` for each line `data` completes.
  // REQUIRES: the splitter outlives the call (an `on_line` that may drop its owner must keep
  // it alive, e.g. through a shared_ptr).
  void Feed(std::string_view data, const LineHandler& on_line);
  // The unfinished line, if any, as a line (the stream has ended).
  void Flush(const LineHandler& on_line);

 private:
  std::string partial_;
};

}  // namespace deployd

#endif  // DEPLOYD_UTIL_LINE_SPLITTER_H_
