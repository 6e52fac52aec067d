#include "checks/file_probes.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "checks/check_text.h"
#include "checks/weights_check.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace json = boost::json;

// Bytes of the regular files under `path` (not following symlinks); 0 when it does not exist.
std::uint64_t BytesUnder(const std::string& path) {
  std::error_code ec;
  std::uint64_t total = 0;
  namespace fs = std::filesystem;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += it->file_size(size_ec);
  }
  return total;
}

}  // namespace

// Files only, a few KiB a shard (weights_check.h); no sha256 here, as hashing hundreds of GB
// would block the daemon's one thread.
CheckOutcome ProbeWeights(const Check& check) {
  Result<WeightsCheckOutcome> result = CheckWeightsComplete(check.path);
  if (!result.ok()) {
    json::object evidence = CheckEvidence(check);
    evidence["error"] = result.status().message();
    return MakeOutcome(check, false, result.status().message(), std::move(evidence));
  }
  json::object evidence = std::move(result->evidence);
  evidence["check"] = ToString(check.kind);
  // The library's summary reads "weights DIR: what was seen"; ours names the check kind.
  std::string detail = result->summary;
  std::string prefix = "weights " + check.path + ": ";
  if (detail.rfind(prefix, 0) == 0) detail = detail.substr(prefix.size());
  return MakeOutcome(check, result->passed, detail, std::move(evidence));
}

CheckOutcome ProbeFile(const Check& check) {
  json::object evidence = CheckEvidence(check);
  struct stat st;
  if (::stat(check.path.c_str(), &st) != 0) {
    int error = errno;
    if (error != ENOENT && error != ENOTDIR) {
      std::string message = std::string("cannot stat: ") + std::strerror(error);
      evidence["error"] = message;
      return MakeOutcome(check, false, message, std::move(evidence));
    }
    evidence["exists"] = false;
    if (check.absent) return MakeOutcome(check, true, "absent", std::move(evidence));
    evidence["error"] = "no such file";
    return MakeOutcome(check, false, "does not exist", std::move(evidence));
  }
  std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  evidence["exists"] = true;
  evidence["type"] = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "directory" : "other";
  evidence["size"] = size;
  if (check.absent)
    return MakeOutcome(check, false, "exists (expected absent)", std::move(evidence));
  if (check.min_size && size < *check.min_size) {
    evidence["min_size"] = *check.min_size;
    return MakeOutcome(check, false,
                       FormatSize(size) + ", expected at least " + FormatSize(*check.min_size),
                       std::move(evidence));
  }
  return MakeOutcome(check, true, "exists (" + FormatSize(size) + ")", std::move(evidence));
}

CheckOutcome ProbeDiskFree(const Check& check) {
  json::object evidence = CheckEvidence(check);
  // A download's destination that does not exist yet is measured where it will be created.
  // A path the plan names for disk_free itself must exist: a mistyped mount point would
  // otherwise be measured on the root filesystem.
  std::filesystem::path where = check.path;
  std::error_code ec;
  while (check.credit_existing && !std::filesystem::exists(where, ec) && where.has_parent_path() &&
         where != where.parent_path())
    where = where.parent_path();
  if (where != std::filesystem::path(check.path)) evidence["measured_at"] = where.string();
  struct statvfs vfs;
  if (::statvfs(where.c_str(), &vfs) != 0) {
    std::string message = std::strerror(errno);
    evidence["error"] = message;
    return MakeOutcome(check, false, message, std::move(evidence));
  }
  std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  evidence["free_bytes"] = free_bytes;
  evidence["required_bytes"] = check.at_least;
  evidence["free"] = FormatSize(free_bytes);
  evidence["required"] = FormatSize(check.at_least);
  std::string detail =
      FormatSize(free_bytes) + " free, " + FormatSize(check.at_least) + " required";
  std::uint64_t available = free_bytes;
  if (check.credit_existing) {
    // A resumed download needs only what is still missing.
    std::uint64_t present = BytesUnder(check.path);
    available += present;
    evidence["present_bytes"] = present;
    if (present > 0) detail += " (" + FormatSize(present) + " already there)";
  }
  return MakeOutcome(check, available >= check.at_least, detail, std::move(evidence));
}

}  // namespace deployd
