"""Shared helpers of the deployd benchmarks (Python standard library only).

Finds the binaries, starts a real deployd on a private socket and state directory, talks the
control protocol (one JSON line each way over the Unix socket) and reads the state database.
"""

import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def find_binary(name, env_var, build_dir):
    """$ENV_VAR, else BUILD_DIR/bin/NAME (BUILD_DIR defaults to <source>/build)."""
    path = os.environ.get(env_var)
    if not path:
        path = os.path.join(build_dir or os.path.join(SOURCE_DIR, "build"), "bin", name)
    if not os.access(path, os.X_OK):
        raise SystemExit(
            f"{name} not found at {path}: build the project first "
            f"(cmake -S . -B build -G Ninja && cmake --build build -j2), "
            f"or pass --build-dir / set {env_var}")
    return path


def quantile(values, q):
    """Nearest-rank quantile (q in 0..1) of a non-empty list."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def median(values):
    return statistics.median(values)


def load_average():
    return "%.2f %.2f %.2f" % os.getloadavg()


class Daemon:
    """A real deployd on a temp socket and state dir (under `tmp_root`, default /tmp)."""

    def __init__(self, deployd, tmp_root="/tmp", keep=False, log_level=None):
        self.deployd = deployd
        self.keep = keep
        self.work = tempfile.mkdtemp(prefix="deployd-bench-", dir=tmp_root)
        self.socket_path = os.path.join(self.work, "deployd.sock")
        self.state_dir = os.path.join(self.work, "state")
        self.db_path = os.path.join(self.state_dir, "deployd.db")
        self.log_path = os.path.join(self.work, "deployd.log")
        self.proc = None
        self.log_level = log_level

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        if not self.keep:
            subprocess.run(["rm", "-rf", self.work], check=False)

    def start(self):
        env = dict(os.environ)
        env.pop("DEPLOYD_SOCKET", None)
        if self.log_level:
            env["DEPLOYD_LOG_LEVEL"] = self.log_level
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.deployd, "--socket", self.socket_path, "--state-dir", self.state_dir],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"deployd exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if self.request({"op": "ping"}).get("ok"):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"deployd did not answer on {self.socket_path} within 20s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cpu_seconds(self):
        """(the daemon's own user+system CPU, that of its reaped children), in seconds."""
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        utime, stime, cutime, cstime = (int(x) / tck for x in fields[11:15])
        return utime + stime, cutime + cstime

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.socket_path)
        return s

    def request(self, req):
        with self.connect() as s:
            conn = LineConn(s)
            conn.send(req)
            return conn.receive()

    def events(self, run_id):
        """The run's events as dicts, from the database (read-only; WAL allows it while running)."""
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT seq, at_ms, step_id, kind, state, detail FROM events "
                              "WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
            return [dict(r) for r in rows]
        finally:
            db.close()


class LineConn:
    """Newline-delimited JSON over a connected socket; `receive` also returns arrival time."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.last_arrival_ns = 0

    def send(self, obj):
        obj = dict(obj)
        obj["v"] = 1
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def receive(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            # Taken before any parsing: the moment the bytes reached this process.
            self.last_arrival_ns = time.time_ns()
            if not chunk:
                raise ConnectionError("deployd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)
