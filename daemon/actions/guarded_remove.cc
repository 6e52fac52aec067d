#include "actions/guarded_remove.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "util/units.h"

namespace deployd {
namespace {

using Components = std::vector<std::string>;

// Deeper trees are refused rather than risking the descriptor limit (one open per level).
constexpr int kMaxDepth = 256;

// The top-level directories of a Linux system (FHS plus what distributions add). Paths below
// them are not refused here; the allowed roots confine those.
constexpr std::array<std::string_view, 21> kSystemDirs = {
    "bin",  "boot", "dev", "etc", "home", "media", "mnt", "opt",        "proc", "root", "run",
    "sbin", "snap", "srv", "sys", "tmp",  "usr",   "var", "lost+found", "nix",  "efi"};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Join(const Components& c, std::size_t n) {
  if (n == 0) return "/";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += "/" + c[i];
  return out;
}
std::string Join(const Components& c) { return Join(c, c.size()); }

// Splits an absolute path; false when it has a '..' component. "." and repeated or trailing
// slashes carry no meaning and are dropped.
bool Split(std::string_view path, Components& out) {
  out.clear();
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(i, end - i);
    if (part == "..") return false;
    if (!part.empty() && part != ".") out.emplace_back(part);
    i = end + 1;
  }
  return true;
}

// `inner` is `outer` or below it.
bool IsWithin(const Components& inner, const Components& outer) {
  return inner.size() >= outer.size() && std::equal(outer.begin(), outer.end(), inner.begin());
}

const char* FixedRefusal(const Components& c) {
  if (c.empty()) return "the root directory";
  if (c.size() == 1 && (c[0].starts_with("lib") || std::find(kSystemDirs.begin(), kSystemDirs.end(),
                                                             c[0]) != kSystemDirs.end()))
    return "a top-level system directory";
  return nullptr;
}

// The path with every symlink in its parent chain resolved: realpath of the deepest existing
// ancestor, then the remaining components as written (they do not exist, so they cannot be
// links). The last component is deliberately not resolved: a named symlink is removed itself.
Result<Components> ResolveParentChain(const Components& c) {
  for (std::size_t k = c.empty() ? 0 : c.size() - 1;; --k) {
    std::string prefix = Join(c, k);
    char real[PATH_MAX];
    if (::realpath(prefix.c_str(), real) != nullptr) {
      Components out;
      Split(real, out);
      out.insert(out.end(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end());
      return out;
    }
    if (errno != ENOENT && errno != ENOTDIR)
      return Status::Error("cannot resolve " + prefix + ": " + std::strerror(errno));
    if (k == 0) return Status::Error("cannot resolve /");
  }
}

// A configured directory (root, state dir) as written and as it really is; both are compared,
// so a root configured through a symlink still matches paths named either way.
struct Place {
  Components written;
  Components real;
};

Result<Place> MakePlace(const std::string& dir) {
  Place place;
  if (dir.empty() || dir[0] != '/' || !Split(dir, place.written))
    return Status::Error(dir + " is not an absolute path without '..'");
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) != nullptr) {
    Split(real, place.real);
    return place;
  }
  Result<Components> resolved = ResolveParentChain(place.written);
  if (!resolved.ok()) return resolved.status();
  place.real = *resolved;
  return place;
}

bool IsWithin(const Components& path, const Place& place) {
  return IsWithin(path, place.written) || IsWithin(path, place.real);
}
bool Contains(const Components& path, const Place& place) {
  return IsWithin(place.written, path) || IsWithin(place.real, path);
}
bool IsStrictlyBelow(const Components& path, const Place& place) {
  return (IsWithin(path, place.written) && path.size() > place.written.size()) ||
         (IsWithin(path, place.real) && path.size() > place.real.size());
}

std::string RootsText(const std::vector<std::string>& roots) {
  std::string out;
  for (const std::string& root : roots) out += (out.empty() ? "" : ", ") + root;
  return "(" + out + ")";
}

// Deletion is denied by default: a plan may delete only where the operator said it may.
constexpr char kNoRoots[] =
    "no allowed_roots configured; nothing may be deleted until deployd's configuration sets "
    "them (e.g. allowed_roots: [/shared])";

Status Refuse(const std::string& path, const std::string& why) {
  return Status::Error("refusing to remove " + path + ": " + why);
}

struct Target {
  Components resolved;  // parent chain resolved; see ResolveParentChain
};

Result<Target> Examine(const std::string& path, const RemoveOptions& options) {
  if (path.empty()) return Status::Error("refusing to remove an empty path");
  if (path.find('\0') != std::string::npos) return Refuse(path, "the path contains a NUL byte");
  if (path[0] != '/') return Refuse(path, "a relative path");
  Components lexical;
  if (!Split(path, lexical)) return Refuse(path, "the path has '..' components");
  if (const char* why = FixedRefusal(lexical)) return Refuse(path, why);

  std::optional<Place> state;
  if (!options.state_dir.empty()) {
    Result<Place> place = MakePlace(options.state_dir);
    if (!place.ok()) return Status::Error("deployd's state directory " + place.status().message());
    state = std::move(*place);
  }
  std::vector<Place> roots;
  for (const std::string& root : options.allowed_roots) {
    Result<Place> place = MakePlace(root);
    if (!place.ok()) return Status::Error("allowed root " + place.status().message());
    roots.push_back(std::move(*place));
  }

  Result<Components> resolved = ResolveParentChain(lexical);
  if (!resolved.ok()) return resolved.status();
  // When a symlink moved the path, say where to: the operator sees why a path that looks
  // fine is refused.
  std::string via = *resolved == lexical ? "" : "it resolves to " + Join(*resolved) + ", ";
  if (const char* why = FixedRefusal(*resolved)) return Refuse(path, via + why);

  if (state) {
    for (const Components* c : {&lexical, &*resolved}) {
      std::string how = c == &lexical ? "" : via;
      if (IsWithin(*c, *state) && Contains(*c, *state))
        return Refuse(path, how + "deployd's state directory");
      if (IsWithin(*c, *state)) return Refuse(path, how + "inside deployd's state directory");
      if (Contains(*c, *state)) return Refuse(path, how + "contains deployd's state directory");
    }
  }

  if (roots.empty()) return Refuse(path, kNoRoots);
  bool inside = std::any_of(roots.begin(), roots.end(),
                            [&](const Place& r) { return IsStrictlyBelow(*resolved, r); });
  if (!inside) {
    bool is_root = std::any_of(roots.begin(), roots.end(),
                               [&](const Place& r) { return IsWithin(*resolved, r); });
    return Refuse(
        path, via + (is_root ? "an allowed root itself; name what is inside it"
                             : "outside the allowed roots " + RootsText(options.allowed_roots)));
  }

  std::string full = Join(*resolved);
  struct stat st;
  if (::lstat(full.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      // Removing the link would leave the target: that is not what a plan naming it meant.
      char real[PATH_MAX];
      Components target;
      if (::realpath(full.c_str(), real) != nullptr && Split(real, target) &&
          std::none_of(roots.begin(), roots.end(),
                       [&](const Place& r) { return IsStrictlyBelow(target, r); })) {
        return Refuse(path, std::string("a symlink to ") + real + ", outside the allowed roots " +
                                RootsText(options.allowed_roots));
      }
    }
    struct stat parent;
    if (S_ISDIR(st.st_mode) &&
        ::stat(Join(*resolved, resolved->size() - 1).c_str(), &parent) == 0 &&
        parent.st_dev != st.st_dev)
      return Refuse(path, "a mount point (another filesystem is mounted there)");
  }
  return Target{std::move(*resolved)};
}

// Removes directory trees through descriptors only; see the header for why.
class TreeRemover {
 public:
  TreeRemover(RemoveOutcome& outcome, dev_t device) : outcome_(outcome), device_(device) {}

  // `st` is the entry as fstatat saw it (not followed).
  Status RemoveEntry(int parent_fd, const std::string& name, const std::string& display,
                     const struct stat& st, int depth) {
    if (S_ISDIR(st.st_mode)) return RemoveDirectory(parent_fd, name, display, st, depth);
    if (::unlinkat(parent_fd, name.c_str(), 0) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return Status::Error("cannot remove " + display + ": " + std::strerror(errno));
    }
    ++outcome_.files;
    if (S_ISREG(st.st_mode) && st.st_nlink == 1)
      outcome_.bytes_freed += static_cast<std::uint64_t>(st.st_blocks) * 512;
    return Status::Ok();
  }

 private:
  Status RemoveDirectory(int parent_fd, const std::string& name, const std::string& display,
                         const struct stat& st, int depth) {
    if (st.st_dev != device_)
      return Refuse(display, "a mount point (another filesystem is mounted there)");
    if (depth > kMaxDepth)
      return Refuse(display, "nested more than " + std::to_string(kMaxDepth) + " levels deep");
    Fd dir(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir.get() < 0) {
      if (errno == ENOENT) return Status::Ok();
      if (errno == ELOOP || errno == ENOTDIR) return Changed(display);
      return Status::Error("cannot open " + display + ": " + std::strerror(errno));
    }
    struct stat opened;
    if (::fstat(dir.get(), &opened) != 0 || opened.st_dev != st.st_dev ||
        opened.st_ino != st.st_ino)
      return Changed(display);
    // Names first, removals after: readdir's position is unspecified once entries go.
    std::vector<std::string> names;
    {
      int listing_fd = ::dup(dir.get());
      DIR* listing = listing_fd < 0 ? nullptr : ::fdopendir(listing_fd);
      if (listing == nullptr) {
        if (listing_fd >= 0) ::close(listing_fd);
        return Status::Error("cannot read " + display + ": " + std::strerror(errno));
      }
      errno = 0;
      while (struct dirent* entry = ::readdir(listing)) {
        std::string_view child = entry->d_name;
        if (child != "." && child != "..") names.emplace_back(child);
      }
      int read_error = errno;
      ::closedir(listing);
      if (read_error != 0)
        return Status::Error("cannot read " + display + ": " + std::strerror(read_error));
    }
    for (const std::string& child : names) {
      struct stat child_st;
      if (::fstatat(dir.get(), child.c_str(), &child_st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return Status::Error("cannot examine " + display + "/" + child + ": " +
                             std::strerror(errno));
      }
      Status removed = RemoveEntry(dir.get(), child, display + "/" + child, child_st, depth + 1);
      if (!removed.ok()) return removed;
    }
    if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return Status::Error("cannot remove " + display + ": " + std::strerror(errno));
    }
    ++outcome_.directories;
    return Status::Ok();
  }

  static Status Changed(const std::string& display) {
    return Status::Error("refusing to remove " + display +
                         ": it changed while being removed (now a symlink or not a directory)");
  }

  RemoveOutcome& outcome_;
  dev_t device_;
};

// Opens the directory at `components` (a real path) from / one component at a time, refusing
// to pass through a symlink. nullopt: it does not exist.
Result<std::optional<Fd>> OpenRealDirectory(const Components& components, const std::string& path) {
  Fd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Status::Error(std::string("cannot open /: ") + std::strerror(errno));
  for (const std::string& part : components) {
    Fd next(::openat(fd.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      if (errno == ENOENT) return std::optional<Fd>();
      if (errno == ENOTDIR || errno == ELOOP) {
        // A file where a directory would be: nothing can exist below it. A symlink there was
        // put in after the path was resolved.
        struct stat st;
        if (::fstatat(fd.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISLNK(st.st_mode))
          return std::optional<Fd>();
        return Refuse(path, "its parent changed while being removed (now a symlink)");
      }
      return Status::Error("cannot open " + Join(components) + ": " + std::strerror(errno));
    }
    // O_PATH|O_NOFOLLOW on a symlink yields the link itself instead of failing.
    struct stat st;
    if (::fstat(next.get(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Refuse(path, "its parent changed while being removed (now a symlink)");
    fd = std::move(next);
  }
  return std::optional<Fd>(std::move(fd));
}

}  // namespace

Status CheckRemovable(const std::string& path, const RemoveOptions& options) {
  Result<Target> target = Examine(path, options);
  return target.ok() ? Status::Ok() : target.status();
}

Result<RemoveOutcome> RemovePath(const std::string& path, const RemoveOptions& options) {
  Result<Target> target = Examine(path, options);
  if (!target.ok()) return target.status();
  RemoveOutcome outcome;
  Components parent_chain = target->resolved;
  std::string name = parent_chain.back();  // Examine refused "/", so there is a last component
  parent_chain.pop_back();
  Result<std::optional<Fd>> parent = OpenRealDirectory(parent_chain, path);
  if (!parent.ok()) return parent.status();
  if (!parent->has_value()) return outcome;
  int parent_fd = (*parent)->get();
  struct stat st;
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return outcome;
    return Status::Error("cannot examine " + path + ": " + std::strerror(errno));
  }
  outcome.existed = true;
  struct stat parent_st;
  if (::fstat(parent_fd, &parent_st) != 0)
    return Status::Error("cannot examine the parent of " + path + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode) && st.st_dev != parent_st.st_dev)
    return Refuse(path, "a mount point (another filesystem is mounted there)");
  // Messages name what the plan named, with the walk's relative part after it.
  std::string display = path;
  while (display.size() > 1 && display.back() == '/') display.pop_back();
  TreeRemover remover(outcome, st.st_dev);
  Status removed = remover.RemoveEntry(parent_fd, name, display, st, 0);
  if (!removed.ok()) {
    if (outcome.files == 0 && outcome.directories == 0) return removed;
    return Status::Error(removed.message() + "; removed " + std::to_string(outcome.files) +
                         " files (" + FormatSize(outcome.bytes_freed) + ") before stopping");
  }
  return outcome;
}

std::string DescribeRemoval(const std::string& path, const RemoveOutcome& outcome) {
  if (!outcome.existed) return path + ": already absent";
  std::string text = "removed " + path + ": " + std::to_string(outcome.files) +
                     (outcome.files == 1 ? " file" : " files");
  if (outcome.directories > 0) {
    text += ", " + std::to_string(outcome.directories) +
            (outcome.directories == 1 ? " directory" : " directories");
  }
  return text + ", " + FormatSize(outcome.bytes_freed) + " freed";
}

}  // namespace deployd
