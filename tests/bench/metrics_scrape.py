#!/usr/bin/env python3
"""What a scrape of deployd's metrics costs as its history grows: the `metrics` request (the
same rendering as the textfile and /metrics) against state databases of 100 to 100,000 finished
runs, to show that a scrape reads the counts the triggers keep, not the runs.

For each size the script starts the real deployd once (it makes the database, schema version 6),
stops it, and fills the database the way deployd would: each run and step inserted unfinished,
then updated to its end, so that the schema's triggers count them (4 steps a run over 10 plans,
one run in 5 failing its last step, a benchmark step's figures in every run; 10 events a run).
Then it starts deployd on it and times `scrapes` metrics requests over the socket, with the
daemon's CPU for them, and, for comparison, what the same aggregates would cost read from the
runs and steps themselves (plain sqlite3 in this process).

    python3 tests/bench/metrics_scrape.py [--runs 100 10000 100000] [--scrapes 30]
"""

import argparse
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

PLANS = 10
STEPS = ("stop", "download", "launch", "bench")
EVIDENCE = json.dumps({"benchmark": {"tokens_per_s": 57.8, "ttft_p50_ms": 182, "ttft_p95_ms": 240,
                                     "itl_p50_ms": 17.1, "itl_p95_ms": 18.0, "requests": 8}})


def fill(db_path, runs):
    db = sqlite3.connect(db_path)
    db.execute("BEGIN")
    t0 = 1_700_000_000_000
    for seq in range(1, runs + 1):
        plan = "plan%d" % (seq % PLANS)
        run = "%s-%d" % (plan, seq)
        at = t0 + seq * 60_000
        failed = seq % 5 == 0
        db.execute("INSERT INTO runs (id, seq, plan_name, plan_file, plan_text, vars, state, "
                   "created_at_ms, finished_at_ms, reason, evidence) VALUES "
                   "(?, ?, ?, 'p.yaml', 'version: 1', '{}', 'running', ?, 0, '', '')",
                   (run, seq, plan, at))
        for idx, step in enumerate(STEPS):
            db.execute("INSERT INTO steps (run_id, idx, id, phase, state, attempts, started_at_ms, "
                       "finished_at_ms, exit_status, pid, reason, evidence) VALUES "
                       "(?, ?, ?, 'main', 'running', 1, ?, 0, NULL, NULL, '', '')",
                       (run, idx, step, at + idx * 1000))
            bad = failed and step == "bench"
            db.execute("UPDATE steps SET state = ?, finished_at_ms = ?, exit_status = ?, "
                       "reason = ?, evidence = ? WHERE run_id = ? AND idx = ?",
                       ("failed" if bad else "succeeded", at + idx * 1000 + 37 * idx ** 3,
                        1 if bad else 0, "exit status 1" if bad else "",
                        "" if bad or step != "bench" else EVIDENCE, run, idx))
        for n in range(1, 11):
            db.execute("INSERT INTO events VALUES (?, ?, ?, '', 'step.state', 'running', '')",
                       (run, n, at + n))
        db.execute("UPDATE runs SET state = ?, finished_at_ms = ? WHERE id = ?",
                   ("failed" if failed else "succeeded", at + 9000, run))
    db.commit()
    db.close()


def scan(db_path):
    """The same counts read from the runs and steps themselves: seconds."""
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    t = time.perf_counter()
    db.execute("SELECT plan_name, state, COUNT(*), MAX(finished_at_ms) FROM runs "
               "GROUP BY plan_name, state").fetchall()
    db.execute("SELECT r.plan_name, s.id, s.state, COUNT(*), SUM(s.finished_at_ms - "
               "s.started_at_ms) FROM steps s JOIN runs r ON r.id = s.run_id "
               "GROUP BY 1, 2, 3").fetchall()
    elapsed = time.perf_counter() - t
    db.close()
    return elapsed


def measure(deployd, runs, scrapes, tmp):
    with benchlib.Daemon(deployd, tmp_root=tmp) as d:
        d.stop()
        t = time.perf_counter()
        fill(d.db_path, runs)
        filled = time.perf_counter() - t
        d.start()
        answer = d.request({"op": "metrics"})
        assert answer.get("ok"), answer
        samples = sum(len(f["samples"]) for f in answer["metrics"])
        cpu0 = d.cpu_seconds()[0]
        times = []
        for _ in range(scrapes):
            t = time.perf_counter()
            d.request({"op": "metrics"})
            times.append(time.perf_counter() - t)
        cpu = (d.cpu_seconds()[0] - cpu0) / scrapes
        size = sum(os.path.getsize(p) for p in (d.db_path, d.db_path + "-wal")
                   if os.path.exists(p))
        return {"runs": runs, "db_mib": size / 2**20, "fill_s": filled, "samples": samples,
                "median_ms": benchlib.median(times) * 1000,
                "p90_ms": benchlib.quantile(times, 0.9) * 1000, "cpu_ms": cpu * 1000,
                "scan_ms": scan(d.db_path) * 1000}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir")
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--tmp", default="/tmp")
    args = parser.parse_args()
    deployd = benchlib.find_binary("deployd", "DEPLOYD_BIN", args.build_dir)
    print("load before: %s" % benchlib.load_average())
    print("%8s %8s %8s %8s %10s %8s %8s %10s" % ("runs", "db MiB", "fill s", "samples",
                                                 "median ms", "p90 ms", "cpu ms", "scan ms"))
    for runs in args.runs:
        r = measure(deployd, runs, args.scrapes, args.tmp)
        print("%8d %8.1f %8.1f %8d %10.2f %8.2f %8.2f %10.1f" % (
            r["runs"], r["db_mib"], r["fill_s"], r["samples"], r["median_ms"], r["p90_ms"],
            r["cpu_ms"], r["scan_ms"]))
        sys.stdout.flush()
    print("load after: %s" % benchlib.load_average())


if __name__ == "__main__":
    main()
