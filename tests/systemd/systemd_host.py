#!/usr/bin/env python3
"""The systemd test host: real systemd 252 as PID 1 in a minimal Debian 12 root, booted with
systemd-nspawn, for the end-to-end tests that need systemd itself (the `service` action,
deployd.service, the shipped plans). Not a fake: the real systemd, journald and systemctl.

The root is made once per machine with debootstrap and cached under
/var/cache/deployd-test/ (DEPLOYD_TEST_CACHE), named after a hash of tests/systemd/packages
and the mirror, so that a changed package list makes a new one. It is booted with
`--volatile=overlay`: the cached tree stays read-only and every change made while it runs goes
to a tmpfs that vanishes with the container. One boot serves all systemd tests (a CTest
fixture: `up` before them, `down` after).

Inside the container:
  /srv/deployd-test          a host directory (HOST_DIR/shared), read-write: sockets, state
                             directories, ledgers — what the tests on the host look at
  /opt/deployd/bin           the freshly built binaries (read-only); deployd and deployctl are
                             also linked from /usr/local/bin, where deployd.service expects them
  /opt/deployd/source        the source tree (read-only): systemd/, plans/, tests/standins/
The container shares the host's network, so HTTP servers a test starts on 127.0.0.1 are
reachable from its units.

Usage (CTest runs these):
  systemd_host.py up HOST_DIR BIN_DIR SOURCE_DIR   # make the root if needed, boot, wait
  systemd_host.py down HOST_DIR                    # power off, wait, clean up
`up` exits 77 (CTest's skip) with the reason when the host cannot be made here: not root, no
systemd-nspawn or debootstrap, no Debian mirror, or a boot that fails. Tests then skip with the
same reason (read from HOST_DIR/state.json). DEPLOYD_SYSTEMD_TESTS=off skips them on purpose.
"""

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("DEPLOYD_TEST_CACHE", "/var/cache/deployd-test")
BOOT_TIMEOUT = 60.0
DEBOOTSTRAP_TIMEOUT = 900.0


class Unavailable(Exception):
    """The systemd host cannot be made on this machine; the message says why."""


def _mirror():
    """The Debian mirror this machine's apt uses (the URIs line of its .sources file)."""
    directory = "/etc/apt/sources.list.d"
    candidates = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for name in candidates:
        if name.endswith(".sources"):
            with open(os.path.join(directory, name)) as f:
                for line in f:
                    if line.startswith("URIs:"):
                        return line.split()[1]
    if os.path.exists("/etc/apt/sources.list"):
        with open("/etc/apt/sources.list") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[0] == "deb":
                    return parts[1] if not parts[1].startswith("[") else parts[2]
    raise Unavailable("no Debian mirror configured for apt (/etc/apt/sources.list.d/*.sources)")


def _packages():
    with open(os.path.join(HERE, "packages")) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def ensure_root():
    """The cached root's path; makes it first (debootstrap, a few minutes) if needed."""
    if os.environ.get("DEPLOYD_SYSTEMD_TESTS") == "off":
        raise Unavailable("turned off (DEPLOYD_SYSTEMD_TESTS=off)")
    if os.geteuid() != 0:
        raise Unavailable("needs root (systemd-nspawn and debootstrap)")
    for tool in ("systemd-nspawn", "debootstrap", "nsenter"):
        if shutil.which(tool) is None:
            raise Unavailable("%s is not installed (packages systemd-container, debootstrap)" % tool)
    mirror = _mirror()
    packages = _packages()
    key = hashlib.sha256(("\n".join(packages) + "\n" + mirror).encode()).hexdigest()[:12]
    root = os.path.join(CACHE, "bookworm-" + key)
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others wait and reuse it
        if os.path.exists(os.path.join(root, ".ready")):
            return root
        partial = root + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        log_path = root + ".log"
        sys.stderr.write("systemd host: making a Debian 12 root in %s (debootstrap) ...\n" % root)
        with open(log_path, "w") as log:
            try:
                code = subprocess.call(
                    ["debootstrap", "--variant=minbase", "--include=" + ",".join(packages),
                     "bookworm", partial, mirror],
                    stdout=log, stderr=subprocess.STDOUT, timeout=DEBOOTSTRAP_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
        if code != 0:
            with open(log_path, errors="replace") as log:
                tail = log.read()[-600:]
            shutil.rmtree(partial, ignore_errors=True)
            raise Unavailable("debootstrap from %s failed (%s):\n%s"
                              % (mirror, "timed out" if code is None else "exit %d" % code, tail))
        # Quiet and quick to boot: no getty on the console, nothing waiting for a network.
        for unit in ("console-getty.service", "getty@tty1.service",
                     "systemd-networkd-wait-online.service"):
            link = os.path.join(partial, "etc/systemd/system", unit)
            if not os.path.lexists(link):
                os.symlink("/dev/null", link)
        open(os.path.join(partial, ".ready"), "w").close()
        for stale in os.listdir(CACHE):  # roots (and their logs) of earlier package lists
            path = os.path.join(CACHE, stale)
            if stale.startswith("bookworm-") and not stale.startswith(os.path.basename(root)):
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
        os.rename(partial, root)
        return root


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def boot(host_dir, bin_dir, source_dir):
    """Boots the container and waits until systemd says it is running; returns its state."""
    root = ensure_root()
    shared = os.path.join(host_dir, "shared")
    os.makedirs(shared, exist_ok=True)
    os.chmod(shared, 0o755)
    console = open(os.path.join(host_dir, "console.log"), "wb")
    argv = ["systemd-nspawn", "--register=no", "--keep-unit", "--console=pipe", "--quiet",
            "-b", "-D", root, "--volatile=overlay",
            "--machine=deployd-test-%d" % os.getpid(),
            "--bind=%s:/srv/deployd-test" % shared,
            "--bind-ro=%s:/opt/deployd/bin" % os.path.abspath(bin_dir),
            "--bind-ro=%s:/opt/deployd/source" % os.path.abspath(source_dir)]
    # setsid: the container outlives this `up` command, until `down`.
    leader = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console,
                              stderr=subprocess.STDOUT, start_new_session=True)
    state = {"leader_pid": leader.pid, "root": root, "shared": shared}
    deadline = time.monotonic() + BOOT_TIMEOUT
    last = ""
    while time.monotonic() < deadline:
        if leader.poll() is not None:
            break
        inits = _children(leader.pid)
        if inits:
            state["init_pid"] = inits[0]
            cp = subprocess.run(_enter(state, ["systemctl", "is-system-running"]),
                                capture_output=True, text=True)
            last = cp.stdout.strip()
            if last in ("running", "degraded"):
                break
        time.sleep(0.1)
    else:
        leader.kill()
        raise Unavailable("systemd in the container did not reach 'running' within %.0fs (%s)"
                          % (BOOT_TIMEOUT, last or "no init"))
    if leader.poll() is not None:
        with open(os.path.join(host_dir, "console.log"), errors="replace") as f:
            raise Unavailable("systemd-nspawn exited with %d:\n%s"
                              % (leader.returncode, f.read()[-600:]))
    for name in ("deployd", "deployctl"):
        run(state, ["ln", "-sf", "/opt/deployd/bin/" + name, "/usr/local/bin/" + name])
    state["system_state"] = last
    return state


def _enter(state, argv):
    return ["nsenter", "-t", str(state["init_pid"]), "-a"] + list(argv)


def run(state, argv, check=True, timeout=60, **kwargs):
    """Runs argv inside the container (all its namespaces); returns the CompletedProcess."""
    cp = subprocess.run(_enter(state, argv), capture_output=True, text=True, timeout=timeout,
                        **kwargs)
    if check and cp.returncode != 0:
        raise AssertionError("in the container: %s: exit %d\n%s%s"
                             % (" ".join(argv), cp.returncode, cp.stdout, cp.stderr))
    return cp


def power_off(state, timeout=30.0):
    leader = state.get("leader_pid")
    if not leader:
        return
    try:
        if state.get("init_pid"):
            subprocess.run(_enter(state, ["systemctl", "poweroff", "--no-block"]),
                           capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and os.path.exists("/proc/%d" % leader):
        try:
            if os.waitpid(leader, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            pass  # not our child (`down` is another process than `up`)
        time.sleep(0.1)
    try:
        os.killpg(leader, signal.SIGKILL)
    except OSError:
        pass


def load_state(host_dir):
    """The running host's state, or raises Unavailable with the reason `up` recorded."""
    path = os.path.join(host_dir, "state.json")
    try:
        with open(path) as f:
            state = json.load(f)
    except OSError:
        raise Unavailable("the systemd host was not started (no %s)" % path)
    if state.get("unavailable"):
        raise Unavailable(state["unavailable"])
    return state


def main(argv):
    if len(argv) >= 5 and argv[1] == "up":
        host_dir = argv[2]
        os.makedirs(host_dir, exist_ok=True)
        path = os.path.join(host_dir, "state.json")
        try:
            state = boot(host_dir, argv[3], argv[4])
        except (Unavailable, OSError) as e:
            with open(path, "w") as f:
                json.dump({"unavailable": str(e)}, f)
            print("systemd host unavailable: %s" % e)
            return SKIP
        with open(path, "w") as f:
            json.dump(state, f)
        print("systemd host up: systemd %s in %s (init pid %d)"
              % (state["system_state"], state["root"], state["init_pid"]))
        return 0
    if len(argv) >= 3 and argv[1] == "down":
        try:
            state = load_state(argv[2])
        except Unavailable as e:
            print("systemd host was not up: %s" % e)
            return 0
        power_off(state)
        os.unlink(os.path.join(argv[2], "state.json"))
        print("systemd host down")
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
