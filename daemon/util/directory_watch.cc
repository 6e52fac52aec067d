#include "util/directory_watch.h"

#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>

namespace deployd {

namespace asio = boost::asio;

struct DirectoryWatch::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor ex, Handler h) : events(ex), on_change(std::move(h)) {}

  asio::posix::stream_descriptor events;  // the inotify descriptor
  Handler on_change;
  bool stopped = false;

  void Wait() {
    events.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code ec) {
                        if (ec || self->stopped) return;
                        self->Drain();
                        if (!self->stopped) self->Wait();
                      });
  }

  void Drain() {
    alignas(inotify_event) char raw[4096];
    for (;;) {
      ssize_t n = ::read(events.native_handle(), raw, sizeof raw);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      for (ssize_t at = 0; at < n && !stopped;) {
        const auto* e = reinterpret_cast<const inotify_event*>(raw + at);
        if (e->mask & IN_Q_OVERFLOW) {
          on_change("");
        } else if (e->len > 0) {
          on_change(std::string_view(e->name));
        }
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
  }
};

DirectoryWatch::DirectoryWatch(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

DirectoryWatch::~DirectoryWatch() {
  impl_->stopped = true;
  boost::system::error_code ignored;
  impl_->events.close(ignored);
}

Result<std::unique_ptr<DirectoryWatch>> DirectoryWatch::Start(asio::any_io_executor ex,
                                                              const std::string& dir,
                                                              Handler on_change) {
  auto impl = std::make_shared<Impl>(ex, std::move(on_change));
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Status::Error(std::string("cannot use inotify: ") + ::strerror(errno));
  impl->events.assign(fd);
  if (::inotify_add_watch(fd, dir.c_str(),
                          IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR) < 0)
    return Status::Error("cannot watch " + dir + ": " + ::strerror(errno));
  impl->Wait();
  return std::unique_ptr<DirectoryWatch>(new DirectoryWatch(std::move(impl)));
}

}  // namespace deployd
