"""`deployctl logs RUN STEP -f` through the real deployd and deployctl: a step's output as it
grows, until the step has ended and its processes have exited."""

import json
import os
import signal
import subprocess
import unittest

from harness import DEPLOYCTL_BIN, DaemonTestCase


class LogsFollowTest(DaemonTestCase):
    # Each step writes, then waits on its FIFO until the test lets it go on.
    PLAN = """\
version: 1
name: talky
steps:
  - id: talk
    run: 'echo first; read line < @DIR@/gate-talk; printf "second é\\n"'
  - id: server
    background: true
    run: 'echo started; read line < @DIR@/gate-server; echo stopping'
    verify:
      - file: "@DIR@"
"""

    def start(self):
        plan = self.d.write_plan("talky.yaml", self.PLAN)
        for name in ("gate-talk", "gate-server"):
            os.mkfifo(plan.file(name))
        run, _ = self.d.apply(plan, wait=False, check=0)
        return plan, run

    def release(self, plan, name):
        with open(plan.file(name), "w") as gate:
            gate.write("go\n")

    def follow(self, run, step):
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        proc = subprocess.Popen([DEPLOYCTL_BIN, "logs", run, step, "-f"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env,
                                stdin=subprocess.DEVNULL)
        self.addCleanup(proc.kill)
        return proc

    def test_follow_a_step_while_it_runs_and_after_it_has_run(self):
        plan, run = self.start()
        self.d.wait_step(run, "talk", ("running",))
        logs = self.follow(run, "talk")
        # Live: the first line arrives while the step still runs.
        self.assertEqual(logs.stdout.readline(), "first\n")
        self.assertEqual(self.d.step(run, "talk")["state"], "running")
        self.release(plan, "gate-talk")
        out, err = logs.communicate(timeout=60)
        self.assertEqual((logs.returncode, err), (0, ""))
        self.assertEqual(out, "second é\n")

        # A finished step: all of its output, then the end.
        cp = self.d.ctl("logs", run, "talk", "-f", check=0)
        self.assertEqual(cp.stdout, "first\nsecond é\n")

    def test_a_background_step_is_followed_until_its_process_exits(self):
        plan, run = self.start()
        self.release(plan, "gate-talk")
        self.d.wait_step(run, "server", ("running", "verifying", "succeeded"))
        logs = self.follow(run, "server")
        self.assertEqual(logs.stdout.readline(), "started\n")
        # The step (and the run) are done; the process that writes the log is not.
        self.assertEqual(self.d.wait_run(run)["state"], "succeeded")
        self.assertIsNone(logs.poll())
        self.release(plan, "gate-server")
        out, err = logs.communicate(timeout=60)
        self.assertEqual((logs.returncode, err), (0, ""))
        self.assertEqual(out, "stopping\n")

    def test_interrupting_the_client_leaves_the_daemon_serving(self):
        plan, run = self.start()
        self.d.wait_step(run, "talk", ("running",))
        logs = self.follow(run, "talk")
        self.assertEqual(logs.stdout.readline(), "first\n")
        logs.send_signal(signal.SIGINT)
        logs.communicate(timeout=30)
        self.release(plan, "gate-talk")
        self.release(plan, "gate-server")
        self.assertEqual(self.d.wait_run(run)["state"], "succeeded")
        self.d.ctl("status", run, check=0)

    def test_refusals(self):
        plan, run = self.start()
        cp = self.d.ctl("logs", run, "-f", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: logs -f needs a STEP: the step whose "
                                    "output to follow\n")
        cp = self.d.ctl("logs", run, "nope", "-f", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s has no step 'nope'\n" % run)
        cp = self.d.ctl("logs", "nope-1", "talk", "-f", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")
        self.release(plan, "gate-talk")
        self.release(plan, "gate-server")
        self.d.wait_run(run)
        # -f --json: the stream's lines as they come; their text is the log.
        cp = self.d.ctl("logs", run, "talk", "-f", "--json", check=0)
        lines = [json.loads(l) for l in cp.stdout.splitlines()]
        self.assertEqual((lines[0]["type"], lines[-1]["type"]), ("start", "end"))
        logged = json.loads(self.d.ctl("logs", run, "talk", "--json", check=0).stdout)
        self.assertEqual("".join(l["text"] for l in lines if l["type"] == "data"),
                         logged[0]["text"])


if __name__ == "__main__":
    unittest.main()
