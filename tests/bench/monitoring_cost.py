#!/usr/bin/env python3
"""Monitoring cost: how much CPU deployd uses while it watches a download.

A downloader-like writer (the shape of `hf download`: 140 files, 8 at a time, each written as
`.cache/huggingface/download/<file>.incomplete` and renamed into place when complete, a tqdm
line `Fetching 140 files: …| 8/140 […]` redrawn with '\\r' every 0.1 s) runs as the action of a
step, on the real deployd. For each configuration, after a warm-up, deployd's utime + stime are
read from /proc/PID/stat at the start and the end of a window of at least 30 s; the result is
the daemon's CPU as a % of one core.

Configurations:
  no-watch        the step without watch.progress (the cost of reading and logging its output)
  progress-5s     watch.progress {path, stall_after: 10m} (sampled every 5s, the default)
  progress-1s     the same with every: 1s

Usage (from the source tree, after building):
  python3 tests/bench/monitoring_cost.py [--window 30] [--rate 8MiB] [--json FILE]
Target: below 1% of one core for every configuration.
"""

import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from harness import Daemon, wait_until  # noqa: E402

WRITER = r"""
import os, sys, time
dl, files, file_size, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
partial = os.path.join(dl, ".cache", "huggingface", "download")
os.makedirs(partial, exist_ok=True)
chunk = b"\0" * 65536
names = ["model-%05d-of-%05d.safetensors" % (i + 1, files) for i in range(files)]
pending = list(names)
active = {}  # name -> bytes written
done = 0
start = time.monotonic()
written = 0
next_line = 0.0
while pending or active:
    while pending and len(active) < 8:
        active[pending.pop(0)] = 0
    for name in list(active):
        path = os.path.join(partial, name + ".0123abcd.incomplete")
        with open(path, "ab") as f:
            f.write(chunk)
        active[name] += len(chunk)
        written += len(chunk)
        if active[name] >= file_size:
            os.rename(path, os.path.join(dl, name))
            del active[name]
            done += 1
        # Keep to the rate.
        ahead = written / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    now = time.monotonic() - start
    if now >= next_line:
        next_line = now + 0.1
        pct = 100 * done // files
        bar = ("#" * (pct // 10)).ljust(10)
        sys.stdout.write("Fetching %d files: %3d%%|%s| %d/%d [%02d:%02d<?, %.2fit/s]\r"
                         % (files, pct, bar, done, files, now // 60, now % 60,
                            done / now if now else 0))
        sys.stdout.flush()
print()
"""

PLAN = """\
version: 1
name: bench-{name}
steps:
  - id: download
    run: [{python}, '{writer}', '{dl}', '{files}', '{file_size}', '{rate}']
{watch}"""

CONFIGS = [
    ("no-watch", ""),
    ("progress-5s", "    watch:\n      progress: {{path: '{dl}', stall_after: 10m}}\n"),
    ("progress-1s", "    watch:\n      progress: {{path: '{dl}', stall_after: 10m, every: 1s}}\n"),
]


def parse_rate(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for suffix, scale in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * scale)
    return int(text)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def run_ns(pid):
    """Time on a CPU in nanoseconds (/proc/PID/schedstat), finer than stat's clock ticks; None
    where the kernel does not keep it."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def measure(daemon, name, watch, args, work):
    dl = os.path.join(work, "dl-" + name)
    os.makedirs(dl)
    writer = os.path.join(work, "writer.py")
    # Enough bytes that the writer outlasts warm-up and window.
    seconds = args.warmup + args.window + 15
    file_size = max(65536, int(args.rate * seconds / args.files) // 65536 * 65536)
    plan_path = os.path.join(work, name + ".yaml")
    with open(plan_path, "w") as f:
        f.write(PLAN.format(name=name, python=sys.executable, writer=writer, dl=dl,
                            files=args.files, file_size=file_size, rate=args.rate,
                            watch=watch.format(dl=dl)))
    run, _ = daemon.apply(plan_path, wait=False, check=0)
    wait_until(lambda: daemon.step(run, "download")["state"] == "running", 30,
               message="the download to start")
    time.sleep(args.warmup)
    pid = daemon.proc.pid
    cpu0, ns0, wall0 = cpu_seconds(pid), run_ns(pid), time.monotonic()
    time.sleep(args.window)
    cpu1, ns1, wall1 = cpu_seconds(pid), run_ns(pid), time.monotonic()
    step = daemon.step(run, "download")
    progress = step.get("progress")
    if step["state"] != "running":
        raise SystemExit("%s: the download ended before the window did (%s)" % (name, step))
    daemon.ctl("cancel", run, check=0)
    daemon.wait_run(run)
    shutil.rmtree(dl, ignore_errors=True)
    return {
        "config": name,
        "window_s": round(wall1 - wall0, 1),
        "cpu_s": round(cpu1 - cpu0, 3),
        "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 3),
        "schedstat_percent_of_one_core":
            round(100 * (ns1 - ns0) / 1e9 / (wall1 - wall0), 4) if ns0 is not None else None,
        "files": args.files,
        "rate_bps": args.rate,
        "progress_at_end": progress,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--window", type=float, default=30, help="seconds measured (>= 30)")
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--rate", type=parse_rate, default=parse_rate("8MiB"),
                   help="bytes per second the writer writes (e.g. 8MiB)")
    p.add_argument("--files", type=int, default=140)
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    if args.window < 30:
        p.error("--window must be at least 30 seconds")

    daemon = Daemon()
    try:
        daemon.start()
        work = daemon.path("bench")
        os.makedirs(work)
        with open(os.path.join(work, "writer.py"), "w") as f:
            f.write(WRITER)
        results = []
        for name, watch in CONFIGS:
            r = measure(daemon, name, watch, args, work)
            results.append(r)
            fine = r["schedstat_percent_of_one_core"]
            print("%-12s %6.3f%% of one core (utime+stime %.2f s over %.1f s; schedstat %s)"
                  % (name, r["cpu_percent_of_one_core"], r["cpu_s"], r["window_s"],
                     "n/a" if fine is None else "%.4f%%" % fine), flush=True)
    finally:
        daemon.cleanup()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    worst = max(r["cpu_percent_of_one_core"] for r in results)
    print("worst: %.3f%% of one core (target < 1%%)" % worst)
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
