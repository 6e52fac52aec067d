// What the state directory says about its database before the database is opened. Each run
// leaves its logs in STATE/logs/RUN/; a missing or empty deployd.db beside them means the
// database was lost (deleted, truncated, a restore gone wrong), and starting on a new one would
// give new runs the old runs' ids and append their output to the old logs. That is refused,
// unless the operator says --new-state; either way new runs are numbered after every run whose
// logs are there. Blocking file-system reads, at start; no threading concerns.
#ifndef DEPLOYD_STORE_STATE_DIR_H_
#define DEPLOYD_STORE_STATE_DIR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "deployd/status.h"

namespace deployd {

// The runs whose log directories are in STATE/logs.
struct EarlierRuns {
  std::vector<std::string> ids;     // sorted by number
  std::int64_t highest_number = 0;  // of the ids' numbers ("kimi-12" → 12); 0 when none
};

EarlierRuns FindEarlierRuns(const std::string& state_dir);

// Refuses to start on `db_path` when it is missing or empty while `earlier` has runs, unless
// `new_state`: "STATE/deployd.db is missing, but STATE/logs holds the logs of 3 earlier runs
// (a-1 … a-3): …".
Status CheckStateDatabase(const std::string& db_path, const std::string& state_dir,
                          const EarlierRuns& earlier, bool new_state);

}  // namespace deployd

#endif  // DEPLOYD_STORE_STATE_DIR_H_
