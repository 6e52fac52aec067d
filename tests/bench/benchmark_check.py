#!/usr/bin/env python3
"""What the `benchmark` check measures of a known rate, and what measuring costs deployd.

A streaming server (tests/demo/completion_stream.py, in a process of its own) answers at a set
rate per request; a real deployd runs a plan whose one step verifies with a `benchmark` of it.

  accuracy: for each (rate, concurrency), the tokens/s deployd measured against the rate the
            server streams (rate x concurrency in all), over --runs runs: the median error
  cost:     the server streams as fast as it can (no pacing); deployd's CPU time (user+sys,
            from /proc) over the number of chunks it read: the cost of one streamed token on
            the daemon's thread, and the highest rate this machine let it measure

Usage: benchmark_check.py [--build-dir DIR] [--runs N] [--json FILE]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import benchlib

SERVER = r"""
import http.server, json, sys
sys.path.insert(0, sys.argv[2])
from completion_stream import stream_completion
rate = float(sys.argv[3])
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        stream_completion(self, request, "bench", "Paris is the capital of France.", rate)
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # socketserver's 5 would drop the SYNs of 8 connections at once
server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

PLAN = """version: 1
name: bench-%(name)s
steps:
  - id: measure
    run: "true"
    verify:
      - benchmark:
          url: http://127.0.0.1:%(port)d
          model: bench
          prompt_tokens: 32
          max_tokens: %(max_tokens)d
          requests: %(requests)d
          concurrency: %(concurrency)d
        timeout: 10m
"""


def start_server(rate):
    proc = subprocess.Popen([sys.executable, "-c", SERVER, "server",
                             os.path.join(benchlib.SOURCE_DIR, "tests", "demo"), str(rate)],
                            stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def run_benchmark(daemon, deployctl, name, port, max_tokens, requests, concurrency):
    plan = os.path.join(daemon.work, name + ".yaml")
    with open(plan, "w") as f:
        f.write(PLAN % {"name": name, "port": port, "max_tokens": max_tokens,
                        "requests": requests, "concurrency": concurrency})
    env = dict(os.environ, DEPLOYD_SOCKET=daemon.socket_path)
    cp = subprocess.run([deployctl, "apply", plan, "--wait"], env=env, capture_output=True,
                        text=True, timeout=900)
    run = cp.stdout.splitlines()[0]
    status = json.loads(subprocess.run([deployctl, "status", run, "--json"], env=env,
                                       capture_output=True, text=True).stdout)
    step = status["steps"][0]
    if step["state"] != "succeeded":
        raise SystemExit("%s: %s" % (run, step["reason"]))
    return step["evidence"]["benchmark"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    deployd = benchlib.find_binary("deployd", "DEPLOYD_BIN", args.build_dir)
    deployctl = benchlib.find_binary("deployctl", "DEPLOYCTL_BIN", args.build_dir)
    report = {"load_average_before": benchlib.load_average(), "accuracy": [], "cost": {}}
    with benchlib.Daemon(deployd) as daemon:
        for rate, concurrency in ((50, 1), (50, 4), (200, 1), (200, 8)):
            server, port = start_server(rate)
            try:
                errors, measured = [], []
                for i in range(args.runs):
                    f = run_benchmark(daemon, deployctl, "r%dc%di%d" % (rate, concurrency, i), port,
                                      max_tokens=int(rate * 2), requests=2 * concurrency,
                                      concurrency=concurrency)
                    expected = rate * concurrency
                    measured.append(f["tokens_per_s"])
                    errors.append((f["tokens_per_s"] - expected) / expected * 100)
            finally:
                server.kill()
                server.wait()
            row = {"rate": rate, "concurrency": concurrency, "expected": rate * concurrency,
                   "measured": measured, "median_error_percent": round(benchlib.median(errors), 2)}
            report["accuracy"].append(row)
            print("%4d tokens/s x %d: measured %s tokens/s, median error %+.2f%%"
                  % (rate, concurrency, ", ".join("%.1f" % m for m in measured),
                     row["median_error_percent"]), flush=True)

        server, port = start_server(1e9)
        try:
            before, _ = daemon.cpu_seconds()
            started = time.monotonic()
            f = run_benchmark(daemon, deployctl, "cost", port, max_tokens=5000, requests=8,
                              concurrency=4)
            wall = time.monotonic() - started
            after, _ = daemon.cpu_seconds()
        finally:
            server.kill()
            server.wait()
        cpu = after - before
        report["cost"] = {"chunks": f["output_tokens"], "tokens_per_s": f["tokens_per_s"],
                          "deployd_cpu_s": round(cpu, 3), "wall_s": round(wall, 2),
                          "cpu_us_per_chunk": round(cpu / f["output_tokens"] * 1e6, 2)}
        print("unpaced: %d chunks at %.0f tokens/s; deployd used %.2f s of CPU in %.1f s: %.1f us "
              "a chunk" % (f["output_tokens"], f["tokens_per_s"], cpu, wall,
                           report["cost"]["cpu_us_per_chunk"]))
    report["load_average_after"] = benchlib.load_average()
    print("load average before %s, after %s" % (report["load_average_before"],
                                               report["load_average_after"]))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
