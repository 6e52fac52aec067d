"""Operator control of a running run, through the real deployd and deployctl: approval steps
that wait for `deployctl approve`, and `pause` / `resume` between steps."""

import os
import pwd
import unittest

from harness import DaemonTestCase, who


def run_states(events):
    return [e["state"] for e in events if e["kind"] == "run.state"]


class ApprovalTest(DaemonTestCase):
    PLAN = """\
version: 1
name: gated
steps:
  - id: prepare
    run: 'echo prepared > @DIR@/prepared'
  - id: confirm
    approval: "check that @DIR@/prepared looks right"
    verify:
      - file: "@DIR@/prepared"
  - id: after
    run: 'touch @DIR@/after-ran'
  - id: final-ok
    approval: last look before the end
"""

    def test_approval_steps_wait_until_approved(self):
        plan = self.d.write_plan("gated.yaml", self.PLAN)
        run, _ = self.d.apply(plan, wait=False, check=0)
        status = self.d.wait_step(run, "confirm", ("waiting",))
        self.assertEqual(status["state"], "waiting")
        confirm = self.d.step(run, "confirm", status)
        waiting_reason = ("waiting for approval: check that %s looks right "
                          "(`deployctl approve %s confirm`)" % (plan.file("prepared"), run))
        self.assertEqual(confirm["reason"], waiting_reason)
        self.assertEqual(confirm["attempts"], 1)
        self.assertEqual(status["reason"], "step confirm: " + waiting_reason)
        self.assertEqual(self.d.step(run, "after", status)["state"], "pending")
        self.assertFalse(os.path.exists(plan.file("after-ran")))

        # Steps that are not waiting for approval cannot be approved.
        for step, message in (
                ("prepare", "step prepare is not an approval step"),
                ("final-ok", "step final-ok is pending, not waiting for approval"),
                ("nosuch", "run %s has no step 'nosuch'" % run)):
            cp = self.d.ctl("approve", run, step, check=2)
            self.assertEqual(cp.stderr, "deployctl: error: %s\n" % message)
        cp = self.d.ctl("approve", "nope-1", "confirm", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")
        # A waiting run is not paused: it starts nothing until the approval anyway.
        cp = self.d.ctl("pause", run, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s is waiting for approval of step "
                                    "confirm; nothing starts until it is approved\n" % run)

        # stdin is /dev/null: approving needs no terminal.
        cp = self.d.ctl("approve", run, "confirm", check=0)
        self.assertEqual(cp.stdout, "step confirm of run %s approved\n" % run)
        status = self.d.wait_step(run, "final-ok", ("waiting",))
        who = "%s (uid %d)" % (pwd.getpwuid(os.getuid()).pw_name, os.getuid())
        self.assertEqual(self.d.step(run, "confirm", status)["state"], "succeeded")
        self.assertEqual(self.d.step(run, "confirm", status)["reason"], "approved by " + who)
        self.assertEqual(self.d.step(run, "after", status)["state"], "succeeded")

        self.d.ctl("approve", run, "final-ok", check=0)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded")
        events = self.assert_events_consistent(run, status)
        self.assertEqual(run_states(events),
                         ["running", "waiting", "running", "waiting", "running", "succeeded"])
        confirm_states = [e["state"] for e in events
                          if e["kind"] == "step.state" and e["step_id"] == "confirm"]
        # Approved, then its verify checks ran.
        self.assertEqual(confirm_states, ["waiting", "verifying", "succeeded"])
        running_again = [e for e in events if e["kind"] == "run.state"][2]
        self.assertEqual(running_again["detail"], "step confirm: approved by " + who)

        cp = self.d.ctl("approve", run, "final-ok", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s has already finished (succeeded); "
                                    "there is nothing to approve\n" % run)

    def test_a_waiting_step_survives_a_restart_of_deployd(self):
        plan = self.d.write_plan("gated.yaml", self.PLAN)
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "confirm", ("waiting",))
        self.d.kill9()
        self.d.start()
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "waiting")
        self.assertEqual(self.d.step(run, "confirm", status)["state"], "waiting")
        self.assertEqual(self.d.step(run, "confirm", status)["attempts"], 1)
        self.d.ctl("approve", run, "confirm", check=0)
        self.d.wait_step(run, "final-ok", ("waiting",))
        self.d.ctl("approve", run, "final-ok", check=0)
        self.assertEqual(self.d.wait_run(run)["state"], "succeeded")
        with open(plan.file("prepared")) as f:
            self.assertEqual(f.read(), "prepared\n", "prepare ran once")

    def test_cancel_a_waiting_run(self):
        plan = self.d.write_plan("gated.yaml", self.PLAN)
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "confirm", ("waiting",))
        cp = self.d.ctl("cancel", run, check=0)
        self.assertEqual(cp.stdout, "run %s cancelled\n" % run)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "cancelled")
        self.assertEqual(self.d.step(run, "confirm", status)["state"], "cancelled")
        self.assertEqual(self.d.step(run, "after", status)["state"], "cancelled")
        self.assertEqual(run_states(self.assert_events_consistent(run, status)),
                         ["running", "waiting", "cancelled"])


class PauseResumeTest(DaemonTestCase):
    # `first` blocks on a FIFO until the test writes to it: the test decides when it ends.
    PLAN = """\
version: 1
name: pausable
steps:
  - id: first
    run: 'echo started > @DIR@/first-started; read line < @DIR@/gate; echo "$line"'
  - id: second
    run: 'touch @DIR@/second-ran'
"""

    def start_blocked_run(self):
        plan = self.d.write_plan("pausable.yaml", self.PLAN)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "first", ("running",))
        return plan, run

    def release(self, plan):
        with open(plan.file("gate"), "w") as gate:
            gate.write("go\n")

    def test_pause_takes_effect_between_steps(self):
        plan, run = self.start_blocked_run()
        cp = self.d.ctl("resume", run, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s is not paused (it is running)\n" % run)

        cp = self.d.ctl("pause", run, check=0)
        self.assertEqual(cp.stdout, "run %s paused: its current step finishes, no new step starts "
                                    "until `deployctl resume %s`\n" % (run, run))
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "paused")
        self.assertEqual(status["reason"], "paused by %s; step first finishes first" % who())
        self.assertEqual(self.d.step(run, "first", status)["state"], "running")
        cp = self.d.ctl("pause", run, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s is already paused\n" % run)

        # The current step finishes; the next one does not start.
        self.release(plan)
        status = self.d.wait_step(run, "first", ("succeeded",))
        self.assertEqual(status["state"], "paused")
        self.assertEqual(self.d.step(run, "second", status)["state"], "pending")
        self.assertFalse(os.path.exists(plan.file("second-ran")))

        # It stays paused across a restart of deployd.
        self.d.restart()
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "paused")
        self.assertEqual(self.d.step(run, "second", status)["state"], "pending")

        cp = self.d.ctl("resume", run, check=0)
        self.assertEqual(cp.stdout, "run %s resumed\n" % run)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded")
        self.assertTrue(os.path.exists(plan.file("second-ran")))
        events = self.assert_events_consistent(run, status)
        self.assertEqual(run_states(events), ["running", "paused", "running", "succeeded"])
        self.assertEqual([e["detail"] for e in events if e["kind"] == "run.state"][2],
                         "resumed by " + who())

        for verb, message in (
                ("pause", "run %s has already finished (succeeded); only a running run can be "
                          "paused" % run),
                ("resume", "run %s has already finished (succeeded); only a paused run can be "
                           "resumed" % run)):
            cp = self.d.ctl(verb, run, check=2)
            self.assertEqual(cp.stderr, "deployctl: error: %s\n" % message)
        cp = self.d.ctl("pause", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")

    def test_cancel_a_paused_run(self):
        plan, run = self.start_blocked_run()
        self.d.ctl("pause", run, check=0)
        self.d.ctl("cancel", run, check=0)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "cancelled")
        self.assertEqual(self.d.step(run, "first", status)["state"], "cancelled")
        self.assertEqual(self.d.step(run, "second", status)["state"], "cancelled")
        self.wait_no_step_processes()
        self.assertEqual(run_states(self.assert_events_consistent(run, status)),
                         ["running", "paused", "cancelled"])


if __name__ == "__main__":
    unittest.main()
