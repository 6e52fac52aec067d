"""The `follow` and `logs -f` streams through the real deployd: live events carry the seq and
the time the store gave them, and a client that stops reading is held to a byte budget — it is
told what it missed once it reads again — while the other clients of the same run get
everything."""

import json
import os
import signal
import socket
import subprocess
import threading
import unittest

from harness import DEPLOYCTL_BIN, DaemonTestCase, read_line, wait_until


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def request(op, **fields):
    return (json.dumps(dict({"v": 1, "op": op}, **fields)) + "\n").encode()


def read_lines_until_end(sock, buffer=b""):
    """Every line of a stream up to and including its "end" line, decoded."""
    lines = []
    while True:
        line, buffer = read_line(sock, buffer)
        if line is None:
            raise AssertionError("the stream ended without an end line after %r" % lines[-3:])
        obj = json.loads(line)
        lines.append(obj)
        if obj.get("type") == "end":
            return lines


class LiveEventsTest(DaemonTestCase):
    def test_live_follow_events_carry_the_committed_seq_and_time(self):
        plan = self.d.write_plan("live.yaml", """\
version: 1
name: live
steps:
  - id: first
    run: 'read line < @DIR@/gate'
  - id: second
    run: 'true'
""")
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "first", ("running",))
        with self.d.raw_connect(timeout=60) as s:
            s.sendall(request("follow", run=run))
            buffer = b""
            past = []
            # The snapshot and the events recorded so far, then the live ones.
            while len(past) < 1 + len(self.d.events(run)):
                line, buffer = read_line(s, buffer)
                past.append(json.loads(line))
            with open(plan.file("gate"), "w") as gate:
                gate.write("go\n")
            live = [l for l in read_lines_until_end(s, buffer) if l.get("type") == "event"]
        self.assertTrue(live, "no live event came")
        stored = {e["seq"]: e for e in self.d.events(run)}
        for event in live:
            self.assertIn(event["seq"], stored, event)
            row = stored[event["seq"]]
            self.assertEqual((event["kind"], event["state"], event["step"], event["at_ms"]),
                             (row["kind"], row["state"], row["step_id"], row["at_ms"]), event)
        seqs = [e["seq"] for e in past if e.get("type") == "event"] + [e["seq"] for e in live]
        self.assertEqual(seqs, list(range(1, len(stored) + 1)))


class Reader(threading.Thread):
    """A client that reads a stream as fast as it comes, until its end line."""

    def __init__(self, daemon, op, **fields):
        super().__init__(daemon=True)
        self.sock = daemon.raw_connect(timeout=120)
        self.sock.sendall(request(op, **fields))
        self.first = threading.Event()
        self.lines = None
        self.start()

    def started(self):
        """The stream's first line has come: it follows from here on."""
        return self.first.is_set()

    def run(self):
        try:
            line, rest = read_line(self.sock)
            self.first.set()
            self.lines = [json.loads(line)] + read_lines_until_end(self.sock, rest)
        finally:
            self.sock.close()


def stalled(daemon, op, **fields):
    """A client that asks for a stream and does not read it (a small receive buffer, so that it
    falls behind soon)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(120)
    s.connect(daemon.socket)
    s.sendall(request(op, **fields))
    return s


class StalledFollowerTest(DaemonTestCase):
    # Once the gate opens, each approval step waits with a 50,000-character message, which its
    # two events (the step waiting, the run waiting) carry: some 1.6 MB of events in all, far past
    # a follower's budget and the socket's buffers. The test approves each in turn.
    FLOOD = """\
version: 1
name: flood
steps:
  - id: gate
    run: 'read line < @DIR@/gate'
%s
"""
    APPROVAL = """\
  - id: check-%d
    approval: '%s'
"""
    APPROVALS = 16  # the plan stays under the 1 MiB a plan may hold

    def flood_run(self):
        plan = self.d.write_plan("flood.yaml", self.FLOOD % "".join(
            self.APPROVAL % (i, str(i % 10) * 50000) for i in range(self.APPROVALS)))
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "gate", ("running",))
        return plan, run

    def approve_all(self, run):
        for i in range(self.APPROVALS):
            self.d.wait_step(run, "check-%d" % i, ("waiting",))
            self.d.ctl("approve", run, "check-%d" % i, check=0)

    def test_a_follower_that_stops_reading_is_told_what_it_missed_and_others_get_everything(self):
        plan, run = self.flood_run()
        stuck = stalled(self.d, "follow", run=run)
        reader = Reader(self.d, "follow", run=run)
        watch, watched = self.deployctl("watch.out", "watch", run)
        wait_until(lambda: "following run" in read(watched) and reader.started(),
                   message="the clients to follow the run")
        os.kill(watch.pid, signal.SIGSTOP)
        with open(plan.file("gate"), "w") as gate:
            gate.write("go\n")
        self.approve_all(run)
        status = self.d.wait_run(run, timeout=120)
        self.assertEqual(status["state"], "succeeded", status)
        # The client that read had everything, while the others did not read at all.
        reader.join(60)
        self.assertIsNotNone(reader.lines, "the reading client did not get to the end")
        self.assertEqual([l["type"] for l in reader.lines if l.get("type") == "missed"], [])
        stored = self.d.events(run)
        self.assertEqual([l["seq"] for l in reader.lines if l.get("type") == "event"],
                         [e["seq"] for e in stored])

        # The stalled client reads now: where it fell behind, the count, then the run as it is.
        with stuck:
            lines = read_lines_until_end(stuck)
        missed = [i for i, l in enumerate(lines) if l.get("type") == "missed"]
        self.assertTrue(missed, "no missed notice: %s" % [l.get("type") for l in lines])
        notice = lines[missed[0]]
        self.assertGreater(notice["events"], 0, notice)
        self.assertLessEqual(notice["first_seq"], notice["last_seq"])
        # The run as it is now: a fresh snapshot, or the end line when the run has ended.
        self.assertIn(lines[missed[0] + 1]["type"], ("snapshot", "end"))
        got = [l["seq"] for l in lines if l.get("type") == "event"]
        dropped = sum(l["events"] for l in lines if l.get("type") == "missed")
        self.assertEqual(len(got) + dropped, len(stored))
        self.assertEqual(lines[-1]["run"]["state"], "succeeded")

        os.kill(watch.pid, signal.SIGCONT)
        self.assertEqual(watch.wait(60), 0)
        notices = [l for l in read(watched).splitlines() if l.startswith("(missed ")]
        self.assertTrue(notices, "deployctl watch showed no notice")
        self.assertRegex(notices[0], r"^\(missed \d+ events? \(seq \d+(–\d+)?\)[^()]*: "
                                     r"deployctl did not read fast enough; `deployctl status %s` "
                                     r"shows the run as it is\)$" % run)
        self.assertIn("run %s succeeded after" % run, read(watched))

    def test_a_log_follower_that_stops_reading_holds_back_no_other_and_loses_nothing(self):
        plan = self.d.write_plan("big.yaml", """\
version: 1
name: big
steps:
  - id: print
    run: 'echo ready; read line < @DIR@/gate; yes "a line of output, again and again" | head -c 20000000'
""")
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        follower, followed = self.deployctl("stalled.out", "logs", run, "print", "-f")
        reader = Reader(self.d, "logs", run=run, step="print", follow=True)
        wait_until(lambda: "ready" in read(followed) and reader.started(),
                   message="the clients to follow the log")
        os.kill(follower.pid, signal.SIGSTOP)
        with open(plan.file("gate"), "w") as gate:
            gate.write("go\n")
        self.assertEqual(self.d.wait_run(run, timeout=120)["state"], "succeeded")
        reader.join(120)
        self.assertIsNotNone(reader.lines, "the reading client did not get to the end")
        log_size = os.path.getsize(os.path.join(self.d.state_dir, "logs", run, "print.log"))
        self.assertGreater(log_size, 20000000)
        text = "".join(l.get("text", "") for l in reader.lines if l.get("type") == "data")
        self.assertEqual(len(text), log_size)
        self.assertEqual([l["type"] for l in reader.lines if l.get("type") == "missed"], [])
        # The stopped client goes on where it stopped: the log is read on for it, not dropped.
        os.kill(follower.pid, signal.SIGCONT)
        self.assertEqual(follower.wait(120), 0)
        self.assertEqual(os.path.getsize(followed), log_size)

    def deployctl(self, out_name, *args):
        """deployctl ARGS with its output to a file; returns (process, path of the file)."""
        path = self.d.path(out_name)
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        with open(path, "wb") as out:
            proc = subprocess.Popen([DEPLOYCTL_BIN] + list(args), stdout=out,
                                    stderr=subprocess.DEVNULL, env=env, stdin=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc, path

if __name__ == "__main__":
    unittest.main()
