// deployd: the daemon. Runs in the foreground until SIGTERM (or SIGINT), which is graceful:
// the socket closes, checks and timers stop, and actions keep running — the next start
// resumes every unfinished run from the database. It stops the same way, but with exit status
// 1, when its database's files are deleted or replaced under it (store/store_files.cc). SIGHUP
// reads the configuration file again (ReloadConfig).
#include <grp.h>
#include <signal.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <tuple>
#include <vector>

#include "actions/builtin_action.h"
#include "control/control_server.h"
#include "control/metrics_http.h"
#include "control/metrics_report.h"
#include "control/metrics_textfile.h"
#include "control/systemd_notify.h"
#include "engine/run_manager.h"
#include "plan/daemon_config.h"
#include "process/supervisor.h"
#include "store/run_store.h"
#include "store/state_dir.h"
#include "util/directory_watch.h"

using namespace deployd;

namespace {

int Fail(const std::string& message) {
  std::cerr << "deployd: error: " << message << "\n";
  return 1;
}

// Under systemd, stderr goes to the journal: each line starts with its syslog priority
// ("<6>…", sd-daemon(3)) and carries no timestamp, which the journal adds itself.
class JournalSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    int priority = 6;
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        priority = 7;
        break;
      case spdlog::level::info:
        priority = 6;
        break;
      case spdlog::level::warn:
        priority = 4;
        break;
      case spdlog::level::err:
        priority = 3;
        break;
      default:
        priority = 2;
        break;
    }
    std::string line = "<" + std::to_string(priority) + ">" +
                       std::string(msg.payload.data(), msg.payload.size()) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

// systemd's rule (systemd.exec(5)): stderr is the journal only while it is the very stream
// $JOURNAL_STREAM names by device and inode. The variable alone may be inherited from a
// parent whose stderr it was, by a deployd whose stderr is a file or a terminal.
bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  unsigned long long device = 0, inode = 0;
  if (!stream || std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  struct stat st;
  return ::fstat(STDERR_FILENO, &st) == 0 && st.st_dev == device && st.st_ino == inode;
}

void SetUpLogging() {
  std::shared_ptr<spdlog::logger> logger;
  if (StderrIsJournal()) {
    logger = std::make_shared<spdlog::logger>("deployd", std::make_shared<JournalSink>());
  } else {
    logger = spdlog::stderr_logger_st("deployd");
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %l: %v");
  }
  spdlog::set_default_logger(logger);
  if (const char* level = std::getenv("DEPLOYD_LOG_LEVEL"))
    spdlog::set_level(spdlog::level::from_str(level));
}

// The configuration file: --config, else /etc/deployd/deployd.yaml when it exists, else none.
std::string ConfigPath(const std::string& flag) {
  if (flag.empty() && ::access(kSystemConfigPath, R_OK) == 0) return kSystemConfigPath;
  return flag;
}

// The file over the defaults, then the command line's --socket and --state-dir, which win.
bool LoadConfig(const std::string& path, const std::string& socket_flag,
                const std::string& state_dir_flag, DaemonConfig& config,
                std::vector<Diagnostic>& errors) {
  config.socket_path = DefaultSocketPath();
  config.state_dir = DefaultStateDir();
  if (!path.empty()) LoadDaemonConfig(path, config, errors);
  if (!socket_flag.empty()) config.socket_path = socket_flag;
  if (!state_dir_flag.empty()) config.state_dir = state_dir_flag;
  return errors.empty();
}

// deployd-supervise where a build (beside deployd) or an install (PREFIX/libexec/deployd/)
// puts it; "" when it is not there, and deployd re-executes itself as the supervisor.
std::string SupervisorProgram() {
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string dir(exe, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  for (const std::string& path :
       {dir + "/deployd-supervise", dir + "/../libexec/deployd/deployd-supervise"}) {
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

void SetReloadable(const DaemonConfig& config, RunManagerOptions& options) {
  options.log_cap_bytes = config.log_max_size;
  options.retention = config.retention;
  options.unit_dir = config.unit_dir;
  options.allowed_roots = config.allowed_roots;
}

std::string ListenText(const DaemonConfig& config) {
  if (!config.metrics_listen) return "";
  return config.metrics_listen->ToString() + (config.metrics_allow_remote ? " (remote)" : "");
}

// What only a restart changes stays as deployd started with it.
void KeepRestartOnly(const DaemonConfig& running, DaemonConfig& fresh) {
  fresh.socket_path = running.socket_path;
  fresh.state_dir = running.state_dir;
  fresh.group = running.group;
  fresh.metrics_textfile = running.metrics_textfile;
  fresh.metrics_listen = running.metrics_listen;
  fresh.metrics_allow_remote = running.metrics_allow_remote;
}

// SIGHUP (systemctl reload deployd): the configuration file is read again. log_max_size,
// retention, unit_dir and allowed_roots apply to what starts from now on; socket, state_dir,
// group and the metrics_* keys need a restart and are left as they are. A file with an error
// changes nothing.
void ReloadConfig(const std::string& path, const std::string& socket_flag,
                  const std::string& state_dir_flag, DaemonConfig& config, RunManager& runs,
                  SystemdNotifier& notifier) {
  (void)notifier.Notify("RELOADING=1");
  DaemonConfig fresh;
  std::vector<Diagnostic> errors;
  if (path.empty()) {
    spdlog::info("SIGHUP: no configuration file to read (--config, /etc/deployd/deployd.yaml)");
  } else if (!LoadConfig(path, socket_flag, state_dir_flag, fresh, errors)) {
    // One journal line each: the position, not Format()'s quoted line and caret.
    for (const Diagnostic& d : errors)
      spdlog::error("SIGHUP: {}:{}:{}: {}; the configuration in use is unchanged", d.file, d.line,
                    d.column, d.message);
  } else {
    for (auto [name, old_value, new_value] :
         {std::tuple{"socket", config.socket_path, fresh.socket_path},
          std::tuple{"state_dir", config.state_dir, fresh.state_dir},
          std::tuple{"group", config.group, fresh.group},
          std::tuple{"metrics_textfile", config.metrics_textfile, fresh.metrics_textfile},
          std::tuple{"metrics_listen", ListenText(config), ListenText(fresh)}}) {
      if (old_value != new_value)
        spdlog::warn("SIGHUP: {} changed to '{}': it takes effect when deployd restarts", name,
                     new_value);
    }
    KeepRestartOnly(config, fresh);
    config = fresh;
    RunManagerOptions reloaded;
    SetReloadable(config, reloaded);
    runs.Reconfigure(reloaded);
    spdlog::info("SIGHUP: reloaded {}", path);
  }
  (void)notifier.Notify(std::string("READY=1\nSTATUS=") +
                        (errors.empty() ? "configuration reloaded" : "configuration not reloaded"));
}

void AwaitSighup(boost::asio::signal_set& hup, const std::function<void()>& reload) {
  hup.async_wait([&hup, reload](boost::system::error_code error, int) {
    if (error) return;
    reload();
    AwaitSighup(hup, reload);
  });
}

}  // namespace

int main(int argc, char** argv) {
  // A background action's supervisor is this binary re-executed (supervisor.h): nothing of
  // the daemon (configuration, logging, signals) applies to it.
  if (argc > 1 && argv[1] == kSuperviseFlag) return SuperviseMain(argc, argv);
  // Built-in actions and blocking probes run as children of the daemon (builtin_action.h).
  if (argc == 3 && argv[1] == kBuiltinActionFlag) return BuiltinActionMain(argv[2]);
  if (argc == 3 && argv[1] == kBuiltinProbeFlag) return BuiltinProbeMain(argv[2]);

  CLI::App app{"deployd: carries out deployment plans durably (see deployctl)"};
  std::string config_path;
  std::string socket_path;
  std::string state_dir;
  bool new_state = false;
  app.add_option("--config", config_path, "configuration file (default /etc/deployd/deployd.yaml)");
  app.add_option("--socket", socket_path, "control socket path");
  app.add_option("--state-dir", state_dir, "directory for deployd.db and step logs");
  app.add_flag("--new-state", new_state,
               "start a new deployd.db although the logs of earlier runs are there (the database "
               "was lost); new runs are numbered after theirs");
  app.set_version_flag("--version", std::string("deployd ") + DEPLOYD_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  DaemonConfig config;
  config_path = ConfigPath(config_path);
  std::vector<Diagnostic> errors;
  if (!LoadConfig(config_path, socket_path, state_dir, config, errors)) {
    for (const auto& d : errors) std::cerr << d.Format() << "\n";
    return 2;
  }

  SetUpLogging();
  ::signal(SIGPIPE, SIG_IGN);
  if (Status s = CheckUserSocketDir(config.socket_path, /*create=*/true); !s.ok())
    return Fail(s.message());

  std::error_code ec;
  std::filesystem::create_directories(config.state_dir, ec);
  if (ec) return Fail("cannot create state directory " + config.state_dir + ": " + ec.message());
  ::chmod(config.state_dir.c_str(), 0750);

  ControlServerOptions server_options;
  server_options.socket_path = config.socket_path;
  if (!config.group.empty()) {
    struct group* g = ::getgrnam(config.group.c_str());
    if (!g) return Fail("group '" + config.group + "' does not exist");
    server_options.group = g->gr_gid;
  }

  const std::string db_path = config.state_dir + "/deployd.db";
  EarlierRuns earlier = FindEarlierRuns(config.state_dir);
  if (Status s = CheckStateDatabase(db_path, config.state_dir, earlier, new_state); !s.ok())
    return Fail(s.message());
  Result<std::unique_ptr<RunStore>> store = RunStore::Open(db_path);
  if (!store.ok()) return Fail(store.status().message());
  // No run id, and no log directory, is used twice.
  store.value()->SetFirstRunNumber(earlier.highest_number);

  boost::asio::io_context io(1);
  SystemdNotifier notifier(io.get_executor());
  RunManagerOptions run_options;
  run_options.state_dir = config.state_dir;
  run_options.supervisor_program = SupervisorProgram();
  // Built-in actions are started by their supervisor, where /proc/self/exe is not deployd:
  // this daemon's exe link, which names its binary even once an upgrade has replaced it.
  run_options.supervisor_exe = "/proc/" + std::to_string(::getpid()) + "/exe";
  SetReloadable(config, run_options);
  // Fault injection for the crash tests (tests/integration/test_crash.py): nothing else sets it.
  if (const char* fault = std::getenv("DEPLOYD_FAULT"))
    run_options.crash_before_start = std::string_view(fault) == "crash-before-start";
  std::unique_ptr<MetricsTextfile> metrics_textfile;
  run_options.on_activity = [&notifier, &metrics_textfile](const std::string& activity) {
    (void)notifier.Notify("STATUS=" + activity);
    if (metrics_textfile) metrics_textfile->Changed();
  };
  std::optional<std::string> store_lost;
  std::function<void(const std::string&)> stop;
  run_options.on_store_lost = [&](const std::string& why) { stop(why); };
  auto runs = std::make_unique<RunManager>(io.get_executor(), *store.value(), run_options);
  auto server = std::make_unique<ControlServer>(io, *runs, *store.value(), server_options);
  // The metrics first: a configuration they refuse leaves no socket behind.
  auto render = [&] { return RenderMetrics(*store.value(), *runs); };
  std::unique_ptr<MetricsHttpServer> metrics_http;
  if (config.metrics_listen) {
    metrics_http = std::make_unique<MetricsHttpServer>(io, render);
    if (Status s = metrics_http->Listen(*config.metrics_listen); !s.ok()) return Fail(s.message());
  }
  if (!config.metrics_textfile.empty()) {
    auto textfile = MetricsTextfile::Start(io.get_executor(), config.metrics_textfile, render);
    if (!textfile.ok()) return Fail("metrics_textfile: " + textfile.status().message());
    metrics_textfile = std::move(textfile.value());
  }
  if (Status s = server->Listen(); !s.ok()) return Fail(s.message());

  // Without a handler SIGHUP would end deployd (and systemd would not restart it: to
  // Restart=on-failure a SIGHUP death is a clean exit).
  boost::asio::signal_set hup(io, SIGHUP);
  AwaitSighup(hup,
              [&] { ReloadConfig(config_path, socket_path, state_dir, config, *runs, notifier); });
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  stop = [&](const std::string& lost) {
    if (store_lost || !server) return;
    if (!lost.empty()) store_lost = lost;
    (void)notifier.Notify("STOPPING=1\nSTATUS=stopping" + (lost.empty() ? "" : ": " + lost));
    hup.cancel();
    server->Stop();
    if (metrics_http) metrics_http->Stop();
    runs->Shutdown();
    io.stop();
  };
  signals.async_wait([&](boost::system::error_code error, int signo) {
    if (error) return;
    spdlog::info("{}: stopping; running actions are left running and resumed at next start",
                 signo == SIGTERM ? "SIGTERM" : "SIGINT");
    stop("");
  });
  // The database's files deleted or replaced under deployd are noticed at once, not only at
  // the next commit: what the connection still holds is saved, and deployd stops.
  auto watch =
      DirectoryWatch::Start(io.get_executor(), config.state_dir, [&](std::string_view name) {
        if (!name.empty() && name != "deployd.db" && name != "deployd.db-wal") return;
        if (Status s = store.value()->CheckFiles(); !s.ok()) {
          spdlog::critical("{}", s.message());
          stop(s.message());
        }
      });
  if (!watch.ok()) spdlog::warn("{}", watch.status().message());

  spdlog::info("deployd {} listening on {}, state in {}", DEPLOYD_VERSION, config.socket_path,
               config.state_dir);
  if (metrics_http) spdlog::info("metrics on http://{}/metrics", config.metrics_listen->ToString());
  if (metrics_textfile) spdlog::info("metrics written to {}", config.metrics_textfile);
  runs->Recover();
  // The socket accepts from here on: only now is the daemon ready.
  (void)notifier.Notify("READY=1\nSTATUS=listening on " + config.socket_path + ", " +
                        std::to_string(runs->active_runs()) + " runs resumed");
  notifier.StartWatchdog();
  io.run();
  metrics_textfile.reset();
  metrics_http.reset();
  runs.reset();
  server.reset();
  if (store_lost) return Fail(*store_lost);
  spdlog::info("stopped");
  return 0;
}
