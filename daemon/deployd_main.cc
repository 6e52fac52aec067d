// deployd: the daemon. Runs in the foreground until SIGTERM (or SIGINT), which is graceful:
// the socket closes, checks and timers stop, and actions keep running — the next start
// resumes every unfinished run from the database.
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "control_server.h"
#include "daemon_config.h"
#include "run_manager.h"
#include "run_store.h"

using namespace deployd;

namespace {

int Fail(const std::string& message) {
  std::cerr << "deployd: error: " << message << "\n";
  return 1;
}

void SetUpLogging() {
  auto logger = spdlog::stderr_logger_st("deployd");
  // Under systemd the journal adds its own timestamps.
  if (std::getenv("JOURNAL_STREAM") || std::getenv("INVOCATION_ID"))
    logger->set_pattern("%l: %v");
  else
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %l: %v");
  spdlog::set_default_logger(logger);
  if (const char* level = std::getenv("DEPLOYD_LOG_LEVEL"))
    spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deployd: carries out deployment plans durably (see deployctl)"};
  std::string config_path;
  std::string socket_path;
  std::string state_dir;
  app.add_option("--config", config_path, "configuration file (default /etc/deployd/deployd.yaml)");
  app.add_option("--socket", socket_path, "control socket path");
  app.add_option("--state-dir", state_dir, "directory for deployd.db and step logs");
  app.set_version_flag("--version", std::string("deployd ") + DEPLOYD_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  DaemonConfig config;
  config.socket_path = DefaultSocketPath();
  config.state_dir = DefaultStateDir();
  if (config_path.empty() && ::access("/etc/deployd/deployd.yaml", R_OK) == 0)
    config_path = "/etc/deployd/deployd.yaml";
  if (!config_path.empty()) {
    std::vector<Diagnostic> errors;
    LoadDaemonConfig(config_path, config, errors);
    for (const auto& d : errors) std::cerr << d.Format() << "\n";
    if (!errors.empty()) return 2;
  }
  if (!socket_path.empty()) config.socket_path = socket_path;
  if (!state_dir.empty()) config.state_dir = state_dir;

  SetUpLogging();
  ::signal(SIGPIPE, SIG_IGN);

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

  Result<std::unique_ptr<RunStore>> store = RunStore::Open(config.state_dir + "/deployd.db");
  if (!store.ok()) return Fail(store.status().message());

  boost::asio::io_context io(1);
  RunManagerOptions run_options;
  run_options.state_dir = config.state_dir;
  run_options.log_cap_bytes = config.log_max_size;
  auto runs = std::make_unique<RunManager>(io.get_executor(), *store.value(), run_options);
  auto server = std::make_unique<ControlServer>(io, *runs, *store.value(), server_options);
  if (Status s = server->Listen(); !s.ok()) return Fail(s.message());

  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](boost::system::error_code error, int signo) {
    if (error) return;
    spdlog::info("{}: stopping; running actions are left running and resumed at next start",
                 signo == SIGTERM ? "SIGTERM" : "SIGINT");
    server->Stop();
    runs->Shutdown();
    io.stop();
  });

  spdlog::info("deployd {} listening on {}, state in {}", DEPLOYD_VERSION, config.socket_path,
               config.state_dir);
  runs->Recover();
  io.run();
  runs.reset();
  server.reset();
  spdlog::info("stopped");
  return 0;
}
