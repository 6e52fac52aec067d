#include "plan/daemon_config.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "util/units.h"

namespace deployd {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string LineOf(const std::string& text, int line) {
  std::istringstream in(text);
  std::string l;
  for (int i = 1; std::getline(in, l); ++i)
    if (i == line) return l;
  return "";
}

}  // namespace

std::string DefaultSocketPath() { return ::geteuid() == 0 ? kSystemSocketPath : UserSocketPath(); }

std::string UserSocketPath() {
  if (std::string run = Env("XDG_RUNTIME_DIR"); !run.empty()) return run + "/deployd/deployd.sock";
  return "/tmp/deployd-" + std::to_string(::geteuid()) + "/deployd.sock";
}

Status CheckUserSocketDir(const std::string& socket_path, bool create) {
  const uid_t uid = ::geteuid();
  const std::string dir = "/tmp/deployd-" + std::to_string(uid);
  if (socket_path.rfind('/') != dir.size() || !socket_path.starts_with(dir)) return Status::Ok();
  if (create && ::mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST)
    return Status::Error("cannot create " + dir + ": " + std::strerror(errno));
  struct stat st;
  if (::lstat(dir.c_str(), &st) < 0) {
    if (errno == ENOENT) return Status::Ok();  // nothing there: nobody listens, nobody took it
    return Status::Error("cannot check " + dir + ": " + std::strerror(errno));
  }
  const std::string elsewhere = "set XDG_RUNTIME_DIR (or --socket) to a directory of your own";
  const std::string refusing = "refusing " + socket_path + ": " + dir;
  if (!S_ISDIR(st.st_mode))
    return Status::Error(refusing + " is not a directory (a symbolic link?); remove it, or " +
                         elsewhere);
  if (st.st_uid != uid)
    return Status::Error(refusing + " belongs to uid " + std::to_string(st.st_uid) +
                         ", not to this user (uid " + std::to_string(uid) +
                         "), and its owner could put their own socket there; remove it, or " +
                         elsewhere);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::Error(refusing + " has mode " + mode + ", not 0700; chmod 700 " + dir + ", or " +
                         elsewhere);
  }
  return Status::Ok();
}

std::string DefaultStateDir() {
  if (::geteuid() == 0) return "/var/lib/deployd";
  if (std::string state = Env("XDG_STATE_HOME"); !state.empty()) return state + "/deployd";
  return Env("HOME") + "/.local/state/deployd";
}

namespace {

using ErrorAt = std::function<void(const YAML::Mark&, const std::string&)>;

// A list of absolute directories under which `remove` may delete.
void ReadAllowedRoots(const YAML::Node& value, const ErrorAt& error, DaemonConfig& config) {
  if (!value.IsSequence()) {
    error(value.Mark(), "'allowed_roots' must be a list of absolute directories");
    return;
  }
  config.allowed_roots.clear();
  for (auto it = value.begin(); it != value.end(); ++it) {
    YAML::Node item = *it;
    if (!item.IsScalar() || !item.Scalar().starts_with("/")) {
      error(item.Mark(), "'allowed_roots' entries must be absolute directories");
      continue;
    }
    config.allowed_roots.push_back(item.Scalar());
  }
}

// The metrics settings; false when `name` is none of them.
bool ReadMetricsSetting(const std::string& name, const YAML::Node& value, const ErrorAt& error,
                        DaemonConfig& config) {
  const std::string& text = value.Scalar();
  if (name == "metrics_textfile") {
    if (!text.starts_with("/") || !text.ends_with(".prom") || text.ends_with("/.prom"))
      error(value.Mark(),
            "'metrics_textfile' must be an absolute path ending in .prom (node_exporter's "
            "textfile collector reads only *.prom files)");
    else
      config.metrics_textfile = text;
  } else if (name == "metrics_listen") {
    config.metrics_listen = ParseListenAddress(text);
    if (!config.metrics_listen)
      error(value.Mark(), "invalid address '" + text +
                              "' (expected an IP address and a port, e.g. 127.0.0.1:9464 or "
                              "[::1]:9464)");
  } else if (name == "metrics_allow_remote") {
    if (text != "true" && text != "false")
      error(value.Mark(), "'metrics_allow_remote' must be true or false");
    config.metrics_allow_remote = text == "true";
  } else {
    return false;
  }
  return true;
}

// One setting whose value is a scalar.
void ReadSetting(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                 const ErrorAt& error, DaemonConfig& config) {
  if (name == "socket") {
    config.socket_path = value.Scalar();
  } else if (name == "state_dir") {
    config.state_dir = value.Scalar();
  } else if (name == "group") {
    config.group = value.Scalar();
  } else if (name == "log_max_size") {
    auto size = ParseSize(value.Scalar());
    if (!size || *size == 0)
      error(value.Mark(), "invalid size '" + value.Scalar() + "' (expected e.g. 64MiB)");
    else
      config.log_max_size = *size;
  } else if (name == "retention") {
    auto d = ParseDuration(value.Scalar());
    if (!d || d->count() <= 0)
      error(value.Mark(), "invalid duration '" + value.Scalar() + "' (expected e.g. 30d, 12h)");
    else
      config.retention = *d;
  } else if (name == "unit_dir") {
    if (!value.Scalar().starts_with("/"))
      error(value.Mark(), "'unit_dir' must be an absolute directory");
    else
      config.unit_dir = value.Scalar();
  } else if (!ReadMetricsSetting(name, value, error, config)) {
    error(key.Mark(), "unknown key '" + name +
                          "' (known: socket, state_dir, group, log_max_size, retention, "
                          "unit_dir, allowed_roots, metrics_textfile, metrics_listen, "
                          "metrics_allow_remote)");
  }
}

// A metrics_listen that is not on loopback serves the metrics to the network: only when the
// operator says so.
void CheckMetricsListen(const YAML::Mark& at, const ErrorAt& error, const DaemonConfig& config) {
  if (!config.metrics_listen || config.metrics_listen->loopback || config.metrics_allow_remote)
    return;
  error(at, "'metrics_listen' " + config.metrics_listen->ToString() +
                " is not a loopback address: the metrics would be served to the "
                "network; set metrics_allow_remote: true to allow that");
}

}  // namespace

void LoadDaemonConfig(const std::string& path, DaemonConfig& config,
                      std::vector<Diagnostic>& errors) {
  std::ifstream in(path);
  if (!in) {
    errors.push_back({path, 0, 0, "cannot read the configuration file", ""});
    return;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  ErrorAt error = [&](const YAML::Mark& mark, const std::string& message) {
    int line = mark.is_null() ? 0 : mark.line + 1;
    int column = mark.is_null() ? 0 : mark.column + 1;
    errors.push_back({path, line, column, message, line ? LineOf(text, line) : ""});
  };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    error(e.mark, e.msg);
    return;
  }
  if (root.IsNull()) return;  // an empty file keeps every default
  if (!root.IsMap()) {
    error(root.Mark(), "the configuration must be a map of settings");
    return;
  }
  std::set<std::string> seen;
  std::optional<YAML::Mark> listen;  // where metrics_listen is
  for (auto it = root.begin(); it != root.end(); ++it) {
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    std::string name = key.Scalar();
    if (!seen.insert(name).second) {
      error(key.Mark(), "duplicate key '" + name + "'");
    } else if (name == "allowed_roots") {
      ReadAllowedRoots(value, error, config);
    } else if (!value.IsScalar()) {
      error(value.Mark(), "'" + name + "' must be a single value");
    } else {
      ReadSetting(name, key, value, error, config);
      if (name == "metrics_listen") listen = value.Mark();
    }
  }
  if (listen) CheckMetricsListen(*listen, error, config);
}

}  // namespace deployd
