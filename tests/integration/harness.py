"""Test harness for deployd's end-to-end tests: the real deployd and deployctl, driven with
Python's standard library only.

Everything a test starts (the daemon, HTTP servers, the processes of its steps) is cleaned up by
the test case's cleanups, also when the test fails. Waits are bounded (a deadline and small
sleeps); no test asserts that anything is fast, only what happened.

Environment (set by CTest, see CMakeLists.txt): DEPLOYD_BIN, DEPLOYCTL_BIN, DEPLOYD_SOURCE_DIR.
"""

import http.server
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("DEPLOYD_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
DEPLOYD_BIN = os.environ.get("DEPLOYD_BIN") or os.path.join(SOURCE_DIR, "build", "bin", "deployd")
DEPLOYCTL_BIN = os.environ.get("DEPLOYCTL_BIN") or os.path.join(SOURCE_DIR, "build", "bin", "deployctl")

# Bounds on waits. Generous: the machine may be loaded; nothing asserts speed.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
RUN_TIMEOUT = 60.0
CTL_TIMEOUT = 60.0

# Every process started by a test's daemon inherits this variable (with a value unique to the
# test), so that the cleanup finds and kills what a step left behind, whatever its command line.
TAG_VAR = "DEPLOYD_E2E_TAG"

TERMINAL_RUN_STATES = ("succeeded", "failed", "cancelled")

# What systemd gives a service; a test daemon must not talk to the test runner's systemd.
SYSTEMD_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM",
                "INVOCATION_ID", "LISTEN_FDS", "LISTEN_PID")


def wait_until(predicate, timeout=RUN_TIMEOUT, interval=0.05, message="condition"):
    """Polls predicate() until it returns a true value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, message))
        time.sleep(interval)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique_marker(prefix="e2e-mark"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:12])


def who():
    """How deployd names the user running the tests, the peer of its socket, in the records of
    what they asked: "alice (uid 1000)" ("uid 1000" for a uid without a name)."""
    import pwd
    uid = os.getuid()
    try:
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return "uid %d" % uid


# ---- processes

def _proc_read(pid, name):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read()
    except OSError:
        return None


def _is_zombie(pid):
    stat = _proc_read(pid, "stat")
    if stat is None:
        return True  # gone
    # "PID (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
    rest = stat[stat.rfind(b")") + 2:]
    return rest[:1] in (b"Z", b"X")


def _all_pids():
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            yield int(name)


def pids_with_marker(marker, where=("cmdline",)):
    """Live (non-zombie) processes whose /proc/PID/cmdline (or environ, when asked) contains
    `marker`. The test process itself is never listed."""
    needle = marker.encode()
    found = []
    for pid in _all_pids():
        for part in where:
            data = _proc_read(pid, part)
            if data and needle in data and not _is_zombie(pid):
                found.append(pid)
                break
    return sorted(found)


def describe_pids(pids):
    lines = []
    for pid in pids:
        cmd = (_proc_read(pid, "cmdline") or b"").replace(b"\0", b" ").decode(errors="replace")
        lines.append("  pid %d: %s" % (pid, cmd.strip()))
    return "\n".join(lines)


def wait_no_marker(marker, where=("cmdline",), timeout=RUN_TIMEOUT):
    """Waits (bounded) until no live process carries `marker`; fails listing them otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        pids = pids_with_marker(marker, where)
        if not pids:
            return
        if time.monotonic() >= deadline:
            raise AssertionError("processes with marker %r are still alive:\n%s"
                                 % (marker, describe_pids(pids)))
        time.sleep(0.05)


def kill_marked(marker, where=("cmdline", "environ")):
    """SIGKILLs every live process carrying `marker` (cleanup), and each one's process group."""
    for _ in range(20):
        pids = pids_with_marker(marker, where)
        if not pids:
            return
        for pid in pids:
            try:
                # A group led by a marked process goes as a whole (never the test's own group).
                if os.getpgid(pid) == pid and pid != os.getpgrp():
                    os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


# ---- HTTP server with programmable answers

class HttpServer:
    """A threaded HTTP server on 127.0.0.1. `set(path, status, body)` programs the answer to
    GET/POST of `path` (anything else: 404). `hits[path]` counts the requests."""

    def __init__(self):
        self.routes = {}
        self.hits = {}
        self.lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                with owner.lock:
                    owner.hits[path] = owner.hits.get(path, 0) + 1
                    status, body = owner.routes.get(path, (404, "not found\n"))
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.close_connection = True
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a probe may stop reading a large answer after its header

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def set(self, path, status, body=""):
        with self.lock:
            self.routes[path] = (status, body)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


# ---- the daemon

class Daemon:
    """The real deployd on a private socket and state directory under a fresh temporary
    directory. `ctl()` runs the real deployctl against it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="deployd-e2e-")
        self.socket = os.path.join(self.dir, "deployd.sock")
        self.state_dir = os.path.join(self.dir, "state")
        self.db = os.path.join(self.state_dir, "deployd.db")
        self.log_path = os.path.join(self.dir, "deployd.stderr")
        self.tag = "%s-%s" % (os.path.basename(self.dir), uuid.uuid4().hex[:8])
        self.proc = None
        self._log = None
        self.starts = 0
        self.extra_args = []  # more deployd flags, e.g. ["--config", FILE]
        self.launcher = []  # what deployd is run through, e.g. ["ip", "netns", "exec", NS]

    # -- lifecycle

    def start(self, extra_env=None):
        """Starts deployd and waits (bounded) until its socket answers. `extra_env` is added
        to its environment (which never inherits the test runner's systemd variables)."""
        assert self.proc is None or self.proc.poll() is not None, "deployd is already running"
        env = dict(os.environ)
        for name in SYSTEMD_VARS + ("DEPLOYD_SOCKET",):
            env.pop(name, None)
        env[TAG_VAR] = self.tag
        env.update(extra_env or {})
        self._log = open(self.log_path, "ab")
        self._log.write(("---- start %d ----\n" % (self.starts + 1)).encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            self.launcher + [DEPLOYD_BIN, "--socket", self.socket, "--state-dir", self.state_dir]
            + self.extra_args,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env, cwd=self.dir)
        self.starts += 1
        self.wait_ready()
        return self

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("deployd exited with %s before accepting connections:\n%s"
                                     % (self.proc.returncode, self.log()))
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(5)
                    s.connect(self.socket)
                    s.sendall(b'{"v": 1, "op": "ping"}\n')
                    if b'"ok":true' in s.recv(4096):
                        return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise AssertionError("deployd did not accept connections on %s within %.0fs:\n%s"
                                     % (self.socket, timeout, self.log()))
            time.sleep(0.05)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._close_log()

    def kill9(self):
        """SIGKILL: a crash. Returns the exit status (-9)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            return self.proc.wait(STOP_TIMEOUT)
        finally:
            self._close_log()

    def restart(self):
        """Stops (gracefully) if running, then starts again on the same socket and state."""
        if self.running():
            self.stop()
        return self.start()

    def _close_log(self):
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def cleanup(self):
        """Kills the daemon and every process it started (also after a crash), removes files."""
        try:
            if self.running():
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            self._close_log()
            kill_marked(self.tag, where=("environ",))
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- files

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def write_file(self, name, text, mode=None):
        path = self.path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        if mode is not None:
            os.chmod(path, mode)
        return path

    def write_plan(self, name, text):
        """Writes a plan into the temp dir; `@DIR@` in `text` becomes a fresh work directory
        for the plan's files (returned as .work) and `@TAG@` the daemon's tag."""
        work = self.path("work-" + os.path.splitext(name)[0])
        os.makedirs(work, exist_ok=True)
        path = self.write_file(name, text.replace("@DIR@", work).replace("@TAG@", self.tag))
        return Plan(path, work)

    # -- deployctl

    def ctl(self, *args, check=None, env=None, timeout=CTL_TIMEOUT, argv_prefix=()):
        """Runs deployctl with DEPLOYD_SOCKET set; returns the CompletedProcess (text). `check`
        is the expected exit status, asserted with the output in the message."""
        full_env = dict(os.environ)
        full_env["DEPLOYD_SOCKET"] = self.socket
        if env:
            full_env.update(env)
        try:
            cp = subprocess.run(list(argv_prefix) + [DEPLOYCTL_BIN] + [str(a) for a in args],
                                env=full_env, capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout
            raise AssertionError("deployctl %s did not finish within %.0fs\n--- stdout\n%s"
                                 "--- deployd log\n%s" % (" ".join(map(str, args)), timeout,
                                                          out or "", self.log()[-4000:]))
        if check is not None and cp.returncode != check:
            raise AssertionError(
                "deployctl %s: exit status %d, expected %d\n--- stdout\n%s--- stderr\n%s"
                "--- deployd log\n%s" % (" ".join(map(str, args)), cp.returncode, check,
                                         cp.stdout, cp.stderr, self.log()[-4000:]))
        return cp

    def apply(self, plan, *args, wait=True, check=None):
        """`deployctl apply PLAN [ARGS] [--wait]`; returns (run id, CompletedProcess)."""
        plan_path = plan.path if isinstance(plan, Plan) else plan
        extra = list(args) + (["--wait"] if wait else [])
        cp = self.ctl("apply", plan_path, *extra, check=check)
        lines = cp.stdout.splitlines()
        if not lines:
            raise AssertionError("apply printed no run id (exit %d)\n%s" % (cp.returncode, cp.stderr))
        return lines[0], cp

    def status_json(self, run):
        cp = self.ctl("status", run, "--json")
        if cp.returncode not in (0, 1):
            raise AssertionError("status %s --json: exit %d: %s" % (run, cp.returncode, cp.stderr))
        return json.loads(cp.stdout)

    def step(self, run, step_id, status=None):
        status = status or self.status_json(run)
        for s in status["steps"]:
            if s["id"] == step_id:
                return s
        raise AssertionError("run %s has no step %r: %s" % (run, step_id, status))

    def wait_run(self, run, states=TERMINAL_RUN_STATES, timeout=RUN_TIMEOUT):
        """Waits until the run's state is one of `states`; returns its status object."""
        last = {}

        def reached():
            last["s"] = self.status_json(run)
            return last["s"] if last["s"]["state"] in states else None
        try:
            return wait_until(reached, timeout, message="run %s to be %s" % (run, "/".join(states)))
        except AssertionError as e:
            raise AssertionError("%s; last status: %s\n--- deployd log\n%s"
                                 % (e, json.dumps(last.get("s")), self.log()[-4000:]))

    def wait_step(self, run, step_id, states, timeout=RUN_TIMEOUT):
        last = {}

        def reached():
            last["s"] = self.status_json(run)
            return last["s"] if self.step(run, step_id, last["s"])["state"] in states else None
        try:
            return wait_until(reached, timeout, message="step %s of %s to be %s"
                              % (step_id, run, "/".join(states)))
        except AssertionError as e:
            raise AssertionError("%s; last status: %s" % (e, json.dumps(last.get("s"))))

    # -- the database, read-only

    def events(self, run):
        """The run's rows of the events table, in seq order, as dicts."""
        conn = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True, timeout=5)
        try:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT seq, at_ms, step_id, kind, state, detail FROM events WHERE run_id = ? "
                "ORDER BY seq", (run,)).fetchall()
            return [dict(r) for r in rows]
        finally:
            conn.close()

    # -- raw protocol

    def raw_connect(self, timeout=10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.socket)
        return s


def read_line(sock, buffer=b""):
    """Reads one '\\n'-terminated line from sock; returns (line without '\\n', rest). At EOF
    before a newline, returns (None, data)."""
    while b"\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buffer
        buffer += chunk
    line, _, rest = buffer.partition(b"\n")
    return line, rest


def main_skipping_with_77():
    """Runs the __main__ module's tests (or those named on the command line, e.g.
    Class.test_name); exits 77 (CTest's skip) when every test was skipped, e.g. by a
    setUpModule or setUpClass that found what it needs missing."""
    module = sys.modules["__main__"]
    loader = unittest.defaultTestLoader
    suite = (loader.loadTestsFromNames(sys.argv[1:], module) if sys.argv[1:]
             else loader.loadTestsFromModule(module))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    # A class or module skipped in its setUp counts one skip and no test run.
    if result.skipped and len(result.skipped) >= result.testsRun and result.wasSuccessful():
        print("skipped: %s" % result.skipped[0][1])
        sys.exit(77)
    sys.exit(0 if result.wasSuccessful() else 1)


class Plan:
    def __init__(self, path, work):
        self.path = path
        self.work = work

    def file(self, *parts):
        return os.path.join(self.work, *parts)

    def __str__(self):
        return self.path


class DaemonTestCase(unittest.TestCase):
    """Starts a fresh deployd for each test (self.d) and cleans up everything afterwards."""

    start_daemon = True
    maxDiff = None

    def setUp(self):
        for binary in (DEPLOYD_BIN, DEPLOYCTL_BIN) if self.start_daemon else (DEPLOYCTL_BIN,):
            if not os.access(binary, os.X_OK):
                self.fail("binary not found or not executable: %s (set DEPLOYD_BIN/DEPLOYCTL_BIN)"
                          % binary)
        self.d = Daemon()
        self.addCleanup(self.d.cleanup)
        if self.start_daemon:
            self.d.start()

    def http_server(self):
        server = HttpServer()
        self.addCleanup(server.close)
        return server

    def wait_no_step_processes(self, timeout=RUN_TIMEOUT):
        """Waits (bounded) until no process started by this test's daemon is alive: they all
        carry the daemon's tag in their environment (as does the daemon, which is left out)."""
        daemon = self.d.proc.pid if self.d.running() else None
        deadline = time.monotonic() + timeout
        while True:
            left = [p for p in pids_with_marker(self.d.tag, where=("environ",)) if p != daemon]
            if not left:
                return
            if time.monotonic() >= deadline:
                raise AssertionError("processes started by deployd are still alive:\n"
                                     + describe_pids(left))
            time.sleep(0.05)

    def assert_events_consistent(self, run, status=None):
        """The run's events are seq 1..N without gaps, and each step's last step.state event
        names the state `status --json` reports for it (a step without events is pending)."""
        events = self.d.events(run)
        self.assertTrue(events, "run %s has no events" % run)
        self.assertEqual([e["seq"] for e in events], list(range(1, len(events) + 1)),
                         "events of %s are not seq 1..N" % run)
        status = status or self.d.status_json(run)
        last = {}
        for e in events:
            if e["kind"] == "step.state":
                last[e["step_id"]] = e["state"]
        for s in status["steps"]:
            self.assertEqual(last.get(s["id"], "pending"), s["state"],
                             "step %s: last step.state event vs status --json\nevents: %s"
                             % (s["id"], json.dumps(events, indent=1)))
        run_states = [e["state"] for e in events if e["kind"] == "run.state"]
        self.assertTrue(run_states, "run %s has no run.state event" % run)
        self.assertEqual(run_states[-1], status["state"])
        return events


class PtyProcess:
    """A process whose stdout and stderr are a pseudo-terminal of `cols` x `rows` (what
    deployctl sees on a terminal); `output` is what it has written so far, as bytes."""

    def __init__(self, argv, env, cols=100, rows=30):
        import fcntl
        import pty
        import struct
        import termios
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                                     env=env, close_fds=True)
        os.close(slave)
        self.output = bytearray()
        self.closed = False

    def read_some(self, timeout):
        """Reads what comes within `timeout`; False at the end of the output."""
        import errno
        import select
        if self.closed:
            return False
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError as e:  # EIO: the other side has closed
            if e.errno != errno.EIO:
                raise
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.output.extend(chunk)
        return True

    def read_until(self, pattern, timeout=60):
        """Reads until the output matches the regex `pattern` (bytes); fails at the deadline
        or the end of the output."""
        import re
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.output):
            if time.monotonic() > deadline or not self.read_some(0.5):
                raise AssertionError("no %r in %r" % (pattern, bytes(self.output)))

    def finish(self, timeout=60):
        """Reads to the end; returns (exit status, output as text with '\\n' line ends)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.read_some(0.5):
            if self.proc.poll() is not None and not self.read_some(0.1):
                break
        status = self.proc.wait(30)
        return status, self.output.decode(errors="replace").replace("\r\n", "\n")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
