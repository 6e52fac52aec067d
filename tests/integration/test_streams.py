"""The `follow` and `logs -f` streams through the real deployd: live events carry the seq and
the time the store gave them, and a client that stops reading is held to a byte budget — it is
told what it missed once it reads again — while the other clients of the same run get
everything."""

import json
import os
import socket
import subprocess
import unittest

from harness import DaemonTestCase, read_line, wait_until


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


if __name__ == "__main__":
    unittest.main()
