#include "store/state_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

namespace deployd {

namespace {

// The number a run id ends with ("kimi-k2-12" → 12), or 0.
std::int64_t RunNumber(const std::string& id) {
  size_t dash = id.rfind('-');
  if (dash == std::string::npos || dash + 1 == id.size() || id.size() - dash > 19) return 0;
  std::int64_t n = 0;
  for (size_t i = dash + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return 0;
    n = n * 10 + (id[i] - '0');
  }
  return n;
}

}  // namespace

EarlierRuns FindEarlierRuns(const std::string& state_dir) {
  EarlierRuns earlier;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(state_dir + "/logs", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code type_error;
    if (!it->is_directory(type_error)) continue;
    std::string id = it->path().filename().string();
    std::int64_t n = RunNumber(id);
    if (n == 0) continue;
    earlier.ids.push_back(id);
    earlier.highest_number = std::max(earlier.highest_number, n);
  }
  std::sort(earlier.ids.begin(), earlier.ids.end(), [](const std::string& a, const std::string& b) {
    return RunNumber(a) != RunNumber(b) ? RunNumber(a) < RunNumber(b) : a < b;
  });
  return earlier;
}

Status CheckStateDatabase(const std::string& db_path, const std::string& state_dir,
                          const EarlierRuns& earlier, bool new_state) {
  if (earlier.ids.empty() || new_state) return Status::Ok();
  struct stat st;
  std::string found;
  if (::stat(db_path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::Ok();  // RunStore::Open says what is wrong with it
    found = "is missing";
  } else if (S_ISREG(st.st_mode) && st.st_size == 0) {
    found = "is empty (0 bytes)";
  } else {
    return Status::Ok();
  }
  const size_t n = earlier.ids.size();
  std::string which = n == 1 ? earlier.ids.front()
                             : earlier.ids.front() + (n == 2 ? ", " : " … ") + earlier.ids.back();
  return Status::Error(
      db_path + " " + found + ", but " + state_dir + "/logs holds the logs of " +
      std::to_string(n) + (n == 1 ? " earlier run (" : " earlier runs (") + which +
      "): the state database was lost, and a new one would give new runs their ids and write "
      "into their logs. Restore " +
      db_path +
      " from a backup, or start deployd once with --new-state to begin a new state database "
      "(new runs are then numbered after theirs)");
}

}  // namespace deployd
