"""Background steps (DESIGN.md §1): the action runs under a supervisor that deployd re-executes
itself as, outlives the daemon, and records how the action ended. Through the real binaries:
a kill -9 of the daemon never kills a background action nor starts it twice; after the restart
the daemon reattaches to an action still running, and judges one that ended meanwhile by the
exit status its supervisor recorded. While the daemon runs, a non-zero exit and a fail_on line
fail the step at once, and cancelling stops the action's whole process group.

Each action appends a line to a `starts` file when it starts, and waits on a named pipe for
the test to let it go on: what it does while the daemon is down is decided by the test."""

import json
import os
import signal
import time
import unittest

from harness import DaemonTestCase, pids_with_marker, unique_marker, wait_until


def read(path):
    with open(path) as f:
        return f.read()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return stat[stat.rfind(")") + 2] not in "ZX"


class BackgroundTest(DaemonTestCase):
    def background_plan(self, name, then, verify_file="healthy", extra=""):
        """A plan with one background step `server`: it counts its start, waits until the test
        writes to the `go` pipe, then runs the shell code `then`. It verifies that
        `verify_file` appears (every 100ms, within 60s)."""
        marker = unique_marker(name)
        plan = self.d.write_plan(name + ".yaml", """\
version: 1
name: %s
steps:
  - id: server
    run: [sh, -c, 'echo start >> @DIR@/starts; echo waiting; read line < @DIR@/go; %s; : %s']
    background: true
%s    verify:
      - file: "@DIR@/%s"
        every: 100ms
        within: 60s
  - id: after
    run: 'touch @DIR@/after-ran'
""" % (name, then, marker, extra, verify_file))
        os.mkfifo(plan.file("go"))
        return plan, marker

    def let_go(self, plan):
        # Opening the pipe for writing waits for the action to be reading it.
        with open(plan.file("go"), "w") as f:
            f.write("go\n")

    def start_and_wait_verifying(self, plan):
        run, _ = self.d.apply(plan, wait=False, check=0)
        status = self.d.wait_step(run, "server", ("verifying",))
        step = self.d.step(run, "server", status)
        self.assertTrue(step["pid"], step)
        self.assertTrue(alive(step["pid"]), "the action is not running: %s" % step)
        return run, step

    def wait_gone(self, pid, what="the action"):
        wait_until(lambda: not alive(pid), message="%s (pid %d) to end" % (what, pid))

    def step_events(self, run, step="server"):
        return [(e["state"], e["detail"]) for e in self.d.events(run)
                if e["step_id"] == step and e["kind"] == "step.state"]

    def test_action_survives_kill9_and_is_reattached(self):
        plan, marker = self.background_plan("bg-reattach", "touch @DIR@/healthy; exec sleep 300")
        run, before = self.start_and_wait_verifying(plan)
        pid = before["pid"]
        action = before["action"]
        self.assertEqual(action["pid"], pid)
        self.assertTrue(alive(action["supervisor_pid"]))

        self.assertEqual(self.d.kill9(), -9)
        self.assertTrue(alive(pid), "kill -9 of deployd killed the background action")
        self.d.start()
        status = self.d.wait_step(run, "server", ("verifying",))
        self.assertEqual(self.d.step(run, "server", status)["pid"], pid)
        self.assertTrue(alive(pid))

        self.let_go(plan)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        server = self.d.step(run, "server", status)
        self.assertEqual(server["attempts"], 1)
        self.assertEqual(server["pid"], pid)
        self.assertEqual(read(plan.file("starts")), "start\n", "the action was started twice")
        self.assertTrue(os.path.exists(plan.file("after-ran")))
        # A background action outlives its step: it is the server that was launched.
        self.assertTrue(alive(pid), "the action was stopped although its step succeeded")
        # The supervisor carries the marker on its command line (the action exec'd sleep).
        self.assertEqual(pids_with_marker(marker), [action["supervisor_pid"]])

        self.assert_events_consistent(run, status)
        self.assertEqual(self.step_events(run), [
            ("running", "attempt 1"),
            ("verifying", ""),
            ("verifying", "deployd restarted; reattached to the background action (pid %d)" % pid),
            ("succeeded", ""),
        ])

    def test_nonzero_exit_while_deployd_is_down_fails_with_real_status(self):
        plan, marker = self.background_plan("bg-down-fail", "echo dying; exit 3")
        run, before = self.start_and_wait_verifying(plan)
        self.assertEqual(self.d.kill9(), -9)
        self.let_go(plan)
        self.wait_gone(before["pid"])
        self.wait_gone(before["action"]["supervisor_pid"], "the supervisor")
        self.d.start()

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "failed", status)
        server = self.d.step(run, "server", status)
        self.assertEqual(server["state"], "failed")
        self.assertEqual(server["exit_status"], 3)
        self.assertEqual(server["attempts"], 1)
        self.assertEqual(server["reason"],
                         "background action exit status 3 (it ended while deployd was down)")
        self.assertEqual(server["evidence"]["exit_status"], 3)
        self.assertEqual(server["evidence"]["output_tail"], ["waiting", "dying"])
        self.assertEqual(read(plan.file("starts")), "start\n", "the action was started twice")
        self.assertFalse(os.path.exists(plan.file("after-ran")))
        events = self.assert_events_consistent(run, status)
        self.assertEqual(self.step_events(run)[-1],
                         ("failed", "deployd restarted; background action exit status 3 "
                                    "(it ended while deployd was down)"), events)

    def test_zero_exit_while_deployd_is_down_is_verified(self):
        plan, marker = self.background_plan("bg-down-ok", "touch @DIR@/healthy; exit 0")
        run, before = self.start_and_wait_verifying(plan)
        self.assertEqual(self.d.kill9(), -9)
        self.let_go(plan)
        self.wait_gone(before["action"]["supervisor_pid"], "the supervisor")
        self.d.start()

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        server = self.d.step(run, "server", status)
        self.assertEqual(server["attempts"], 1)
        self.assertEqual(server["exit_status"], 0)
        self.assertEqual(read(plan.file("starts")), "start\n", "the action was started twice")
        self.assertTrue(os.path.exists(plan.file("after-ran")))
        self.assert_events_consistent(run, status)
        self.assertIn(("verifying", "deployd restarted; the background action had exited with "
                                    "status 0 meanwhile"), self.step_events(run))

    def test_fail_on_line_written_while_deployd_is_down(self):
        plan, marker = self.background_plan(
            "bg-down-failon", "echo \"CUDA out of memory\"; exec sleep 300",
            extra="    watch:\n      fail_on: 'out of memory'\n")
        run, before = self.start_and_wait_verifying(plan)
        self.assertEqual(self.d.kill9(), -9)
        self.let_go(plan)
        wait_until(lambda: "out of memory" in read(self.d.path("state", "logs", run,
                                                                "server.log")),
                   message="the action's fatal line")
        self.d.start()

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "failed", status)
        server = self.d.step(run, "server", status)
        self.assertEqual(server["reason"],
                         "output matched fail_on 'out of memory': CUDA out of memory")
        self.wait_gone(before["pid"])
        self.assertEqual(read(plan.file("starts")), "start\n")

    def test_nonzero_exit_fails_the_step_at_once(self):
        plan, marker = self.background_plan("bg-exit", "echo \"bad flag\"; exit 7")
        run, before = self.start_and_wait_verifying(plan)
        self.let_go(plan)
        let_go_at = time.monotonic()
        status = self.d.wait_run(run)
        # The verify checks would have gone on for 60s.
        self.assertLess(time.monotonic() - let_go_at, 30)
        self.assertEqual(status["state"], "failed", status)
        server = self.d.step(run, "server", status)
        self.assertEqual(server["exit_status"], 7)
        self.assertEqual(server["reason"], "background action exit status 7")
        self.assertEqual(server["evidence"]["output_tail"], ["waiting", "bad flag"])
        self.assertEqual(self.d.ctl("logs", run, "server", check=0).stdout, "waiting\nbad flag\n")

    def test_fail_on_output_fails_the_step_and_stops_the_action(self):
        plan, marker = self.background_plan(
            "bg-failon", "echo \"Engine core initialization failed\"; exec sleep 300",
            extra="    watch:\n      fail_on: ['is not supported', 'initialization failed']\n")
        run, before = self.start_and_wait_verifying(plan)
        self.let_go(plan)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "failed", status)
        server = self.d.step(run, "server", status)
        self.assertEqual(server["reason"], "output matched fail_on 'initialization failed': "
                                           "Engine core initialization failed")
        self.wait_gone(before["pid"])
        record = wait_until(lambda: self.status_record(before, "exited"),
                            message="the supervisor's exit record")
        self.assertEqual(record["signal"], signal.SIGTERM)

    def status_record(self, step, state):
        try:
            record = json.loads(read(step["action"]["status_file"]))
        except (OSError, ValueError):
            return None
        return record if record["state"] == state else None

    def test_cancel_stops_the_process_group_and_the_supervisor_records_it(self):
        marker = unique_marker("bg-cancel")
        plan = self.d.write_plan("cancel.yaml", """\
version: 1
name: bg-cancel
steps:
  - id: server
    run: [sh, -c, 'echo start >> @DIR@/starts; sleep 300 & echo $! > @DIR@/child; wait; : %s']
    background: true
    grace: 5s
    verify:
      - file: "@DIR@/never"
        every: 100ms
        within: 60s
""" % marker)
        run, before = self.start_and_wait_verifying(plan)
        child = int(wait_until(lambda: read(plan.file("child")).strip()
                               if os.path.exists(plan.file("child")) else None,
                               message="the action's own child"))
        self.assertTrue(alive(child))
        self.assertEqual(os.getpgid(child), before["pid"], "not in the action's process group")
        supervisor = before["action"]["supervisor_pid"]
        self.assertNotEqual(os.getpgid(supervisor), before["pid"])

        self.d.ctl("cancel", run, check=0)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "cancelled", status)
        self.wait_gone(before["pid"])
        self.wait_gone(child, "the action's child")
        self.wait_gone(supervisor, "the supervisor")
        record = self.status_record(before, "exited")
        self.assertIsNotNone(record, read(before["action"]["status_file"]))
        self.assertEqual(record["signal"], signal.SIGTERM)
        self.assertEqual(record["pid"], before["pid"])
        self.assertEqual(read(plan.file("starts")), "start\n")
        self.assertEqual(pids_with_marker(marker), [])

    def test_a_missing_program_fails_the_step(self):
        plan = self.d.write_plan("missing.yaml", """\
version: 1
name: bg-missing
steps:
  - id: server
    run: [deployd-no-such-program, --serve]
    background: true
""")
        run, cp = self.d.apply(plan, check=1)
        server = self.d.step(run, "server")
        self.assertEqual(server["reason"], "cannot start 'deployd-no-such-program': not found on PATH")


if __name__ == "__main__":
    unittest.main()
