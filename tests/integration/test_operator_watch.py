"""`deployctl watch` through the real deployd and deployctl: plain lines when stdout is not a
terminal (pinned), and under a pseudo-terminal a table redrawn in place that ticks while the run
goes on and ends with the final state."""

import errno
import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
import unittest

from harness import DEPLOYCTL_BIN, DaemonTestCase, who

TIME = re.compile(r"\d+(\.\d+s|m\d\ds|h\d\dm)")


def times_out(text):
    """Durations vary from run to run: each becomes T (the padding before it is kept)."""
    return TIME.sub("T", text)


def plain_out(text):
    return re.sub(r"(?m)^\[ *[^\]]+\] ", "[T] ", text)


class WatchTest(DaemonTestCase):
    # `first` blocks on a FIFO until the test writes to it.
    PLAN = """\
version: 1
name: watched
steps:
  - id: first
    run: 'read line < @DIR@/gate; echo "$line"'
  - id: second
    run: 'echo second'
"""

    def blocked_run(self):
        plan = self.d.write_plan("watched.yaml", self.PLAN)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "first", ("running",))
        return plan, run

    def release(self, plan):
        with open(plan.file("gate"), "w") as gate:
            gate.write("go\n")

    def test_plain_lines_when_stdout_is_not_a_terminal(self):
        plan, run = self.blocked_run()
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        watch = subprocess.Popen([DEPLOYCTL_BIN, "watch", run], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env,
                                 stdin=subprocess.DEVNULL)
        self.addCleanup(watch.kill)
        # Live: the lines so far arrive before the run goes on.
        seen = []
        while not seen or "first                    running" not in seen[-1]:
            line = watch.stdout.readline()
            self.assertTrue(line, "watch ended early: %s" % seen)
            seen.append(line)
        self.release(plan)
        out, err = watch.communicate(timeout=60)
        self.assertEqual(watch.returncode, 0, err)
        self.assertEqual(err, "")
        text = "".join(seen) + out
        self.assertNotIn("\x1b", text)
        self.assertEqual(plain_out(times_out(text)), """\
following run {run}
[T] run                      created    plan watched from {plan}, applied by {who}
[T] run                      running    
[T] first                    running    attempt 1
[T] first                    succeeded  
[T] second                   running    attempt 1
[T] second                   succeeded  
[T] run                      succeeded  
run {run} succeeded after T
""".format(run=run, plan=plan.path, who=who()))

        # A finished run: its history, then the outcome.
        cp = self.d.ctl("watch", run, check=0)
        self.assertEqual(plain_out(times_out(cp.stdout)), plain_out(times_out(text)))

    def test_watch_a_failing_run_exits_1_with_the_evidence(self):
        plan = self.d.write_plan("failing.yaml", """\
version: 1
name: failing
steps:
  - id: broken
    run: 'echo "fatal: no GPU"; exit 4'
""")
        run, _ = self.d.apply(plan, check=1)
        cp = self.d.ctl("watch", run, check=1)
        self.assertTrue(plain_out(times_out(cp.stdout)).endswith("""\
[T] run                      failed     step broken failed: exit status 4
run {run} failed after T: step broken failed: exit status 4
  step broken: exit status 4
    exit_status: 4
    output (last lines):
      fatal: no GPU
""".format(run=run)), cp.stdout)
        lines = [json.loads(l) for l in self.d.ctl("watch", run, "--json", check=1).stdout.splitlines()]
        self.assertEqual(lines[0]["type"], "snapshot")
        self.assertEqual(lines[-1]["type"], "end")
        self.assertEqual(lines[-1]["run"]["state"], "failed")
        cp = self.d.ctl("watch", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")

    def test_terminal_view_redraws_in_place(self):
        plan, run = self.blocked_run()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket, TERM="xterm", NO_COLOR="1")
        watch = subprocess.Popen([DEPLOYCTL_BIN, "watch", run], stdin=slave, stdout=slave,
                                 stderr=slave, env=env, close_fds=True)
        self.addCleanup(watch.kill)
        os.close(slave)
        output = b""

        def read_some(timeout):
            nonlocal output
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                return False
            try:
                chunk = os.read(master, 65536)
            except OSError as e:  # EIO: the other side has closed
                if e.errno != errno.EIO:
                    raise
                return None
            if not chunk:
                return None
            output += chunk
            return True

        # The elapsed time of the running step ticks once a second, between events.
        frames_of_first = lambda: set(re.findall(rb"first +running +(\S+)", output))
        deadline = time.monotonic() + 30
        while len(frames_of_first()) < 2 and time.monotonic() < deadline:
            read_some(0.5)
        self.assertGreaterEqual(len(frames_of_first()), 2, output)
        self.release(plan)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and read_some(1) is not None:
            pass
        os.close(master)
        self.assertEqual(watch.wait(30), 0, output)
        text = output.decode()
        # Redrawn in place: the cursor goes up over the last frame, each line is cleared.
        self.assertRegex(text, r"\x1b\[\d+A")
        self.assertIn("\r\x1b[2K", text)
        # The last frame shows the final state; the last line the outcome.
        last_frame = text[list(re.finditer(r"\x1b\[\d+A", text))[-1].end():]
        self.assertRegex(last_frame, r"run %s \(plan watched\): succeeded after " % run)
        self.assertRegex(last_frame, r"first +succeeded")
        self.assertRegex(last_frame, r"second +succeeded")
        self.assertRegex(text.rstrip(), r"run %s succeeded after \S+$" % run)


class WatchProgressTest(DaemonTestCase):
    # A download that writes a quarter of its bytes, then waits on a FIFO for the rest.
    PLAN = """\
version: 1
name: download
steps:
  - id: fetch
    run: 'mkdir -p @DIR@/dl; head -c 262144 /dev/zero > @DIR@/dl/a; read line < @DIR@/gate; head -c 786432 /dev/zero > @DIR@/dl/b'
    watch:
      progress: {path: "@DIR@/dl", total: 1MiB, every: 100ms, stall_after: 30s}
"""

    def start(self):
        plan = self.d.write_plan("download.yaml", self.PLAN)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "fetch", ("running",))
        return plan, run

    def release(self, plan):
        with open(plan.file("gate"), "w") as gate:
            gate.write("go\n")

    def test_plain_progress_lines(self):
        plan, run = self.start()
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        watch = subprocess.Popen([DEPLOYCTL_BIN, "watch", run], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env,
                                 stdin=subprocess.DEVNULL)
        self.addCleanup(watch.kill)
        seen = []
        while not seen or " progress " not in seen[-1]:
            line = watch.stdout.readline()
            self.assertTrue(line, "watch ended early: %s" % seen)
            seen.append(line)
        self.assertRegex(seen[-1], r"^\[ *\S+\] fetch +progress +\d+% [\d.]+(B|KiB) / 1\.0MiB")
        self.release(plan)
        out, err = watch.communicate(timeout=60)
        self.assertEqual(watch.returncode, 0, err)
        self.assertNotIn("\x1b", "".join(seen) + out)
        self.assertRegex(out, r"run %s succeeded after \S+\n$" % run)

    def test_terminal_progress_bar(self):
        plan, run = self.start()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket, TERM="xterm", NO_COLOR="1")
        watch = subprocess.Popen([DEPLOYCTL_BIN, "watch", run], stdin=slave, stdout=slave,
                                 stderr=slave, env=env, close_fds=True)
        self.addCleanup(watch.kill)
        os.close(slave)
        output = b""
        deadline = time.monotonic() + 30
        quarter = b"[#####---------------] 25% 256.0KiB / 1.0MiB"
        while quarter not in output and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                output += os.read(master, 65536)
        self.assertIn(quarter, output)
        self.release(plan)
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            output += chunk
        os.close(master)
        self.assertEqual(watch.wait(30), 0, output)
        self.assertRegex(output.decode(), r"fetch +succeeded")


if __name__ == "__main__":
    unittest.main()
