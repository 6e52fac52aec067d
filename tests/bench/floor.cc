// deployd_bench_floor: the physical floor for tests/bench/throughput.py. It does, without the
// daemon, the work deployd does per step of a plan of `/bin/true` steps with one `file:` check:
// one fork/exec of /bin/true (posix_spawn + waitpid), one stat() (the check) and
// --commits-per-step small durable SQLite transactions (WAL, synchronous=FULL), in the order
// the daemon makes them (one before the spawn, the rest after). --extra-commits adds the
// run-level ones (created/running/succeeded), half before the first step and half after the last.
// --supervisor DEPLOYD runs each /bin/true under `DEPLOYD --supervise` (records and log beside
// the database): the floor of the same work with every attempt owned by its supervisor.
//
// Usage: deployd_bench_floor --db PATH [--steps N] [--commits-per-step K] [--extra-commits E]
//                            [--supervisor DEPLOYD]
// Prints one JSON object: steps, commits, total_s, per_step_ms, and the median/p90 of one spawn
// and of one commit, in ms.
#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "deployd_bench_floor: %s\n", what.c_str());
  std::exit(1);
}

void Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK)
    Die(std::string(sql) + ": " + err);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string db_path;
  long steps = 1000, per_step = 3, extra = 3;
  std::string supervisor;  // with --supervisor DEPLOYD: /bin/true under `deployd --supervise`
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--db")
      db_path = argv[i + 1];
    else if (a == "--steps")
      steps = std::atol(argv[i + 1]);
    else if (a == "--commits-per-step")
      per_step = std::atol(argv[i + 1]);
    else if (a == "--extra-commits")
      extra = std::atol(argv[i + 1]);
    else if (a == "--supervisor")
      supervisor = argv[i + 1];
    else
      Die("unknown option " + a);
  }
  if (db_path.empty() || steps <= 0 || per_step < 0 || extra < 0)
    Die("usage: --db PATH [--steps N] [--commits-per-step K] [--extra-commits E] "
        "[--supervisor DEPLOYD]");

  sqlite3* db = nullptr;
  if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) Die("cannot open " + db_path);
  Exec(db, "PRAGMA journal_mode=WAL");
  Exec(db, "PRAGMA synchronous=FULL");
  Exec(db,
       "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
       "at_ms INTEGER NOT NULL, step_id TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT "
       "NULL, detail TEXT NOT NULL, PRIMARY KEY (run_id, seq)) STRICT, WITHOUT ROWID");
  sqlite3_stmt *begin, *insert, *commit;
  sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, nullptr);
  sqlite3_prepare_v2(db,
                     "INSERT INTO events VALUES ('floor-1', ?, ?, ?, 'step.state', "
                     "'running', 'attempt 1')",
                     -1, &insert, nullptr);
  sqlite3_prepare_v2(db, "COMMIT", -1, &commit, nullptr);
  if (!begin || !insert || !commit) Die(sqlite3_errmsg(db));

  std::vector<double> commit_ms, spawn_ms;
  long seq = 0;
  auto durable_commit = [&](long step) {
    auto t0 = Clock::now();
    char id[32];
    std::snprintf(id, sizeof id, "s%ld", step);
    if (sqlite3_step(begin) != SQLITE_DONE) Die(sqlite3_errmsg(db));
    sqlite3_reset(begin);
    sqlite3_bind_int64(insert, 1, ++seq);
    sqlite3_bind_int64(insert, 2,
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    sqlite3_bind_text(insert, 3, id, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(insert) != SQLITE_DONE) Die(sqlite3_errmsg(db));
    sqlite3_reset(insert);
    if (sqlite3_step(commit) != SQLITE_DONE) Die(sqlite3_errmsg(db));
    sqlite3_reset(commit);
    commit_ms.push_back(Ms(Clock::now() - t0));
  };

  char prog[] = "/bin/true";
  std::vector<std::string> args = {prog};
  if (!supervisor.empty()) {
    // What every attempt costs under the ownership design: the supervisor (deployd re-executed)
    // writing its records, then the action. Records and log beside the database.
    args = {supervisor, "--supervise",       "--grace",        "10000", "--log-cap",
            "0",        db_path + ".status", db_path + ".log", "--",    prog};
  }
  // The supervisor reports on its stdout (a pipe to deployd); here it goes nowhere.
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> child_argv;
  for (std::string& a : args) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);
  auto start = Clock::now();
  for (long e = 0; e < extra / 2; ++e) durable_commit(-1);
  for (long s = 0; s < steps; ++s) {
    if (per_step > 0) durable_commit(s);  // running
    auto t0 = Clock::now();
    pid_t pid;
    if (int rc = posix_spawn(&pid, child_argv[0], &quiet, nullptr, child_argv.data(), environ);
        rc != 0)
      Die(std::string("posix_spawn: ") + std::strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) Die(std::string("waitpid: ") + std::strerror(errno));
    }
    spawn_ms.push_back(Ms(Clock::now() - t0));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("/bin/true failed");
    for (long c = 1; c < per_step; ++c) {
      durable_commit(s);  // verifying, succeeded
      if (c == 1) {
        struct stat st;  // the file: check
        if (::stat(prog, &st) != 0) Die("stat /bin/true");
      }
    }
  }
  for (long e = extra / 2; e < extra; ++e) durable_commit(-1);
  double total_s = Ms(Clock::now() - start) / 1000;

  sqlite3_finalize(begin);
  sqlite3_finalize(insert);
  sqlite3_finalize(commit);
  sqlite3_close(db);
  std::printf(
      "{\"steps\": %ld, \"commits\": %zu, \"total_s\": %.4f, \"per_step_ms\": %.4f, "
      "\"spawn_median_ms\": %.4f, \"spawn_p90_ms\": %.4f, \"commit_median_ms\": %.4f, "
      "\"commit_p90_ms\": %.4f}\n",
      steps, commit_ms.size(), total_s, total_s * 1000 / static_cast<double>(steps),
      Quantile(spawn_ms, 0.5), Quantile(spawn_ms, 0.9), Quantile(commit_ms, 0.5),
      Quantile(commit_ms, 0.9));
  return 0;
}
