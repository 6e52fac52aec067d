"""`deployctl watch` and `deployctl logs -f` across a real restart of deployd (SIGTERM, and
kill -9): they say on stderr that deployd went away, connect again with backoff, and go on from
the last event (seq) and the last byte of the log they had, so that nothing is shown twice and
nothing is lost — their output is the same as that of a watch or a logs after the run."""

import json
import os
import re
import subprocess
import threading

from harness import DEPLOYCTL_BIN, DaemonTestCase, PtyProcess, main_skipping_with_77, wait_until

TIME = re.compile(r"\d+(\.\d+s|m\d\ds|h\d\dm)")


def times_out(text):
    return re.sub(r"(?m)^\[ *[^\]]+\] ", "[T] ", TIME.sub("T", text))


class Reader(threading.Thread):
    """Reads a pipe to its end in the background, line by line, so that the test can wait for a
    line while deployctl goes on writing."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.lines = []
        self.cond = threading.Condition()
        self.start()

    def run(self):
        for line in self.pipe:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_for(self, predicate, timeout=60):
        with self.cond:
            if not self.cond.wait_for(lambda: any(l is None or predicate(l) for l in self.lines),
                                      timeout):
                raise AssertionError("timed out waiting; got %r" % self.lines)
            for l in self.lines:
                if l is None:
                    raise AssertionError("the stream ended first: %r" % self.lines)
                if predicate(l):
                    return l

    def text(self):
        return "".join(l for l in self.lines if l is not None)


class ReconnectTest(DaemonTestCase):
    PLAN = """\
version: 1
name: restarted
steps:
  - id: first
    run: 'echo one; read line < @DIR@/gate; echo "$line"; echo three'
  - id: second
    run: 'echo second'
"""

    def blocked_run(self):
        plan = self.d.write_plan("restarted.yaml", self.PLAN)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "first", ("running",))
        return plan, run

    def release(self, path, text="two\n"):
        with open(path, "w") as gate:
            gate.write(text)

    def deployctl(self, *args):
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        proc = subprocess.Popen([DEPLOYCTL_BIN] + list(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                stdin=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc, Reader(proc.stdout), Reader(proc.stderr)

    def restart(self, how, err):
        if how == "SIGTERM":
            self.d.stop()
        else:
            self.d.kill9()
        first = err.wait_for(lambda l: True)
        self.assertEqual(first, "deployctl: lost deployd at %s (deployd closed the connection); "
                                "connecting again in 1s\n" % self.d.socket)
        self.d.start()

    def assert_reconnected(self, err):
        lines = err.text().splitlines()
        self.assertEqual(lines[-1], "deployctl: reconnected to deployd at %s; going on where it "
                                    "stopped" % self.d.socket, lines)
        # Tries that found deployd still away in between, each said with its wait.
        for line in lines[1:-1]:
            self.assertRegex(line, r"^deployctl: still no deployd at %s \((Connection refused|"
                                   r"No such file or directory)\); trying again in [248]s$"
                             % re.escape(self.d.socket))

    def watch_across_restart(self, how):
        plan, run = self.blocked_run()
        watch, out, err = self.deployctl("watch", run)
        out.wait_for(lambda l: re.match(r"\[ *\S+\] first +running", l))
        self.restart(how, err)
        self.release(plan.file("gate"))
        self.assertEqual(watch.wait(60), 0, err.text())
        out.join(30)
        err.join(30)
        self.assert_reconnected(err)
        # The same lines, once each, as a watch of the finished run prints.
        after = self.d.ctl("watch", run, check=0).stdout
        self.assertEqual(times_out(out.text()), times_out(after))
        self.assertEqual(out.text().count("following run"), 1)
        self.assertIn("second                   succeeded", out.text())

    def test_watch_across_sigterm(self):
        self.watch_across_restart("SIGTERM")

    def test_watch_across_kill_9(self):
        self.watch_across_restart("SIGKILL")

    def test_watch_json_across_restart(self):
        plan, run = self.blocked_run()
        watch, out, err = self.deployctl("watch", run, "--json")
        out.wait_for(lambda l: '"step":"first"' in l and '"state":"running"' in l)
        self.restart("SIGKILL", err)
        self.release(plan.file("gate"))
        self.assertEqual(watch.wait(60), 0, err.text())
        out.join(30)
        self.assert_reconnected(err)
        lines = [json.loads(l) for l in out.text().splitlines()]
        # A fresh snapshot after the reconnection, and every event once, in order.
        self.assertEqual([l["type"] for l in lines].count("snapshot"), 2)
        seqs = [l["seq"] for l in lines if l["type"] == "event"]
        self.assertEqual(seqs, [e["seq"] for e in self.d.events(run)])
        self.assertEqual(lines[-1]["type"], "end")

    def test_terminal_watch_across_restart(self):
        plan, run = self.blocked_run()
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket, TERM="xterm", NO_COLOR="1")
        term = PtyProcess([DEPLOYCTL_BIN, "watch", run], env)
        self.addCleanup(term.close)
        term.read_until(rb"first +running")
        self.d.kill9()
        term.read_until(rb"deployctl: lost deployd at ")
        self.d.start()
        term.read_until(rb"deployctl: reconnected to deployd at ")
        lost_at = term.output.index(b"deployctl: lost deployd at ")
        self.release(plan.file("gate"))
        status, text = term.finish()
        self.assertEqual(status, 0, text)
        self.assertRegex(text.rstrip(), r"run %s succeeded after \S+$" % run)
        # The messages stay on the screen: the frames after them are drawn below, never up
        # over them.
        after = term.output[lost_at:].decode()
        moves = [int(n) for n in re.findall(r"\x1b\[(\d+)A", after)]
        lines_since = [after[:m.start()].count("\n") for m in re.finditer(r"\x1b\[\d+A", after)]
        self.assertTrue(moves and all(up < since for up, since in zip(moves, lines_since)),
                        (moves, lines_since))
        self.assertRegex(text, r"second +succeeded")

    def logs_across_restart(self, how):
        plan, run = self.blocked_run()
        logs, out, err = self.deployctl("logs", run, "first", "-f")
        out.wait_for(lambda l: l == "one\n")
        self.restart(how, err)
        self.release(plan.file("gate"))
        self.assertEqual(logs.wait(60), 0, err.text())
        out.join(30)
        self.assert_reconnected(err)
        self.assertEqual(out.text(), "one\ntwo\nthree\n")
        self.assertEqual(out.text(), self.d.ctl("logs", run, "first", check=0).stdout)

    def test_logs_follow_across_sigterm(self):
        self.logs_across_restart("SIGTERM")

    def test_logs_follow_across_kill_9(self):
        self.logs_across_restart("SIGKILL")


class ReconnectRotatedLogTest(DaemonTestCase):
    """The log is rotated while deployd is away: the rest of the rotated file comes first."""

    start_daemon = False

    PLAN = """\
version: 1
name: rotated
steps:
  - id: talk
    run: 'for i in $(seq 1 30); do echo "before $i .........................................................................................."; done; read line < @DIR@/gate1; for i in $(seq 1 30); do echo "after $i ..........................................................................................."; done; read line < @DIR@/gate2; echo done'
"""

    def test_logs_follow_resumes_in_the_rotated_log(self):
        config = self.d.write_file("deployd.yaml", "log_max_size: 4KiB\n")
        self.d.extra_args = ["--config", config]
        self.d.start()
        plan = self.d.write_plan("rotated.yaml", self.PLAN)
        for gate in ("gate1", "gate2"):
            os.mkfifo(plan.file(gate))
        run, _ = self.d.apply(plan, wait=False, check=0)
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        logs = subprocess.Popen([DEPLOYCTL_BIN, "logs", run, "talk", "-f"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, stdin=subprocess.DEVNULL)
        self.addCleanup(logs.wait)
        self.addCleanup(logs.kill)
        out, err = Reader(logs.stdout), Reader(logs.stderr)
        out.wait_for(lambda l: l.startswith("before 30 "))
        self.d.stop()
        err.wait_for(lambda l: True)
        # While deployd is away the step writes on, past the cap: the log is rotated.
        with open(plan.file("gate1"), "w") as gate:
            gate.write("go\n")
        log = os.path.join(self.d.state_dir, "logs", run, "talk.log")

        def rotated():
            return os.path.exists(log + ".1") and os.path.exists(log) and \
                "after 30 " in open(log).read()
        wait_until(rotated, message="the log to be rotated")
        self.d.start()
        with open(plan.file("gate2"), "w") as gate:
            gate.write("go\n")
        self.assertEqual(logs.wait(60), 0, err.text())
        out.join(30)
        err.join(30)
        self.assertNotIn("cannot go on where the log stopped", err.text())
        with open(log + ".1") as first, open(log) as second:
            whole = first.read() + second.read()
        self.assertTrue(whole.startswith("before 1 ") and "\nafter 30 " in whole and
                        whole.endswith("\ndone\n"), whole)
        self.assertEqual(out.text(), whole)


if __name__ == "__main__":
    main_skipping_with_77()
