"""Hosts for the fleet's end-to-end tests, made of network namespaces and real OpenSSH.

Each host is a network namespace of its own (`ip netns add`) with a veth pair to a bridge in
the test's namespace, its own address on it, its own sshd on port 22 (Debian's openssh-server;
a host key and an authorized key made for the fleet, the host keys pinned in a known_hosts
file), and its own deployd with its own socket and state directory, started inside the
namespace. deployctl reaches the hosts with the system's ssh, configured by an ssh_config of
the fleet's own (DEPLOYD_SSH_COMMAND="ssh -F …"); its ControlMaster sockets live under the
fleet's XDG_RUNTIME_DIR, so that the masters are found and ended at teardown.

Everything is made by Fleet.up() and removed by Fleet.down(), also after a failure (call it
from a cleanup) and on SIGTERM. What a fleet made is recorded in its directory (fleet.json), so
that one left behind by a test that was killed outright is removed by the next Fleet.up(). A
fleet is shared by the tests of a module (setUpModule). Without root or network namespaces the
tests are skipped, with the reason (fleet_case.main exits 77).
"""

import glob
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.dont_write_bytecode = True

import harness  # noqa: E402

SSHD = "/usr/sbin/sshd"


class Unavailable(Exception):
    """The fleet cannot be made here; the message says why."""


def _run(*argv, check=True):
    cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    if check and cp.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), cp.returncode, cp.stderr.strip()))
    return cp


def check_available():
    if os.geteuid() != 0:
        raise Unavailable("needs root for network namespaces (running as uid %d)" % os.geteuid())
    for tool in ("ip", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            raise Unavailable("%s is not installed (iproute2, openssh-client)" % tool)
    if not os.access(SSHD, os.X_OK):
        raise Unavailable("%s is not installed (openssh-server)" % SSHD)
    probe = "dpfprobe" + uuid.uuid4().hex[:6]
    cp = _run("ip", "netns", "add", probe, check=False)
    if cp.returncode != 0:
        raise Unavailable("network namespaces are not available: " + cp.stderr.strip())
    _run("ip", "netns", "del", probe, check=False)


class HostDaemon(harness.Daemon):
    """harness.Daemon in `directory` (the fleet's, so that a sweep finds it), started inside
    the network namespace `ns`, or in the test's own with None."""

    def __init__(self, ns, directory):
        super().__init__()
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.socket = os.path.join(directory, "deployd.sock")
        self.state_dir = os.path.join(directory, "state")
        self.db = os.path.join(self.state_dir, "deployd.db")
        self.log_path = os.path.join(directory, "deployd.stderr")
        self.launcher = ["ip", "netns", "exec", ns] if ns else []


class Host:
    def __init__(self, fleet, index):
        self.fleet = fleet
        self.index = index
        self.name = "h%d" % index
        self.ns = "%s-h%d" % (fleet.id, index)
        self.veth = "%sv%d" % (fleet.id, index)
        self.address = "%s.%d" % (fleet.prefix, 10 + index)
        self.dir = os.path.join(fleet.dir, self.name)
        os.makedirs(self.dir)
        self.daemon = HostDaemon(self.ns, self.dir)
        self.sshd = []

    def url(self, user="root", port=None):
        return "ssh://%s@%s%s" % (user, self.address, ":%d" % port if port else "")

    def up(self):
        f = self.fleet
        _run("ip", "netns", "add", self.ns)
        _run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns",
             self.ns)
        _run("ip", "link", "set", self.veth, "master", f.bridge, "up")
        _run("ip", "-n", self.ns, "addr", "add", self.address + "/24", "dev", "eth0")
        _run("ip", "-n", self.ns, "link", "set", "eth0", "up")
        _run("ip", "-n", self.ns, "link", "set", "lo", "up")
        self.start_sshd(22, f.bin_dir)
        self.daemon.start()

    def start_sshd(self, port, bin_dir):
        """An sshd in the namespace on `port`, whose sessions find deployctl in `bin_dir`
        (None: nowhere on their PATH) and this host's deployd as their default socket."""
        f = self.fleet
        path = (bin_dir + ":" if bin_dir else "") + "/usr/local/bin:/usr/bin:/bin"
        config = os.path.join(self.dir, "sshd_config.%d" % port)
        with open(config, "w") as out:
            out.write("\n".join([
                "Port %d" % port,
                "ListenAddress %s" % self.address,
                "HostKey %s" % f.host_key,
                "AuthorizedKeysFile %s" % f.authorized_keys,
                "StrictModes no",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "UseDNS no",
                "PrintMotd no",
                "MaxSessions 64",
                "MaxStartups 100",
                "PidFile none",
                "SetEnv PATH=%s DEPLOYD_SOCKET=%s" % (path, self.daemon.socket),
                ""]))
        log = open(os.path.join(self.dir, "sshd.%d.log" % port), "ab")
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns, SSHD, "-D", "-e", "-f", config],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        self.sshd.append(proc)
        harness.wait_until(lambda: self._listening(port) or proc.poll() is not None,
                           timeout=30, message="sshd on %s:%d" % (self.address, port))
        if proc.poll() is not None:
            raise RuntimeError("sshd on %s:%d exited with %s" % (self.address, port,
                                                                  proc.returncode))

    def _listening(self, port):
        cp = _run("ip", "netns", "exec", self.ns, "ss", "-Hltn", "sport = :%d" % port,
                  check=False)
        return bool(cp.stdout.strip())

    def link(self, up):
        """Cuts (False) or restores (True) the host's only link."""
        _run("ip", "link", "set", self.veth, "up" if up else "down")

    def runs(self, plan=None):
        """The runs recorded by this host's deployd (of `plan`, by its name): [(id, state)]."""
        if not os.path.exists(self.daemon.db):
            return []
        conn = sqlite3.connect("file:%s?mode=ro" % self.daemon.db, uri=True, timeout=5)
        try:
            rows = conn.execute("SELECT id, plan_name, state FROM runs ORDER BY seq").fetchall()
        finally:
            conn.close()
        return [(r[0], r[2]) for r in rows if plan is None or r[1] == plan]

    def down(self):
        for proc in self.sshd:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.daemon.cleanup()
        _run("ip", "netns", "del", self.ns, check=False)


class Fleet:
    """N hosts on one bridge: h1 … hN at PREFIX.11 …; the test's namespace is PREFIX.1."""

    def __init__(self, count):
        check_available()
        self.id = "dpf" + uuid.uuid4().hex[:5]
        self.bridge = self.id
        r = uuid.uuid4().int
        self.prefix = "10.%d.%d" % (200 + r % 50, (r >> 8) % 250)
        self.dir = tempfile.mkdtemp(prefix="deployd-fleet-")
        os.chmod(self.dir, 0o755)
        self.bin_dir = os.path.dirname(os.path.abspath(harness.DEPLOYCTL_BIN))
        self.runtime_dir = os.path.join(self.dir, "xdg")
        os.makedirs(self.runtime_dir, mode=0o700)
        self.host_key = os.path.join(self.dir, "host_key")
        self.client_key = os.path.join(self.dir, "client_key")
        self.authorized_keys = os.path.join(self.dir, "authorized_keys")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self.ssh_config = os.path.join(self.dir, "ssh_config")
        self.hosts = [Host(self, i + 1) for i in range(count)]
        self.users = []

    def record(self):
        """What down() has to remove, kept next to it for a sweep after a SIGKILL."""
        with open(os.path.join(self.dir, "fleet.json"), "w") as f:
            json.dump({"owner": os.getpid(), "bridge": self.bridge, "users": self.users,
                       "namespaces": [h.ns for h in self.hosts]}, f)

    def up(self):
        sweep_stale_fleets()
        self.record()
        signal.signal(signal.SIGTERM, self._terminated)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.host_key)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.client_key)
        shutil.copy(self.client_key + ".pub", self.authorized_keys)
        os.chmod(self.authorized_keys, 0o644)
        with open(self.host_key + ".pub") as f:
            host_pub = " ".join(f.read().split()[:2])
        with open(self.known_hosts, "w") as f:
            for h in self.hosts:
                f.write("%s %s\n" % (h.address, host_pub))
        with open(self.ssh_config, "w") as f:
            f.write("Host *\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n"
                    "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
                    "  BatchMode yes\n" % (self.client_key, self.known_hosts))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", self.prefix + ".1/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for h in self.hosts:
            h.up()
        return self

    def coordinator(self):
        """A deployd of the test's own namespace (a rollout's coordinator), not started."""
        return HostDaemon(None, tempfile.mkdtemp(prefix="coordinator-", dir=self.dir))

    def env(self):
        """What deployctl needs to reach the hosts: the fleet's ssh and its own control dir."""
        env = dict(os.environ)
        env.pop("DEPLOYD_HOST", None)
        env["DEPLOYD_SSH_COMMAND"] = "ssh -F " + self.ssh_config
        env["XDG_RUNTIME_DIR"] = self.runtime_dir
        return env

    def ctl(self, *args, check=None, env=None, timeout=harness.CTL_TIMEOUT):
        """Runs the real deployctl with the fleet's ssh; returns the CompletedProcess."""
        full_env = self.env()
        full_env.pop("DEPLOYD_SOCKET", None)
        full_env.update(env or {})
        argv = [harness.DEPLOYCTL_BIN] + [str(a) for a in args]
        cp = subprocess.run(argv, env=full_env, capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL)
        if check is not None and cp.returncode != check:
            raise AssertionError("deployctl %s: exit status %d, expected %d\n--- stdout\n%s"
                                 "--- stderr\n%s" % (" ".join(argv[1:]), cp.returncode, check,
                                                     cp.stdout, cp.stderr))
        return cp

    def add_user(self):
        """A user made for the fleet (not root, in no group of deployd's), removed by down()."""
        name = "dpf-u" + uuid.uuid4().hex[:6]
        # "*": no password, but not locked ("!"), which sshd without PAM would refuse.
        _run("useradd", "--system", "--no-create-home", "--home-dir", "/", "--shell", "/bin/sh",
             "--password", "*", name)
        self.users.append(name)
        self.record()
        return name

    def end_ssh_masters(self):
        """Ends the ControlMaster connections deployctl left under the fleet's runtime dir."""
        for root, _, files in os.walk(self.runtime_dir):
            for name in files:
                _run("ssh", "-o", "ControlPath=" + os.path.join(root, name), "-O", "exit", "x",
                     check=False)
        harness.kill_marked(self.runtime_dir, where=("cmdline",))

    def _terminated(self, signum, frame):
        self.down()
        sys.exit(128 + signum)

    def down(self):
        self.end_ssh_masters()
        for h in self.hosts:
            try:
                h.down()
            except Exception as e:  # the rest must still go
                sys.stderr.write("fleet teardown of %s: %s\n" % (h.name, e))
        remove_recorded(self.dir)


def remove_recorded(directory):
    """Removes what the fleet recorded in `directory`, and the directory."""
    try:
        with open(os.path.join(directory, "fleet.json")) as f:
            made = json.load(f)
    except (OSError, ValueError):
        made = {}
    harness.kill_marked(directory, where=("cmdline", "environ"))
    for ns in made.get("namespaces", []):
        _run("ip", "netns", "del", ns, check=False)
    if made.get("bridge"):
        _run("ip", "link", "del", made["bridge"], check=False)
    for user in made.get("users", []):
        _run("userdel", user, check=False)
    shutil.rmtree(directory, ignore_errors=True)


def sweep_stale_fleets():
    """Removes the fleets whose test process is gone (killed before it could clean up)."""
    for fleet_json in glob.glob(os.path.join(tempfile.gettempdir(), "deployd-fleet-*",
                                             "fleet.json")):
        try:
            with open(fleet_json) as f:
                owner = json.load(f)["owner"]
            os.kill(owner, 0)
            continue  # still alive: another test's
        except ProcessLookupError:
            pass
        except (OSError, ValueError, KeyError):
            continue
        remove_recorded(os.path.dirname(fleet_json))
