"""watch.progress through the real binaries: a writer that stops growing a directory while
staying alive is failed as stalled, with the evidence; `on_stall: restart` fires it again;
progress lines in the output show in `status --json` and in the `follow` stream."""

import json
import os
import sys
import time
import unittest

from harness import DaemonTestCase, read_line, wait_until

# A downloader-like writer: grows DIR (a hidden file, a partial file under
# .cache/huggingface/download/, a finished file) by 128KiB every 0.2 s, 8 times (1MiB), printing
# a line after each write; records the time of its last growth in MARKS/last_growth; then, in
# mode "stall" (or "stall-once" on its first attempt), stays alive without writing anything.
WRITER = r"""
import json, os, sys, time
dl, marks, mode = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(marks, "attempts"), "a") as f:
    f.write("x\n")
with open(os.path.join(marks, "attempts")) as f:
    attempt = len(f.read().split())
partial = os.path.join(dl, ".cache", "huggingface", "download")
os.makedirs(partial, exist_ok=True)
names = [os.path.join(dl, ".hidden-progress"),
         os.path.join(partial, "model-00001-of-00002.safetensors.abc.incomplete"),
         os.path.join(dl, "config.json")]
total = 0
for i in range(8):
    with open(names[i % 3], "ab") as f:
        f.write(b"w" * 131072)
    last_growth = time.time()
    total += 131072
    print("wrote %d bytes" % total, flush=True)
    time.sleep(0.2)
tmp = os.path.join(marks, "last_growth.tmp")
with open(tmp, "w") as f:
    json.dump({"at_ms": int(last_growth * 1000), "attempt": attempt}, f)
os.rename(tmp, os.path.join(marks, "last_growth"))
if mode == "stall" or (mode == "stall-once" and attempt == 1):
    time.sleep(3600)
"""

STALL_AFTER_S = 2.0
EVERY_S = 0.5


class ProgressTestCase(DaemonTestCase):
    def writer_plan(self, name, mode, step_keys="", watch_keys=""):
        """A plan whose step `download` runs WRITER on @DIR@/dl; `step_keys` and `watch_keys`
        are more lines of the step and of its watch."""
        plan = self.d.write_plan(name + ".yaml", """\
version: 1
name: %s
steps:
  - id: download
    run: [%s, '@DIR@/writer.py', '@DIR@/dl', '@DIR@', %s]
%s    watch:
      progress: {path: '@DIR@/dl', stall_after: 2s, every: 500ms}
%s""" % (name, sys.executable, mode, step_keys, watch_keys))
        with open(plan.file("writer.py"), "w") as f:
            f.write(WRITER)
        return plan

    def last_growth(self, plan):
        with open(plan.file("last_growth")) as f:
            return json.load(f)

    def attempts_started(self, plan):
        with open(plan.file("attempts")) as f:
            return len(f.read().split())


class StallTest(ProgressTestCase):
    def test_a_writer_that_stops_growing_is_failed_as_stalled(self):
        plan = self.writer_plan("stall", "stall")
        run, cp = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        step = self.d.step(run, "download", status)
        dl = plan.file("dl")
        reason = "no progress for 2s (bytes under %s stuck at 1MiB)" % dl
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"], reason)
        self.assertEqual(step["attempts"], 1)
        self.assertEqual(status["reason"], "step download failed: " + reason)
        self.assertNotIn("progress", step)  # only running steps have progress

        ev = step["evidence"]
        self.assertEqual(ev["bytes"], 1 << 20)
        self.assertEqual(ev["path"], dl)
        self.assertEqual(ev["stall_after_ms"], 2000)
        self.assertGreaterEqual(ev["stalled_for_ms"], 2000)
        self.assertLess(ev["stalled_for_ms"], 2000 + 500 + 5000)
        self.assertIsInstance(ev["rate_bps"], int)
        self.assertGreaterEqual(ev["rate_bps"], 0)
        self.assertEqual(ev["last_line"], "wrote 1048576 bytes")
        self.assertIn("wrote 1048576 bytes", ev["output_tail"])
        self.assertIn("run %s failed" % run, cp.stdout)
        self.assertIn("  step download: " + reason, cp.stdout)

        # The detection delay, from the writer's last growth to the committed failure: at least
        # stall_after, and well within stall_after + every (+ a generous margin for a busy host).
        growth = self.last_growth(plan)["at_ms"]
        events = self.assert_events_consistent(run, status)
        failed_at = [e["at_ms"] for e in events
                     if e["kind"] == "step.state" and e["state"] == "failed"][0]
        delay = (failed_at - growth) / 1000.0
        sys.stderr.write("\nstall detection delay: %.2fs after the last growth (stall_after "
                         "%.1fs, every %.1fs)\n" % (delay, STALL_AFTER_S, EVERY_S))
        self.assertGreaterEqual(delay, STALL_AFTER_S - 0.1)
        self.assertLess(delay, STALL_AFTER_S + EVERY_S + 5.0)
        self.assertLessEqual(abs(ev["last_progress_at_ms"] - growth), 1000 * EVERY_S + 1000)
        # `why` shows that time as a time, and how long ago it was.
        why = self.d.ctl("why", run, check=1).stdout
        self.assertRegex(why, r"\n    last_progress_at_ms: +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
                              r"\(\d+s ago\)\n")
        # Its process group was stopped; nothing was tried again (on_stall: fail).
        self.assertEqual(self.attempts_started(plan), 1)
        self.wait_no_step_processes()

    def test_on_stall_fail_does_not_use_the_retries(self):
        plan = self.writer_plan("stall-fail", "stall", step_keys="    retries: 2\n",
                                watch_keys="      on_stall: fail\n")
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "download")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["attempts"], 1)
        self.assertTrue(step["reason"].startswith("no progress for 2s"), step["reason"])
        self.assertEqual(self.attempts_started(plan), 1)

    def test_on_stall_restart_fires_the_action_again(self):
        plan = self.writer_plan("restart", "stall-once",
                                step_keys="    retries: 2\n    retry_delay: 100ms\n",
                                watch_keys="      on_stall: restart\n")
        run, _ = self.d.apply(plan, check=0)
        status = self.d.status_json(run)
        step = self.d.step(run, "download", status)
        self.assertEqual(status["state"], "succeeded")
        self.assertEqual(step["state"], "succeeded")
        self.assertEqual(step["attempts"], 2)
        self.assertEqual(self.attempts_started(plan), 2)
        self.assertEqual(self.last_growth(plan)["attempt"], 2)
        events = self.assert_events_consistent(run, status)
        stalls = [e for e in events if e["kind"] == "step.state" and e["state"] == "pending"
                  and e["detail"].startswith("no progress for 2s (bytes under ")]
        self.assertEqual(len(stalls), 1, json.dumps(events, indent=1))
        self.wait_no_step_processes()

    def test_a_background_step_stalls_while_it_verifies(self):
        plan = self.writer_plan("bg", "stall", step_keys="""\
    background: true
    verify:
      - file: '@DIR@/never'
        every: 200ms
        within: 60s
""")
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "download")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "no progress for 2s (bytes under %s stuck at 1MiB)" % plan.file("dl"))
        self.assertEqual(step["evidence"]["bytes"], 1 << 20)
        # A background step's output does not reach the engine line by line (yet).
        self.wait_no_step_processes()

    def test_a_background_action_that_finished_is_not_a_stall_while_it_verifies(self):
        # The writer exits 0 after 1MiB; the verify then takes twice stall_after (hashing the
        # weights, say): nothing is left to make progress, so nothing stalls.
        plan = self.writer_plan("bg-done", "done", step_keys="""\
    background: true
    verify:
      - run: 'sleep 4'
""")
        run, _ = self.d.apply(plan, check=0)
        step = self.d.step(run, "download")
        self.assertEqual(step["state"], "succeeded")
        self.assertEqual(step["attempts"], 1)
        self.assertEqual(self.attempts_started(plan), 1)


# Prints tqdm-like redraws separated by '\r' (as tqdm does on a terminal), then waits for
# MARKS/go, then finishes.
LINES = r"""
import os, sys, time
go = sys.argv[1]
for n in (1, 2, 3):
    sys.stdout.write("Fetching 10 files:  %d0%%|%s%s| %d/10 [00:0%d<00:0%d,  3.00it/s]\r"
                     % (n, "#" * n, " " * (10 - n), n, n, 9 - n))
    sys.stdout.flush()
    time.sleep(0.1)
print("still working")
sys.stdout.flush()
if sys.argv[2] == "wait":
    while not os.path.exists(go):
        time.sleep(0.05)
else:
    time.sleep(3600)
"""


class OutputProgressTest(ProgressTestCase):
    def lines_plan(self, name, mode, stall_after):
        plan = self.d.write_plan(name + ".yaml", """\
version: 1
name: %s
steps:
  - id: load
    run: [%s, '@DIR@/lines.py', '@DIR@/go', %s]
    retries: 1
    retry_delay: 100ms
    watch:
      progress: {stall_after: %s, every: 200ms}
""" % (name, sys.executable, mode, stall_after))
        with open(plan.file("lines.py"), "w") as f:
            f.write(LINES)
        return plan

    def test_progress_lines_show_in_status_and_follow(self):
        plan = self.lines_plan("lines", "wait", "60s")
        run, _ = self.d.apply(plan, wait=False, check=0)
        sock = self.d.raw_connect(timeout=30)
        self.addCleanup(sock.close)
        sock.sendall(json.dumps({"v": 1, "op": "follow", "run": run}).encode() + b"\n")

        def progress_seen():
            step = self.d.step(run, "load")
            p = step.get("progress")
            return p if p and p["done"] == 3 else None
        p = wait_until(progress_seen, message="progress 3/10 in status --json")
        self.assertEqual(p["total"], 10)
        self.assertEqual(p["fraction"], 0.3)
        self.assertIsNone(p["bytes"])
        self.assertIsNone(p["total_bytes"])
        self.assertIsNone(p["rate_bps"])
        self.assertGreater(p["last_progress_at_ms"], 0)
        self.assertLessEqual(p["last_progress_at_ms"], p["at_ms"])
        for key in ("eta_s",):
            self.assertIn(key, p)

        # The follow stream carries the same fields as {"type": "progress"} lines.
        buffer = b""
        seen = None
        deadline = time.monotonic() + 30
        while seen is None and time.monotonic() < deadline:
            line, buffer = read_line(sock, buffer)
            self.assertIsNotNone(line, "follow stream ended early")
            obj = json.loads(line)
            if obj.get("type") == "progress" and obj.get("done") == 3:
                seen = obj
        self.assertIsNotNone(seen, "no progress line with done=3 in the follow stream")
        self.assertEqual(seen["run"], run)
        self.assertEqual(seen["step"], "load")
        self.assertEqual(seen["total"], 10)
        for key in ("bytes", "total_bytes", "fraction", "rate_bps", "eta_s",
                    "last_progress_at_ms", "at_ms"):
            self.assertIn(key, seen)

        with open(plan.file("go"), "w"):
            pass
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded")
        self.assertNotIn("progress", self.d.step(run, "load", status))

    def test_output_that_stops_advancing_is_a_stall_and_is_not_retried(self):
        plan = self.lines_plan("quiet", "stall", "2s")
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "load")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"], "no progress for 2s (progress in the output stuck at 3/10)")
        self.assertEqual(step["attempts"], 1)  # retries: 1, but on_stall is fail
        self.assertIsNone(step["evidence"]["bytes"])
        self.assertEqual(step["evidence"]["last_line"], "still working")
        self.wait_no_step_processes()


if __name__ == "__main__":
    unittest.main()
