#!/usr/bin/env python3
"""fail_on latency for background steps: from a background action writing a fatal line to its
log (through its supervisor, not through a pipe of deployd's) to the step being `failed`.

Each sample is one run of a one-step plan on one real deployd: a `background: true` action
(python3) sleeps --lead seconds, writes "FATAL <time.time_ns()>" to stdout (the step's log
file) and sleeps on; the step's `watch.fail_on` is 'FATAL'. The step's verify check would run
for a minute, so only fail_on can end it. deployd notices the line by following the log with
inotify. Two daemon-side moments are compared with the child's timestamp (CLOCK_REALTIME, one
machine):

  db        `at_ms` of the step's `failed` event in the events table, taken when deployd
            decides, just before the durable commit (millisecond resolution, truncated).
  follower  arrival of that event at a client following the run on the control socket
            ({"v":1,"op":"follow","run":ID}); includes the commit (an fsync) and the socket hop.

Usage: tests/bench/background_fail_on.py [--samples 20] [--lead 0.3] [--build-dir build]
Prints the median, p90 and max of each, in milliseconds. Python standard library only.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))

PLAN = """\
version: 1
name: bgfail
steps:
  - id: server
    run: [python3, -c, 'import sys, time; time.sleep(%(lead)s); sys.stdout.write("FATAL %%d\\n" %% time.time_ns()); sys.stdout.flush(); time.sleep(60)']
    background: true
    watch:
      fail_on: FATAL
    verify:
      - file: %(dir)s/never
        every: 1s
        within: 60s
"""


def binary(build_dir, name):
    path = os.path.join(build_dir, "bin", name)
    if not os.access(path, os.X_OK):
        sys.exit("%s not found: build first (cmake -S . -B build -G Ninja && "
                 "cmake --build build -j2) or pass --build-dir" % path)
    return path


def quantile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def read_line(sock, buf):
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("deployd closed the follow stream")
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    return json.loads(line), rest


def sample(deployctl, sock_path, state_dir, plan_path):
    env = dict(os.environ, DEPLOYD_SOCKET=sock_path)
    out = subprocess.run([deployctl, "apply", plan_path], env=env, capture_output=True,
                         text=True, check=True).stdout
    run = out.splitlines()[0]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall((json.dumps({"v": 1, "op": "follow", "run": run}) + "\n").encode())
    buf = b""
    arrived = None
    while arrived is None:
        event, buf = read_line(s, buf)
        now = time.time_ns()
        if event.get("type") == "end":
            raise RuntimeError("run %s ended before its step failed: %s" % (run, event))
        if event.get("step") == "server" and event.get("state") == "failed":
            arrived = now
    s.close()
    with open(os.path.join(state_dir, "logs", run, "server.log")) as f:
        written = int(next(l for l in f if l.startswith("FATAL")).split()[1])
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(state_dir, "deployd.db"), uri=True)
    at_ms, detail = db.execute(
        "SELECT at_ms, detail FROM events WHERE run_id = ? AND step_id = 'server' AND "
        "state = 'failed'", (run,)).fetchone()
    db.close()
    if "fail_on" not in detail:
        raise RuntimeError("run %s failed for another reason: %s" % (run, detail))
    return (at_ms * 1e6 - written) / 1e6, (arrived - written) / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--lead", type=float, default=0.3)
    parser.add_argument("--build-dir", default=os.path.join(SOURCE_DIR, "build"))
    args = parser.parse_args()
    deployd = binary(args.build_dir, "deployd")
    deployctl = binary(args.build_dir, "deployctl")

    tmp = tempfile.mkdtemp(prefix="deployd-bench-")
    sock_path = os.path.join(tmp, "deployd.sock")
    state_dir = os.path.join(tmp, "state")
    plan_path = os.path.join(tmp, "plan.yaml")
    with open(plan_path, "w") as f:
        f.write(PLAN % {"lead": args.lead, "dir": tmp})
    log = open(os.path.join(tmp, "deployd.log"), "w")
    daemon = subprocess.Popen([deployd, "--socket", sock_path, "--state-dir", state_dir],
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock_path):
            if daemon.poll() is not None or time.monotonic() > deadline:
                sys.exit("deployd did not start; see %s" % log.name)
            time.sleep(0.02)
        db_ms, follower_ms = [], []
        for _ in range(args.samples):
            d, f = sample(deployctl, sock_path, state_dir, plan_path)
            db_ms.append(d)
            follower_ms.append(f)
        print("background fail_on latency, %d samples (load %.2f %.2f %.2f)"
              % ((args.samples,) + os.getloadavg()))
        for name, values in (("db", db_ms), ("follower", follower_ms)):
            print("  %-8s median %6.2f ms   p90 %6.2f ms   max %6.2f ms"
                  % (name, statistics.median(values), quantile(values, 0.9), max(values)))
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
