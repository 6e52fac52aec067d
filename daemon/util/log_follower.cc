#include "util/log_follower.h"

#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <deque>

#include "util/line_splitter.h"

namespace deployd {

namespace asio = boost::asio;

struct LogFollower::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor ex, std::string path, std::uint64_t start_offset, DataHandler h)
      : events(ex), path(std::move(path)), start_offset(start_offset), on_data(std::move(h)) {}
  ~Impl() { CloseFile(); }

  asio::posix::stream_descriptor events;  // the inotify descriptor
  std::string path;
  std::string name;  // the file's name in its directory
  std::uint64_t start_offset;
  DataHandler on_data;
  int fd = -1;  // the file being read
  int file_watch = -1;
  bool opened_once = false;
  std::uint64_t offset = 0;
  std::uint64_t inode = 0;  // of the file open
  bool stopped = false;
  bool paused = false;
  std::array<char, 64 * 1024> buffer;

  void CloseFile() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (file_watch >= 0 && events.is_open()) ::inotify_rm_watch(events.native_handle(), file_watch);
    file_watch = -1;
  }

  void Stop() {
    if (stopped) return;
    stopped = true;
    CloseFile();
    boost::system::error_code ignored;
    events.close(ignored);
  }

  // Opens PATH when it exists; true when a file is open afterwards.
  bool OpenFile() {
    if (fd >= 0) return true;
    int opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (opened < 0) return false;  // not there (yet): the directory watch will say when
    // Watched after opening: should PATH be replaced in between, Pump() sees that the open
    // file is no longer PATH, and a write in between is read by Pump() right after this.
    int watch = ::inotify_add_watch(events.native_handle(), path.c_str(),
                                    IN_MODIFY | IN_MOVE_SELF | IN_DELETE_SELF);
    if (watch < 0) {
      ::close(opened);
      return false;
    }
    file_watch = watch;
    fd = opened;
    struct stat st;
    bool known = ::fstat(fd, &st) == 0;
    std::uint64_t size = known ? static_cast<std::uint64_t>(st.st_size) : 0;
    inode = known ? static_cast<std::uint64_t>(st.st_ino) : 0;
    offset = !opened_once && start_offset <= size ? start_offset : 0;
    opened_once = true;
    return true;
  }

  // True when PATH names another file than the one open (renamed, deleted, replaced).
  bool Replaced() const {
    struct stat open_st, path_st;
    if (::fstat(fd, &open_st) != 0) return true;
    if (::stat(path.c_str(), &path_st) != 0) return true;
    return open_st.st_ino != path_st.st_ino || open_st.st_dev != path_st.st_dev;
  }

  // Delivers everything there is to read now, across rotations. The caller holds a reference:
  // `on_data` may drop the follower.
  void Pump() {
    while (!stopped && !paused && OpenFile()) {
      for (;;) {
        ssize_t n = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        offset += static_cast<std::uint64_t>(n);
        on_data(std::string_view(buffer.data(), static_cast<size_t>(n)));
        if (stopped || paused) return;
      }
      struct stat st;
      if (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < offset) {
        offset = 0;  // truncated: what is there now is new
        continue;
      }
      if (!Replaced()) return;
      CloseFile();  // rotated or deleted: the old file is read to its end; on to the new one
    }
  }

  void Wait() {
    events.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code ec) {
                        if (ec || self->stopped) return;
                        self->DrainEvents();
                        self->Pump();
                        if (!self->stopped) self->Wait();
                      });
  }

  // The events themselves say nothing Pump() does not find out; they are only the wake-up.
  void DrainEvents() {
    alignas(inotify_event) char raw[4096];
    for (;;) {
      ssize_t n = ::read(events.native_handle(), raw, sizeof raw);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
    }
  }
};

LogFollower::LogFollower(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

LogFollower::~LogFollower() { impl_->Stop(); }

void LogFollower::CatchUp() {
  auto keep = impl_;  // on_data may drop the follower
  keep->Pump();
}

void LogFollower::Stop() { impl_->Stop(); }

void LogFollower::Pause() { impl_->paused = true; }

void LogFollower::Resume() {
  if (!impl_->paused) return;
  impl_->paused = false;
  asio::post(impl_->events.get_executor(), [impl = impl_] {
    if (!impl->stopped && !impl->paused) impl->Pump();
  });
}

bool LogFollower::paused() const { return impl_->paused; }

std::uint64_t LogFollower::offset() const { return impl_->offset; }

std::uint64_t LogFollower::file_id() const { return impl_->inode; }

Result<std::unique_ptr<LogFollower>> LogFollower::Start(asio::any_io_executor ex, std::string path,
                                                        std::uint64_t start_offset,
                                                        DataHandler on_data) {
  auto impl = std::make_shared<Impl>(ex, std::move(path), start_offset, std::move(on_data));
  size_t slash = impl->path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : impl->path.substr(0, slash);
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Status::Error(std::string("cannot use inotify: ") + ::strerror(errno));
  impl->events.assign(fd);
  // The directory tells when the file appears (created, or renamed into place on rotation).
  if (::inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) < 0)
    return Status::Error("cannot follow " + impl->path + ": " + ::strerror(errno));
  impl->Wait();
  // What the file already holds, delivered from the loop rather than from here.
  asio::post(ex, [impl] {
    if (!impl->stopped) impl->Pump();
  });
  return std::unique_ptr<LogFollower>(new LogFollower(std::move(impl)));
}

std::vector<std::string> ReadLastLines(const std::string& path, std::uint64_t from_offset,
                                       size_t max_lines) {
  constexpr std::uint64_t kMaxRead = 64 * 1024;
  std::vector<std::string> lines;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  struct stat st;
  std::uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  if (from_offset > size) from_offset = 0;
  std::uint64_t start = size - from_offset > kMaxRead ? size - kMaxRead : from_offset;
  std::string data(size - start, '\0');
  ssize_t n = ::pread(fd, data.data(), data.size(), static_cast<off_t>(start));
  ::close(fd);
  data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (start > from_offset) {
    // Started inside a line: that piece of a line would only mislead.
    size_t end = data.find_first_of("\r\n");
    data.erase(0, end == std::string::npos ? data.size() : end + 1);
  }
  std::deque<std::string> tail;
  LineSplitter splitter;
  auto keep = [&](std::string_view line) {
    tail.emplace_back(line);
    if (tail.size() > max_lines) tail.pop_front();
  };
  splitter.Feed(data, keep);
  splitter.Flush(keep);
  lines.assign(tail.begin(), tail.end());
  return lines;
}

}  // namespace deployd
