#include "log_follower.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace deployd {

namespace asio = boost::asio;

struct LogFollower::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::any_io_executor ex, std::string p, std::uint64_t start, DataHandler handler)
      : notify(ex), path(std::move(p)), offset(start), on_data(std::move(handler)) {
    std::filesystem::path fs_path(path);
    name = fs_path.filename().string();
  }
  ~Impl() { CloseFile(); }

  asio::posix::stream_descriptor notify;
  std::string path;
  std::string name;  // the file's name in its directory: the events that concern it
  int fd = -1;
  std::uint64_t offset;
  DataHandler on_data;
  bool stopped = false;

  void CloseFile() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  void Open() {
    if (fd >= 0) return;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }

  // Reads the open file to its end, delivering each chunk. False once stopped.
  bool ReadToEnd() {
    Open();
    if (fd < 0) return !stopped;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < offset) offset = 0;
    char buffer[64 << 10];
    for (;;) {
      ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return !stopped;
      offset += static_cast<std::uint64_t>(n);
      auto self = shared_from_this();  // on_data may destroy the follower
      on_data(std::string_view(buffer, static_cast<size_t>(n)));
      if (stopped) return false;
    }
  }

  void Arm() {
    notify.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code ec) {
                        if (ec || self->stopped) return;
                        self->OnEvents();
                      });
  }

  void OnEvents() {
    bool replaced = false;  // renamed away or deleted: a new file will take its name
    alignas(inotify_event) char buffer[16 << 10];
    for (;;) {
      ssize_t n = ::read(notify.native_handle(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (char* p = buffer; p < buffer + n;) {
        auto* event = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + event->len;
        if (event->len == 0 || name != event->name) continue;
        if (event->mask & (IN_MOVED_FROM | IN_DELETE)) replaced = true;
      }
    }
    // The old file's last bytes first (the descriptor still reads it), then the new one.
    if (!ReadToEnd()) return;
    if (replaced) {
      CloseFile();
      offset = 0;
      if (!ReadToEnd()) return;
    }
    Arm();
  }
};

Result<std::unique_ptr<LogFollower>> LogFollower::Start(asio::any_io_executor ex, std::string path,
                                                        std::uint64_t start_offset,
                                                        DataHandler on_data) {
  auto impl = std::make_shared<Impl>(ex, std::move(path), start_offset, std::move(on_data));
  int notify_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (notify_fd < 0) return Status::Error(std::string("inotify_init1: ") + std::strerror(errno));
  impl->notify.assign(notify_fd);
  std::string dir = std::filesystem::path(impl->path).parent_path().string();
  if (dir.empty()) dir = ".";
  // The directory, not the file: the file may not exist yet, and may be replaced.
  if (::inotify_add_watch(
          notify_fd, dir.c_str(),
          IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE) < 0)
    return Status::Error("cannot watch " + dir + ": " + std::strerror(errno));
  // What is there already is delivered from the executor, never from Start().
  asio::post(ex, [weak = std::weak_ptr<Impl>(impl)] {
    auto self = weak.lock();
    if (!self || self->stopped) return;
    if (self->ReadToEnd()) self->Arm();
  });
  return std::unique_ptr<LogFollower>(new LogFollower(std::move(impl)));
}

LogFollower::LogFollower(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

LogFollower::~LogFollower() { Stop(); }

void LogFollower::CatchUp() {
  if (!impl_->stopped) impl_->ReadToEnd();
}

void LogFollower::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  boost::system::error_code ec;
  impl_->notify.close(ec);
  impl_->CloseFile();
}

std::uint64_t LogFollower::offset() const { return impl_->offset; }

}  // namespace deployd
