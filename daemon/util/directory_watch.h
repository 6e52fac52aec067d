// DirectoryWatch: tells when an entry of a directory is created, deleted or renamed — inotify,
// a descriptor waited on by the io_context, no polling. deployd watches its state directory
// with it, so that its database's files being deleted or replaced is noticed at once, not at
// the next write.
//
// One thread: everything runs on the executor given. `on_change` is never called from Start()
// nor after the watch is destroyed.
#ifndef DEPLOYD_UTIL_DIRECTORY_WATCH_H_
#define DEPLOYD_UTIL_DIRECTORY_WATCH_H_

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

class DirectoryWatch {
 public:
  // Called with the entry's name; "" when the kernel dropped events (anything may have
  // changed).
  using Handler = std::function<void(std::string_view name)>;

  static Result<std::unique_ptr<DirectoryWatch>> Start(boost::asio::any_io_executor ex,
                                                       const std::string& dir, Handler on_change);
  ~DirectoryWatch();
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  struct Impl;

 private:
  explicit DirectoryWatch(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace deployd

#endif  // DEPLOYD_UTIL_DIRECTORY_WATCH_H_
