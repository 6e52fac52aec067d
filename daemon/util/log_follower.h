// LogFollower: delivers the bytes appended to a file as they are written, from a given offset
// on — event-driven with inotify (a descriptor waited on by the io_context; no timer, no
// polling). Made for step logs:
//   - the file need not exist yet: it is picked up when it is created;
//   - rotation (the writer renames PATH to PATH.1 and starts a new PATH): the rest of the old
//     file is delivered, then the new file from its start;
//   - truncation: the file is read again from its start.
// What is already in the file past `start_offset` is delivered first (so lines written while
// nobody was following are not missed); an offset past the end of the file counts as 0 (the
// file was replaced since the offset was taken).
//
// One thread: everything runs on the executor given. `on_data` is never called from Start()
// nor after Stop() or destruction; it may call Stop() or destroy the follower itself.
#ifndef DEPLOYD_UTIL_LOG_FOLLOWER_H_
#define DEPLOYD_UTIL_LOG_FOLLOWER_H_

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd {

class LogFollower {
 public:
  using DataHandler = std::function<void(std::string_view data)>;

  // Fails when the file's directory cannot be watched (it does not exist, say).
  static Result<std::unique_ptr<LogFollower>> Start(boost::asio::any_io_executor ex,
                                                    std::string path, std::uint64_t start_offset,
                                                    DataHandler on_data);
  ~LogFollower();  // Stop()s
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  // Delivers, now, whatever the file holds past what was delivered: for the last bytes of a
  // writer that has just exited, whose inotify event may not have been handled yet. Stops
  // early when `on_data` pauses the follower.
  void CatchUp();
  void Stop();
  // Pause() (from `on_data`, say) stops delivering after the piece being delivered, whatever
  // the file holds: for a reader that cannot take more now. Resume() goes on where it stopped
  // (posted, not from the call). paused() says which.
  void Pause();
  void Resume();
  bool paused() const;
  // How far the current file has been delivered, and which file it is (its inode; 0 before
  // one was opened).
  std::uint64_t offset() const;
  std::uint64_t file_id() const;

  struct Impl;

 private:
  explicit LogFollower(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// The last `max_lines` lines of `path` from `from_offset` on (lines as LineSplitter cuts
// them), reading at most the last 64 KiB; empty when the file cannot be read. For evidence.
std::vector<std::string> ReadLastLines(const std::string& path, std::uint64_t from_offset,
                                       size_t max_lines);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_LOG_FOLLOWER_H_
