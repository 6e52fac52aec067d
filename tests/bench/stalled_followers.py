#!/usr/bin/env python3
"""Stalled followers: what clients that stop reading cost the daemon.

Five clients connect to a real deployd and ask for a stream — three `logs RUN STEP -f` of the
step below, two `follow RUN` — and never read a byte (their receive buffers are made small, so
that they fall behind at once). Then the step prints `--size` of output (100 MB by default): a
`[N/M]` progress line at the start of every line and `watch.progress` on the step, so that the
`follow` streams carry a progress line for each of them. The script reads deployd's VmHWM (peak
resident memory) and VmRSS from /proc/PID/status before the followers connect, when the step
has finished (the followers still connected and not reading), and after they have gone.

Usage (from the source tree, after building):
  python3 tests/bench/stalled_followers.py [--size 100000000] [--build-dir DIR] [--json FILE]
Target: peak RSS under 64 MB.
"""

import argparse
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from harness import Daemon, wait_until  # noqa: E402

PLAN = """\
version: 1
name: chatty
steps:
  - id: print
    run: ['python3', '-c', '{script}', '{size}']
    watch:
      progress: {{stall_after: 10m}}
"""

# Prints SIZE bytes of lines that each carry a progress count, after reading the gate.
PRINTER = ("import sys; open(sys.argv[2]).read(); n = int(sys.argv[1]) // 100; "
           "out = sys.stdout.buffer; "
           "[out.write(b'[%09d/%09d] ' % (i, n) + b'x' * 76 + b'\\n') for i in range(n)]")


def memory(pid):
    """(VmHWM, VmRSS) of `pid`, in bytes."""
    values = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0]) * 1024
    return values["VmHWM"], values["VmRSS"]


def stalled(socket_path, request):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(socket_path)
    s.sendall((json.dumps(dict(request, v=1)) + "\n").encode())
    return s


def mib(n):
    return "%.1f MiB" % (n / (1 << 20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000_000, help="bytes the step prints")
    parser.add_argument("--build-dir", help="where bin/deployd and bin/deployctl are")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    if args.build_dir:
        os.environ["DEPLOYD_BIN"] = os.path.join(args.build_dir, "bin", "deployd")
        os.environ["DEPLOYCTL_BIN"] = os.path.join(args.build_dir, "bin", "deployctl")
        import harness
        harness.DEPLOYD_BIN = os.environ["DEPLOYD_BIN"]
        harness.DEPLOYCTL_BIN = os.environ["DEPLOYCTL_BIN"]

    d = Daemon()
    try:
        d.start()
        gate = d.path("gate")
        os.mkfifo(gate)
        plan = d.write_plan("chatty.yaml", PLAN.format(script=PRINTER.replace("'", "''"),
                                                      size=args.size))
        # The gate is the printer's second argument.
        with open(plan.path) as f:
            text = f.read().replace("'%d']" % args.size, "'%d', '%s']" % (args.size, gate))
        with open(plan.path, "w") as f:
            f.write(text)
        run, _ = d.apply(plan, wait=False, check=0)
        d.wait_step(run, "print", ("running",))
        time.sleep(0.5)  # the step's supervisor and python are up; the daemon is idle
        pid = d.proc.pid
        before = memory(pid)
        clients = [stalled(d.socket, {"op": "logs", "run": run, "step": "print", "follow": True})
                   for _ in range(3)]
        clients += [stalled(d.socket, {"op": "follow", "run": run}) for _ in range(2)]
        time.sleep(0.5)
        start = time.monotonic()
        with open(gate, "w") as g:
            g.write("go\n")
        status = d.wait_run(run, timeout=1800)
        took = time.monotonic() - start
        during = memory(pid)
        for c in clients:
            c.close()
        time.sleep(1)
        after = memory(pid)
        result = {
            "deployd": os.environ.get("DEPLOYD_BIN", ""),
            "size_bytes": args.size,
            "state": status["state"],
            "step_seconds": round(took, 1),
            "rss_before": before[1],
            "peak_rss": during[0],
            "rss_with_stalled_followers": during[1],
            "rss_after_they_left": after[1],
            "load_average": "%.2f %.2f %.2f" % os.getloadavg(),
        }
        print("run %s %s; %d bytes printed in %.1f s" % (run, status["state"], args.size, took))
        print("deployd RSS before the followers: %s" % mib(before[1]))
        print("peak RSS (VmHWM):                 %s" % mib(during[0]))
        print("RSS, 5 stalled followers:         %s" % mib(during[1]))
        print("RSS after they left:              %s" % mib(after[1]))
        print("load average: %s" % result["load_average"])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return 0 if during[0] < 64 << 20 else 1
    finally:
        d.cleanup()


if __name__ == "__main__":
    sys.exit(main())
