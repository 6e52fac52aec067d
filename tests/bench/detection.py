#!/usr/bin/env python3
"""Failure-detection latency of deployd: from a step's child failing to the step being `failed`.

Two modes, interleaved, `--samples` (default 30) each, on one real deployd:

  exit     the child (python3) writes time.time_ns() to stdout and calls os._exit(3) at once;
  fail_on  the child writes a line "FATAL <time.time_ns()>" matching the step's
           `watch.fail_on`, then sleeps (deployd stops it).

Each sample is one run of a one-step plan. The child's timestamp is read back from the step's
log. Two daemon-side moments are compared with it (all clocks are CLOCK_REALTIME, one machine):

  db        `at_ms` of the step's `failed` event in the events table. deployd takes it when it
            decides, just before the durable commit; it has millisecond resolution (truncated,
            so a single sample reads 0..1 ms low).
  follower  arrival of the `failed` event line at a client that sent
            {"v":1,"op":"follow","run":ID} on the control socket (time.time_ns() right after
            recv). It includes the commit (an fsync), notification and the socket hop.

The child sleeps --lead (default 0.2 s) before failing so that the follower is subscribed;
python's start-up happens before the timestamp and is not measured.

Usage: tests/bench/detection.py [--samples 30] [--build-dir build] [--json FILE]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TARGET_MEDIAN_MS = 10.0

CHILD_EXIT = """\
import os, sys, time
time.sleep(float(sys.argv[1]))
t = time.time_ns()
os.write(1, b"T=%d\\n" % t)
os._exit(3)
"""

CHILD_FAIL_ON = """\
import os, sys, time
time.sleep(float(sys.argv[1]))
t = time.time_ns()
os.write(1, b"FATAL T=%d\\n" % t)
time.sleep(60)
"""


def make_plan(mode, child_path, lead):
    lines = ["version: 1", f"name: detect-{mode.replace('_', '-')}", "steps:",
             "  - id: boom", f"    run: [python3, {child_path}, '{lead}']"]
    if mode == "fail_on":
        lines += ["    grace: 1s", "    watch:", "      fail_on: 'FATAL T='"]
    return "\n".join(lines) + "\n"


def child_timestamp_ns(daemon, run_id):
    path = os.path.join(daemon.state_dir, "logs", run_id, "boom.log")
    with open(path) as f:
        for line in f:
            if "T=" in line:
                return int(line.split("T=", 1)[1].split()[0])
    raise RuntimeError(f"no timestamp in {path}")


def one_sample(daemon, mode, plan_text):
    """Applies the plan and follows it on the same connection; returns the two latencies (ms)."""
    with daemon.connect() as s:
        conn = benchlib.LineConn(s)
        conn.send({"op": "apply", "plan_text": plan_text, "plan_file": f"detect-{mode}.yaml"})
        answer = conn.receive()
        if not answer.get("ok"):
            raise RuntimeError(f"apply refused: {answer}")
        run_id = answer["run"]
        conn.send({"op": "follow", "run": run_id})
        snapshot = conn.receive()
        if snapshot.get("type") != "snapshot":
            raise RuntimeError(f"unexpected first follow line: {snapshot}")
        if any(st["state"] == "failed" for st in snapshot["run"].get("steps", [])):
            raise RuntimeError("the step failed before the follower subscribed; raise --lead")
        arrival_ns = None
        while True:
            line = conn.receive()
            if (line.get("type") == "event" and line.get("step") == "boom"
                    and line.get("state") == "failed" and arrival_ns is None):
                arrival_ns = conn.last_arrival_ns
            if line.get("type") == "end":
                break
    if arrival_ns is None:
        raise RuntimeError(f"{run_id}: no failed event for step boom")
    t_child = child_timestamp_ns(daemon, run_id)
    failed = [e for e in daemon.events(run_id) if e["step_id"] == "boom" and e["state"] == "failed"]
    if not failed:
        raise RuntimeError(f"{run_id}: no failed event in the database")
    return {
        "run": run_id,
        "db_ms": failed[0]["at_ms"] - t_child / 1e6,
        "follower_ms": (arrival_ns - t_child) / 1e6,
        "detail": failed[0]["detail"],
    }


def summarize(values):
    return {"median": round(benchlib.median(values), 3), "p90": round(benchlib.quantile(values, 0.9), 3),
            "min": round(min(values), 3), "max": round(max(values), 3), "n": len(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=30, help="per mode")
    ap.add_argument("--lead", type=float, default=0.2, help="child's sleep before failing (s)")
    ap.add_argument("--build-dir", default=None, help="default: <source>/build")
    ap.add_argument("--tmp", default="/tmp", help="where temp dirs go (default /tmp)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--keep", action="store_true", help="keep the daemon's temp dir")
    args = ap.parse_args()

    deployd = benchlib.find_binary("deployd", "DEPLOYD_BIN", args.build_dir)
    modes = ("exit", "fail_on")
    samples = {m: [] for m in modes}
    print(f"detection: {args.samples} samples per mode; load average {benchlib.load_average()}",
          flush=True)
    with benchlib.Daemon(deployd, args.tmp, keep=args.keep) as d:
        plans = {}
        for mode, code in (("exit", CHILD_EXIT), ("fail_on", CHILD_FAIL_ON)):
            child = os.path.join(d.work, f"child_{mode}.py")
            with open(child, "w") as f:
                f.write(code)
            plans[mode] = make_plan(mode, child, args.lead)
        for i in range(args.samples):
            for mode in modes:
                r = one_sample(d, mode, plans[mode])
                samples[mode].append(r)
                print(f"  {mode:7} {i + 1:3}: db {r['db_ms']:7.2f} ms   follower "
                      f"{r['follower_ms']:7.2f} ms   ({r['detail'][:60]})", flush=True)
                time.sleep(0.05)

    summary = {"samples": args.samples, "target_median_ms": TARGET_MEDIAN_MS,
               "load_average_end": benchlib.load_average()}
    ok = True
    for mode in modes:
        db = summarize([r["db_ms"] for r in samples[mode]])
        fol = summarize([r["follower_ms"] for r in samples[mode]])
        summary[mode] = {"db": db, "follower": fol, "samples": samples[mode]}
        ok = ok and fol["median"] < TARGET_MEDIAN_MS
        print(f"{mode:7}: db at_ms  median {db['median']:6.2f} ms  p90 {db['p90']:6.2f} ms   "
              f"follower median {fol['median']:6.2f} ms  p90 {fol['p90']:6.2f} ms")
    print(f"target: median < {TARGET_MEDIAN_MS} ms (follower, the stricter): "
          f"{'OK' if ok else 'ABOVE TARGET'}")
    print(f"load average at end: {summary['load_average_end']}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
