#!/usr/bin/env python3
"""What hostile plans and lines cost: `deployctl validate` on plans built to exhaust the parser,
the daemon's answers while it parses large plans, and a 64 KiB output line through fail_on.

  validate   wall time, CPU and peak memory of `deployctl validate` on each plan below, its exit
             status and the size of what it printed (each run under a 2 GiB address-space limit
             and a 120 s timeout, so that a parser that never stops is reported, not waited on):
               comma          the one-byte plan ","
               steps-10000    10,000 steps of run + timeout + an http verify check (1.6 MB)
               undefined-80k  an 80 KB plan full of undefined variable references (4,200 in
                              210 steps) and 1,000 variables
               oneline-44k    a 44 KB plan on one line with 4,400 unknown keys
               keys-40000     one map of 40,000 keys
               steps-1000     the largest plans within the limits: 1,000 such steps (268 KB),
               vars-24990     one map of 24,990 variables (50,000 nodes),
               fail-on-1000   1,000 steps with `fail_on: [vllm, hf, '(?i)error.*cuda']`
  responsive the latency of `ping` (every 10 ms, on its own connection) while another client
             sends `plan` requests of one large plan back to back; and the time of one `plan`
  long-line  a step printing 1,000 lines of 64,000 bytes ("Model architectures [xxx…", which
             the vllm set's `Model architectures \[.*\] …` starts matching and never ends),
             with `fail_on: ['(?i)error.*cuda', vllm]` and without: the daemon's CPU time for
             each, and the difference per line

Usage: tests/bench/plan_parsing.py [--build-dir build] [--only validate,responsive,long-line]
                                   [--json FILE]
Python standard library only. Run it with the build of another commit (--build-dir) for the
"before" figures.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import Daemon, LineConn, find_binary, load_average, median, quantile

STEP = """\
  - id: step-{i}
    run: echo {i} ${{port}}
    timeout: 10s
    verify:
      - http: {{url: 'http://127.0.0.1:${{port}}/health', status: 200}}
        within: 5s
"""


def plans():
    """name → plan text."""
    head = "version: 1\nname: big\nvars:\n  port: '8000'\nsteps:\n"
    out = {"comma": ","}
    out["steps-10000"] = head + "".join(STEP.format(i=i) for i in range(10000))
    variables = "".join("  variable_%d: x\n" % i for i in range(1000))
    steps = "".join("  - id: s%d\n    run: echo %s\n" % (
        i, " ".join("${undefined_%d}" % (i * 20 + k) for k in range(20))) for i in range(210))
    out["undefined-80k"] = "version: 1\nname: t\nvars:\n" + variables + "steps:\n" + steps
    out["oneline-44k"] = ("{version: 1, name: t, steps: [{id: a, run: b}], " +
                          ", ".join("k%d: %d" % (i, i) for i in range(4400)) + "}\n")
    out["keys-40000"] = ("version: 1\nname: t\nsteps: [{id: a, run: b}]\nvars:\n" +
                         "".join("  v%d: x\n" % i for i in range(40000)))
    out["steps-1000"] = head + "".join(STEP.format(i=i) for i in range(1000))
    out["vars-24990"] = ("version: 1\nname: t\nsteps: [{id: a, run: b}]\nvars:\n" +
                         "".join("  v%d: x\n" % i for i in range(24990)))
    out["fail-on-1000"] = "version: 1\nname: t\nsteps:\n" + "".join(
        "  - id: s%d\n    run: echo %d\n    watch:\n      fail_on: [vllm, hf, '(?i)error.*cuda']\n"
        % (i, i) for i in range(1000))
    return out


def limit_child():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_measured(argv, timeout=120):
    """(exit status or 'timeout', wall s, CPU s, peak RSS MiB, bytes printed)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                preexec_fn=limit_child)
        deadline = start + timeout
        status = None
        while status is None:
            pid, raw, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(raw)
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, raw, usage = os.wait4(proc.pid, 0)
                status = "timeout"
                break
            time.sleep(0.005)
        wall = time.monotonic() - start
        printed = out.tell()
    return status, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, printed


def bench_validate(deployctl, results):
    print("validate (deployctl, offline)")
    print("  %-14s %9s %8s %8s %9s %10s" % ("plan", "size", "wall s", "CPU s", "peak MiB",
                                            "printed"))
    with tempfile.TemporaryDirectory(prefix="deployd-bench-plans-") as d:
        for name, text in plans().items():
            path = os.path.join(d, name + ".yaml")
            with open(path, "w") as f:
                f.write(text)
            status, wall, cpu, rss, printed = run_measured([deployctl, "validate", path])
            results[name] = {"bytes": len(text), "status": status, "wall_s": wall, "cpu_s": cpu,
                             "peak_mib": rss, "printed_bytes": printed}
            print("  %-14s %9d %8.3f %8.3f %9.1f %10d  exit %s" % (
                name, len(text), wall, cpu, rss, printed, status))


def bench_responsive(deployd, results, seconds=8):
    print("responsive (deployd: ping every 10 ms while another client sends `plan` requests)")
    texts = plans()
    for name in ("vars-24990", "steps-1000"):
        text = texts[name]
        with Daemon(deployd) as daemon:
            stop = threading.Event()
            plan_times = []

            def planner():
                with daemon.connect() as s:
                    conn = LineConn(s)
                    while not stop.is_set():
                        t0 = time.monotonic()
                        conn.send({"op": "plan", "plan_text": text, "plan_file": name})
                        conn.receive()
                        plan_times.append(time.monotonic() - t0)

            pings = []
            with daemon.connect() as s:
                conn = LineConn(s)
                worker = threading.Thread(target=planner)
                worker.start()
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    t0 = time.monotonic()
                    conn.send({"op": "ping"})
                    conn.receive()
                    pings.append((time.monotonic() - t0) * 1000)
                    time.sleep(0.01)
                stop.set()
                worker.join()
            cpu, _ = daemon.cpu_seconds()
        results["responsive-" + name] = {
            "pings": len(pings), "ping_ms_median": median(pings), "ping_ms_p99": quantile(pings, 0.99),
            "ping_ms_max": max(pings), "plans": len(plan_times),
            "plan_s_median": median(plan_times) if plan_times else None, "daemon_cpu_s": cpu}
        print("  %-12s ping median %.2f ms, p99 %.1f ms, max %.1f ms (%d pings); "
              "`plan` %s s (median of %d)" % (
                  name, median(pings), quantile(pings, 0.99), max(pings), len(pings),
                  "%.3f" % median(plan_times) if plan_times else "-", len(plan_times)))


LONG_LINES = """\
version: 1
name: long-lines
steps:
  - id: print
    run: python3 -c "import sys; [sys.stdout.write('Model architectures [' + 'x' * 63979 + chr(10)) for _ in range(1000)]"
%s"""


def bench_long_line(deployd, results, runs=3):
    print("long-line (1,000 lines of 64,000 bytes through one step)")
    watch = "    watch:\n      fail_on: ['(?i)error.*cuda', vllm]\n"
    for label, extra in (("without fail_on", ""), ("with fail_on", watch)):
        cpus = []
        for _ in range(runs):
            with Daemon(deployd) as daemon:
                before, _ = daemon.cpu_seconds()
                answer = daemon.request({"op": "apply", "plan_text": LONG_LINES % extra,
                                         "plan_file": "long.yaml"})
                if not answer.get("ok"):
                    raise SystemExit("apply refused: %s" % answer)
                run = answer["run"]
                deadline = time.monotonic() + 120
                state = ""
                while time.monotonic() < deadline:
                    if daemon.proc.poll() is not None:
                        state = "deployd died (exit %s)" % daemon.proc.returncode
                        break
                    try:
                        state = daemon.request({"op": "status", "run": run})["run"]["state"]
                    except OSError:
                        continue  # the daemon is going: the next round says how
                    if state in ("succeeded", "failed", "cancelled"):
                        break
                    time.sleep(0.1)
                if daemon.proc.poll() is not None:
                    print("  %-16s %s" % (label, state))
                    results["long-line " + label] = state
                    return
                cpu, _ = daemon.cpu_seconds()
                cpus.append(cpu - before)
        results["long-line " + label] = {"daemon_cpu_s": median(cpus), "state": state}
        print("  %-16s daemon CPU %.3f s (median of %d), run %s" % (label, median(cpus), runs,
                                                                     state))
    a = results["long-line without fail_on"]["daemon_cpu_s"]
    b = results["long-line with fail_on"]["daemon_cpu_s"]
    print("  fail_on costs %.1f µs a 64,000-byte line" % ((b - a) / 1000 * 1e6))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir")
    parser.add_argument("--only", default="validate,responsive,long-line")
    parser.add_argument("--json")
    args = parser.parse_args()
    deployd = find_binary("deployd", "DEPLOYD_BIN", args.build_dir)
    deployctl = find_binary("deployctl", "DEPLOYCTL_BIN", args.build_dir)
    print("load average %s" % load_average())
    results = {}
    only = args.only.split(",")
    if "validate" in only:
        bench_validate(deployctl, results)
    if "responsive" in only:
        bench_responsive(deployd, results)
    if "long-line" in only:
        bench_long_line(deployd, results)
    print("load average %s" % load_average())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
