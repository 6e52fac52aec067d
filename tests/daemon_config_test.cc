#include "plan/daemon_config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

using namespace deployd;

namespace {

// Loads `text` as a configuration file; returns the formatted errors, one per line.
std::string Load(const std::string& text, DaemonConfig& config) {
  char path[] = "/tmp/deployd-config-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << text;
  std::vector<Diagnostic> errors;
  LoadDaemonConfig(path, config, errors);
  ::unlink(path);
  std::string out;
  for (const auto& d : errors) {
    std::string f = d.Format();
    out += f.substr(f.find(':')) + "\n";  // without the temporary file's name
  }
  return out;
}

}  // namespace

TEST_CASE("config: every key is read") {
  DaemonConfig c;
  CHECK(Load("socket: /run/x.sock\nstate_dir: /srv/state\ngroup: deploy\nlog_max_size: 1MiB\n"
             "retention: 30d\n",
             c) == "");
  CHECK(c.retention == std::chrono::hours(24 * 30));
  CHECK(c.socket_path == "/run/x.sock");
  CHECK(c.state_dir == "/srv/state");
  CHECK(c.group == "deploy");
  CHECK(c.log_max_size == 1048576);
}

TEST_CASE("config: an empty file keeps the defaults") {
  DaemonConfig c;
  c.state_dir = "/default";
  CHECK(Load("# nothing\n", c) == "");
  CHECK(c.state_dir == "/default");
  CHECK(c.log_max_size == 64ull << 20);
}

TEST_CASE("config: unit_dir and allowed_roots") {
  DaemonConfig c;
  CHECK(Load("unit_dir: /srv/units\nallowed_roots: [/shared, /srv/models]\n", c).empty());
  CHECK(c.unit_dir == "/srv/units");
  CHECK(c.allowed_roots == std::vector<std::string>{"/shared", "/srv/models"});
  CHECK(Load("allowed_roots: /shared\n", c) ==
        ":1:16: error: 'allowed_roots' must be a list of absolute directories\n"
        "allowed_roots: /shared\n"
        "               ^\n");
  CHECK(Load("allowed_roots: [shared]\nunit_dir: units\n", c) ==
        ":1:17: error: 'allowed_roots' entries must be absolute directories\n"
        "allowed_roots: [shared]\n"
        "                ^\n"
        ":2:11: error: 'unit_dir' must be an absolute directory\n"
        "unit_dir: units\n"
        "          ^\n");
}

TEST_CASE("config: problems are reported with their position") {
  DaemonConfig c;
  CHECK(Load("socket: /x\nstate_dri: /y\nlog_max_size: lots\nsocket: /z\ngroup: [a]\n", c) ==
        ":2:1: error: unknown key 'state_dri' (known: socket, state_dir, group, log_max_size, "
        "retention, unit_dir, allowed_roots, metrics_textfile, metrics_listen, "
        "metrics_allow_remote)\n"
        "state_dri: /y\n"
        "^\n"
        ":3:15: error: invalid size 'lots' (expected e.g. 64MiB)\n"
        "log_max_size: lots\n"
        "              ^\n"
        ":4:1: error: duplicate key 'socket'\n"
        "socket: /z\n"
        "^\n"
        ":5:8: error: 'group' must be a single value\n"
        "group: [a]\n"
        "       ^\n");
  CHECK(Load("retention: forever\n", c) ==
        ":1:12: error: invalid duration 'forever' (expected e.g. 30d, 12h)\n"
        "retention: forever\n"
        "           ^\n");
  CHECK(Load("- a\n", c) == ":1:1: error: the configuration must be a map of settings\n- a\n^\n");
  CHECK(Load("a: [\n", c).find("error: ") != std::string::npos);
}

TEST_CASE("config: the metrics keys, off by default") {
  DaemonConfig c;
  CHECK(c.metrics_textfile.empty());
  CHECK_FALSE(c.metrics_listen.has_value());
  CHECK(Load("metrics_textfile: /var/lib/prometheus/node-exporter/deployd.prom\n"
             "metrics_listen: '[::1]:9464'\n",
             c) == "");
  CHECK(c.metrics_textfile == "/var/lib/prometheus/node-exporter/deployd.prom");
  REQUIRE(c.metrics_listen.has_value());
  CHECK(c.metrics_listen->ToString() == "[::1]:9464");
  CHECK_FALSE(c.metrics_allow_remote);
  // Another address than loopback only when the operator says so, wherever that is said.
  CHECK(Load("metrics_allow_remote: true\nmetrics_listen: 10.1.2.3:9464\n", c) == "");
  CHECK(c.metrics_listen->ToString() == "10.1.2.3:9464");
  CHECK(c.metrics_allow_remote);
}

TEST_CASE("config: bad metrics settings are refused with their position") {
  DaemonConfig c;
  CHECK(Load("metrics_listen: 0.0.0.0:9464\n", c) ==
        ":1:17: error: 'metrics_listen' 0.0.0.0:9464 is not a loopback address: the metrics "
        "would be served to the network; set metrics_allow_remote: true to allow that\n"
        "metrics_listen: 0.0.0.0:9464\n"
        "                ^\n");
  CHECK(Load("metrics_listen: localhost:9464\n", c) ==
        ":1:17: error: invalid address 'localhost:9464' (expected an IP address and a port, e.g. "
        "127.0.0.1:9464 or [::1]:9464)\n"
        "metrics_listen: localhost:9464\n"
        "                ^\n");
  CHECK(Load("metrics_listen: 127.0.0.1\n", c).find("invalid address '127.0.0.1'") !=
        std::string::npos);
  CHECK(Load("metrics_textfile: deployd.prom\nmetrics_allow_remote: yes\n", c) ==
        ":1:19: error: 'metrics_textfile' must be an absolute path ending in .prom "
        "(node_exporter's textfile collector reads only *.prom files)\n"
        "metrics_textfile: deployd.prom\n"
        "                  ^\n"
        ":2:23: error: 'metrics_allow_remote' must be true or false\n"
        "metrics_allow_remote: yes\n"
        "                      ^\n");
  CHECK(Load("metrics_textfile: /srv/deployd.txt\n", c).find("ending in .prom") !=
        std::string::npos);
}

TEST_CASE("config: a missing file is an error") {
  DaemonConfig c;
  std::vector<Diagnostic> errors;
  LoadDaemonConfig("/nonexistent/deployd.yaml", c, errors);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].Format() ==
        "/nonexistent/deployd.yaml: error: cannot read the configuration file");
}
