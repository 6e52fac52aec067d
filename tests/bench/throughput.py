#!/usr/bin/env python3
"""Throughput of deployd against the physical floor of the same work.

Generates a plan of N steps, each `run: [/bin/true]` with one `file:` verify check on an
existing file, starts the real deployd on a temp socket/state dir, applies the plan with
`deployctl apply --wait` and measures the wall time end to end and per step (also from the
run's created/finished timestamps in `deployctl status --json`). Then it runs the floor,
deployd_bench_floor (tests/bench/floor.cc): the same number of fork/execs of /bin/true
(posix_spawn + waitpid) and of durable SQLite commits (WAL + synchronous=FULL, one small
transaction each), in a plain loop without the daemon. The number of commits per step is
counted from the run's events table (every commit appends exactly one event).

Daemon and floor runs alternate (D F D F D F) so that both see the same background load.

Usage: tests/bench/throughput.py [--steps 1000] [--runs 3] [--build-dir build] [--json FILE]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

TARGET_RATIO = 1.25


def make_plan(steps, check_file):
    lines = ["version: 1", "name: throughput", "steps:"]
    for i in range(steps):
        lines += [f"  - id: s{i}", "    run: [/bin/true]", "    verify:",
                  f"      - file: {check_file}"]
    return "\n".join(lines) + "\n"


def daemon_run(deployd, deployctl, steps, tmp_root, keep):
    with benchlib.Daemon(deployd, tmp_root, keep=keep) as d:
        plan_path = os.path.join(d.work, "throughput.yaml")
        with open(plan_path, "w") as f:
            f.write(make_plan(steps, "/bin/true"))
        env = dict(os.environ, DEPLOYD_SOCKET=d.socket_path)
        t0 = time.perf_counter()
        p = subprocess.run([deployctl, "apply", plan_path, "--wait"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"deployctl apply --wait exited {p.returncode}:\n{p.stderr}\n"
                             f"{p.stdout[-2000:]}\n(daemon log: {d.log_path})")
        run_id = p.stdout.splitlines()[0].strip()
        st = subprocess.run([deployctl, "status", run_id, "--json"], env=env, check=True,
                            stdout=subprocess.PIPE, text=True)
        run = json.loads(st.stdout)
        events = d.events(run_id)
        cpu_self, cpu_children = d.cpu_seconds()
    step_events = [e for e in events if e["step_id"]]
    phases = phase_medians(events)
    run_events = [e for e in events if not e["step_id"]]
    created, finished = run["created_at_ms"], run["finished_at_ms"]
    durations = [s["finished_at_ms"] - s["started_at_ms"] for s in run["steps"]]
    starts = [s["started_at_ms"] for s in run["steps"]]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    return {
        "run": run_id,
        "state": run["state"],
        "wall_s": wall,
        "wall_per_step_ms": wall * 1000 / steps,
        "recorded_s": (finished - created) / 1000,
        "recorded_per_step_ms": (finished - created) / steps,
        "step_duration_median_ms": benchlib.median(durations),
        "step_start_gap_median_ms": benchlib.median(gaps) if gaps else 0,
        "phase_median_ms": phases,
        "cpu_per_step_ms": (cpu_self + cpu_children) * 1000 / steps,
        "cpu_daemon_per_step_ms": cpu_self * 1000 / steps,
        "events": len(events),
        "step_events": len(step_events),
        "run_events": len(run_events),
    }


def phase_medians(events):
    """Median ms between consecutive events, by (from state, to state): where a step's time goes.

    at_ms is stamped just before each commit, so "running -> verifying" is the running commit +
    spawn + exit, "verifying -> succeeded" the verifying commit + the check, and
    "succeeded -> running" the succeeded commit + starting the next step."""
    gaps = {}
    for a, b in zip(events, events[1:]):
        key = f"{a['state']} -> {b['state']}"
        gaps.setdefault(key, []).append(b["at_ms"] - a["at_ms"])
    return {k: benchlib.median(v) for k, v in gaps.items() if len(v) > 2}


def floor_run(floor, steps, per_step, extra, tmp_root, supervisor=None):
    with tempfile.TemporaryDirectory(prefix="deployd-bench-floor-", dir=tmp_root) as work:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = [floor, "--db", os.path.join(work, "floor.db"), "--steps", str(steps),
                "--commits-per-step", str(per_step), "--extra-commits", str(extra)]
        if supervisor:
            argv += ["--supervisor", supervisor]
        p = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = json.loads(p.stdout)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        result["cpu_per_step_ms"] = cpu * 1000 / steps
        return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3, help="daemon runs and floor runs (each)")
    ap.add_argument("--build-dir", default=None, help="default: <source>/build")
    ap.add_argument("--tmp", default="/tmp", help="where temp dirs go (default /tmp)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--keep", action="store_true", help="keep the daemon's temp dirs")
    args = ap.parse_args()

    deployd = benchlib.find_binary("deployd", "DEPLOYD_BIN", args.build_dir)
    deployctl = benchlib.find_binary("deployctl", "DEPLOYCTL_BIN", args.build_dir)
    floor = benchlib.find_binary("deployd_bench_floor", "DEPLOYD_BENCH_FLOOR_BIN", args.build_dir)
    # The supervisor deployd starts for every attempt: deployd-supervise beside it, else itself.
    supervisor = os.path.join(os.path.dirname(deployd), "deployd-supervise")
    if not os.access(supervisor, os.X_OK):
        supervisor = deployd

    print(f"throughput: {args.steps} steps of run: [/bin/true] + verify file:, "
          f"{args.runs} runs each; load average {benchlib.load_average()}", flush=True)
    daemon_results, floor_results, supervised_results = [], [], []
    for i in range(args.runs):
        r = daemon_run(deployd, deployctl, args.steps, args.tmp, args.keep)
        daemon_results.append(r)
        print(f"  daemon {i + 1}: {r['wall_s']:.2f}s wall = {r['wall_per_step_ms']:.2f} ms/step; "
              f"recorded {r['recorded_per_step_ms']:.2f} ms/step; step median "
              f"{r['step_duration_median_ms']} ms; CPU {r['cpu_per_step_ms']:.2f} ms/step "
              f"(daemon {r['cpu_daemon_per_step_ms']:.2f}); {r['events']} events "
              f"({r['step_events']} step + {r['run_events']} run)", flush=True)
        print("           phase medians (ms): " + ", ".join(
            f"{k} {v:g}" for k, v in r["phase_median_ms"].items()), flush=True)
        if r["step_events"] % args.steps:
            print(f"  note: {r['step_events']} step events is not a multiple of {args.steps}")
        per_step = round(r["step_events"] / args.steps)
        f = floor_run(floor, args.steps, per_step, r["run_events"], args.tmp)
        floor_results.append(f)
        s = floor_run(floor, args.steps, per_step, r["run_events"], args.tmp, supervisor)
        supervised_results.append(s)
        for name, x in (("floor ", f), ("floor+supervisor", s)):
            print(f"  {name} {i + 1}: {x['total_s']:.2f}s = {x['per_step_ms']:.2f} ms/step "
                  f"(CPU {x['cpu_per_step_ms']:.2f} ms/step; {x['commits']} commits; "
                  f"spawn median {x['spawn_median_ms']:.2f} ms, "
                  f"commit median {x['commit_median_ms']:.2f} ms)", flush=True)

    d_wall = benchlib.median([r["wall_per_step_ms"] for r in daemon_results])
    d_rec = benchlib.median([r["recorded_per_step_ms"] for r in daemon_results])
    fl = benchlib.median([f["per_step_ms"] for f in floor_results])
    ratio = d_wall / fl
    pair_ratios = [r["wall_per_step_ms"] / f["per_step_ms"]
                   for r, f in zip(daemon_results, floor_results)]
    d_cpu = benchlib.median([r["cpu_per_step_ms"] for r in daemon_results])
    f_cpu = benchlib.median([f["cpu_per_step_ms"] for f in floor_results])
    sv = benchlib.median([x["per_step_ms"] for x in supervised_results])
    sv_cpu = benchlib.median([x["cpu_per_step_ms"] for x in supervised_results])
    summary = {
        "steps": args.steps,
        "runs": args.runs,
        "load_average_end": benchlib.load_average(),
        "daemon_per_step_ms_wall_median": round(d_wall, 3),
        "daemon_per_step_ms_recorded_median": round(d_rec, 3),
        "floor_per_step_ms_median": round(fl, 3),
        "ratio_wall": round(ratio, 3),
        "daemon_cpu_per_step_ms_median": round(d_cpu, 3),
        "floor_cpu_per_step_ms_median": round(f_cpu, 3),
        "ratio_recorded": round(d_rec / fl, 3),
        "floor_supervised_per_step_ms_median": round(sv, 3),
        "floor_supervised_cpu_per_step_ms_median": round(sv_cpu, 3),
        "ratio_wall_supervised": round(d_wall / sv, 3),
        "ratio_per_pair": [round(x, 3) for x in pair_ratios],
        "target_ratio": TARGET_RATIO,
        "events_per_step": daemon_results[0]["step_events"] / args.steps,
        "daemon": daemon_results,
        "floor": floor_results,
        "floor_supervised": supervised_results,
    }
    print(f"daemon per step: {d_wall:.2f} ms wall (median of {args.runs}), "
          f"{d_rec:.2f} ms from created/finished_at_ms")
    print(f"floor  per step: {fl:.2f} ms (median of {args.runs})")
    print(f"ratio: {ratio:.2f}x wall, {d_rec / fl:.2f}x recorded (target <= {TARGET_RATIO}x): "
          f"{'OK' if ratio <= TARGET_RATIO else 'ABOVE TARGET'}")
    print("ratio of each daemon run to the floor run right after it: " +
          ", ".join(f"{x:.2f}" for x in pair_ratios) +
          f" (median {benchlib.median(pair_ratios):.2f})")
    print(f"CPU per step (user+sys, with children): daemon {d_cpu:.2f} ms, floor {f_cpu:.2f} ms "
          f"(+{d_cpu - f_cpu:.2f} ms)")
    print(f"floor with every action under its supervisor: {sv:.2f} ms/step (CPU {sv_cpu:.2f} ms); "
          f"daemon / that floor: {d_wall / sv:.2f}x wall")
    print(f"load average at end: {summary['load_average_end']}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
