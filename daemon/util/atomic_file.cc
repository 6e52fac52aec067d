#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace deployd {

Status WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode,
                           Durability durability) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmp =
      (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + name + ".deployd-tmp";
  auto fail = [&](const char* what, int fd) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + what + ": " + std::strerror(err));
  };

  const bool sync = durability == Durability::kPowerLoss;
  // Without fsync, a temporary file left by an earlier write is removed rather than truncated:
  // ext4 flushes a file truncated or renamed over another at once (auto_da_alloc), which is the
  // cost kProcessCrash exists to avoid.
  if (!sync) ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    int err = errno;
    return Status::Error("cannot write " + path + ": " + std::strerror(err));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // no progress on a regular file: do not loop forever
    if (n <= 0) return fail("write", fd);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0) return fail("chmod", fd);
  if (sync && ::fsync(fd) != 0) return fail("fsync", fd);
  ::close(fd);
  if (!sync) {
    // Exchanging the two names replaces the file as atomically as rename(2) does, without
    // that flush (2-3 ms each time on ext4); the old content left under the temporary name is
    // removed. Anything but a regular file in the target's place (nothing yet, a directory),
    // or a filesystem without RENAME_EXCHANGE, gets the plain rename.
    struct stat target;
    if (::lstat(path.c_str(), &target) == 0 && S_ISREG(target.st_mode) &&
        ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
      ::unlink(tmp.c_str());
      return Status::Ok();
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename", -1);
  // The rename itself is durable only once the directory is. A directory that cannot be
  // opened or synced (some filesystems refuse) leaves the new file in place, which is the
  // best that can be had there.
  if (!sync) return Status::Ok();
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::Ok();
}

}  // namespace deployd
