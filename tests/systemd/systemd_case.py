"""SystemdTestCase: an end-to-end test against real systemd (systemd_host.py). Each test gets
deployd running as the real deployd.service inside the container (installed from
systemd/deployd.service, with a drop-in that points it at the test's own socket, state and
config under /srv/deployd-test/), and the real deployctl on the host talking to it through
that socket — the host directory is bound into the container.

Only the tools that cannot run here are stand-ins (tests/standins/: nvidia-smi, hf, uv, vllm;
named fakes). systemctl and journalctl are systemd's own.

Environment (set by CTest): DEPLOYD_SYSTEMD_HOST (the host directory of `systemd_host.py up`),
DEPLOYCTL_BIN, DEPLOYD_SOURCE_DIR.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True

import harness  # noqa: E402
import systemd_host  # noqa: E402

HOST_DIR = os.environ.get("DEPLOYD_SYSTEMD_HOST") or os.path.join(
    harness.SOURCE_DIR, "build", "systemd-host")
INSIDE = "/srv/deployd-test"  # HOST_DIR/shared, as the container sees it
SOURCE_INSIDE = "/opt/deployd/source"
# The stand-ins that may be used inside (never systemctl's or journalctl's: systemd is real).
STANDIN_TOOLS = ("nvidia-smi", "hf", "uv", "vllm")
STANDIN_BIN = "/opt/deployd/standins-bin"
PATH_INSIDE = STANDIN_BIN + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DROPIN = "/etc/systemd/system/deployd.service.d/test.conf"


def _state():
    try:
        return systemd_host.load_state(HOST_DIR)
    except systemd_host.Unavailable as e:
        raise unittest.SkipTest("no systemd host: %s" % e)


class SystemdDaemon(harness.Daemon):
    """harness.Daemon's deployctl and database helpers, with deployd run by systemd inside the
    container instead of by the test."""

    def __init__(self, state, name):
        # Paths as seen from the host (self.dir, self.socket, …) and from inside (self.inside).
        self.state = state
        self.dir = os.path.join(state["shared"], name)
        self.inside = INSIDE + "/" + name
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "deployd.sock")
        self.state_dir = os.path.join(self.dir, "state")
        self.db = os.path.join(self.state_dir, "deployd.db")
        self.log_path = os.path.join(self.dir, "deployd.journal")
        self.tag = name
        self.proc = None
        self._log = None
        self.starts = 0
        self.extra_args = []

    def write_plan(self, name, text):
        """As harness.Daemon.write_plan, but `@DIR@` names the work directory as the container
        sees it (the plan runs there); the returned Plan's .work is the host's path of it."""
        work = "work-" + name.rsplit(".", 1)[0]
        os.makedirs(self.path(work), exist_ok=True)
        path = self.write_file(name, text.replace("@DIR@", self.inside + "/" + work)
                               .replace("@TAG@", self.tag))
        return harness.Plan(path, self.path(work))

    def sh(self, *argv, check=True, timeout=60, input=None):
        """Runs argv inside the container; returns the CompletedProcess (text)."""
        return systemd_host.run(self.state, list(argv), check=check, timeout=timeout,
                                input=input)

    def systemctl(self, *args, check=True):
        return self.sh("systemctl", *args, check=check)

    def show(self, unit, *props):
        """`systemctl show UNIT -p …` as a dict."""
        argv = ["systemctl", "show", unit]
        for p in props:
            argv += ["-p", p]
        out = self.sh(*argv).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, unit, *extra):
        """The unit's journal lines since this test installed deployd."""
        since = ["--after-cursor", self.cursor] if getattr(self, "cursor", "") else []
        return self.sh("journalctl", "--no-pager", "-o", "cat", "-u", unit, *since, *extra,
                       check=False).stdout

    def journal_entries(self, unit):
        """The unit's journal entries since this test installed deployd, as dicts
        (`journalctl -o json`)."""
        since = ["--after-cursor", self.cursor] if getattr(self, "cursor", "") else []
        out = self.sh("journalctl", "--no-pager", "-o", "json", "-u", unit, *since,
                      check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def cgroup_procs(self, cgroup):
        """The path of `cgroup`'s cgroup.procs in the container, in the hierarchy that systemd
        keeps its units in: cgroup2 under /sys/fs/cgroup/unified on a hybrid host (as this
        project's machines are), /sys/fs/cgroup on a cgroup2-only one, the name=systemd
        hierarchy on a v1 one."""
        for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup"):
            if self.sh("test", "-e", root + "/system.slice/cgroup.procs",
                       check=False).returncode == 0:
                return root + cgroup + "/cgroup.procs"
        raise AssertionError("no cgroup hierarchy with system.slice in the container")

    def alive(self, pid):
        """Whether pid (as the container sees it) is a live process there."""
        cp = self.sh("ps", "-o", "stat=", "-p", str(pid), check=False)
        return cp.returncode == 0 and not cp.stdout.strip().startswith("Z")

    def install(self, config="", environment=None, service=()):
        """Installs deployd.service (the repository's unit, untouched) with a drop-in for this
        test's socket, state directory and config (and the [Service] lines `service`), and
        starts it (Type=notify: `start` returns once deployd sent READY=1)."""
        self.write_file("deployd.yaml", config)
        # The journal from here on is this test's (the container's journal holds earlier ones).
        self.cursor = self.sh("journalctl", "-n", "0", "--show-cursor", "-q").stdout.split(
            "-- cursor: ")[-1].strip()
        env = {"PATH": PATH_INSIDE, "DEPLOYD_SIM_DIR": self.inside + "/sim",
               "PYTHONPATH": SOURCE_INSIDE + "/tests/standins/pylib"}
        env.update(environment or {})
        os.makedirs(os.path.join(self.dir, "sim"), exist_ok=True)
        self.sh("mkdir", "-p", STANDIN_BIN, os.path.dirname(DROPIN))
        for tool in STANDIN_TOOLS:
            self.sh("ln", "-sf", SOURCE_INSIDE + "/tests/standins/" + tool, STANDIN_BIN + "/" + tool)
        self.sh("cp", SOURCE_INSIDE + "/systemd/deployd.service", "/etc/systemd/system/")
        lines = ["[Service]", "ExecStart=",
                 "ExecStart=/usr/local/bin/deployd --config %s/deployd.yaml --socket %s/deployd.sock"
                 " --state-dir %s/state" % (self.inside, self.inside, self.inside)]
        lines += ["Environment=%s=%s" % (k, v) for k, v in sorted(env.items())]
        lines += list(service)
        self.sh("tee", DROPIN, input="\n".join(lines) + "\n")
        self.systemctl("daemon-reload")
        self.start()
        return self

    def start(self, extra_env=None):
        self.systemctl("start", "deployd.service")
        self.starts += 1
        self.wait_ready()
        return self

    def wait_ready(self, timeout=harness.START_TIMEOUT):
        harness.wait_until(lambda: os.path.exists(self.socket), timeout,
                           message="deployd's socket %s" % self.socket)

    def running(self):
        return self.show("deployd.service", "ActiveState").get("ActiveState") == "active"

    def stop(self, timeout=harness.STOP_TIMEOUT):
        self.systemctl("stop", "deployd.service")

    def restart(self):
        self.systemctl("restart", "deployd.service")
        self.starts += 1
        self.wait_ready()
        return self

    def main_pid(self):
        return int(self.show("deployd.service", "MainPID")["MainPID"])

    def kill9(self):
        self.systemctl("kill", "--signal=SIGKILL", "--kill-who=main", "deployd.service")

    def log(self):
        return self.journal("deployd.service")

    def cleanup(self):
        self.systemctl("stop", "deployd.service", check=False)
        # KillMode=process leaves the actions running: they go with the test.
        self.systemctl("kill", "--signal=SIGKILL", "deployd.service", check=False)
        self.sh("rm", "-f", DROPIN, check=False)
        self.systemctl("daemon-reload", check=False)
        self.systemctl("reset-failed", check=False)


class SystemdTestCase(unittest.TestCase):
    """self.d: a SystemdDaemon for this test (not started: call self.d.install(...))."""

    maxDiff = None
    assert_events_consistent = harness.DaemonTestCase.assert_events_consistent

    @classmethod
    def setUpClass(cls):
        cls.host = _state()

    def setUp(self):
        name = "t-" + uuid.uuid4().hex[:8]
        self.d = SystemdDaemon(self.host, name)
        self.addCleanup(self.d.cleanup)

    def unit_cleanup(self, unit):
        """Stops and removes a unit the test's plans create, whatever happens."""
        def cleanup():
            self.d.systemctl("stop", unit, check=False)
            self.d.sh("rm", "-f", "/etc/systemd/system/" + unit, check=False)
            self.d.systemctl("daemon-reload", check=False)
            self.d.systemctl("reset-failed", unit, check=False)
        self.addCleanup(cleanup)


def main():
    """Runs the module's tests; exits 77 (CTest's skip) when every test was skipped."""
    harness.main_skipping_with_77()
