"""kill -9 of the daemon while a step runs, then a restart (DESIGN.md §1 "Crash and restart"):
a step that is not safe to repeat fails and asks for an operator, an idempotent one is fired
again, and one whose verify checks already pass succeeds without a second attempt. Nothing
committed is lost: the event log has no gaps and agrees with the steps' states."""

import os
import unittest

from harness import DaemonTestCase, pids_with_marker, unique_marker, wait_until


def read(path):
    with open(path) as f:
        return f.read()


class CrashRestartTest(DaemonTestCase):
    def crash_while(self, run, step, marker):
        """Waits until `step` runs its action (the marked process is up), then kill -9s the
        daemon and starts it again."""
        self.d.wait_step(run, step, ("running",))
        wait_until(lambda: pids_with_marker(marker), message="the action of step %s" % step)
        self.assertEqual(self.d.kill9(), -9)
        self.d.start()

    def test_non_idempotent_step_is_interrupted(self):
        marker = unique_marker("crash-nonidem")
        plan = self.d.write_plan("nonidem.yaml", """\
version: 1
name: crash-nonidem
steps:
  - id: prepare
    run: 'true'
  - id: migrate
    run: [sh, -c, 'echo fired >> @DIR@/fired; sleep 300; : %s']
  - id: after
    run: 'touch @DIR@/after-ran'
on_failure:
  - id: report
    run: 'touch @DIR@/report-ran'
""" % marker)
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.crash_while(run, "migrate", marker)

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "failed", status)
        migrate = self.d.step(run, "migrate", status)
        self.assertEqual(migrate["state"], "failed")
        self.assertEqual(migrate["attempts"], 1, "a step that is not safe to repeat was repeated")
        self.assertIn("interrupted", migrate["reason"])
        self.assertIn("deployctl retry %s migrate" % run, migrate["reason"])
        self.assertIn("deployctl skip %s migrate" % run, migrate["reason"])
        self.assertEqual(read(plan.file("fired")), "fired\n")
        self.assertEqual(self.d.step(run, "prepare", status)["state"], "succeeded")
        self.assertEqual(self.d.step(run, "after", status)["state"], "pending")
        self.assertEqual(self.d.step(run, "report", status)["state"], "succeeded", status)
        self.assertTrue(os.path.exists(plan.file("report-ran")), "on_failure did not run")
        self.assertFalse(os.path.exists(plan.file("after-ran")))
        self.assertEqual(status["reason"], "step migrate failed: " + migrate["reason"])

        events = self.assert_events_consistent(run, status)
        migrate_events = [e for e in events if e["step_id"] == "migrate"]
        self.assertEqual(migrate_events[-1]["state"], "failed")
        self.assertTrue(migrate_events[-1]["detail"].startswith("deployd restarted; interrupted"),
                        migrate_events[-1])

    def test_idempotent_step_is_fired_again(self):
        marker = unique_marker("crash-idem")
        # The first attempt hangs (until the crash); the second one finishes at once.
        plan = self.d.write_plan("idem.yaml", """\
version: 1
name: crash-idem
steps:
  - id: sync
    run: [sh, -c, 'echo fired >> @DIR@/fired; if [ ! -e @DIR@/second ]; then touch @DIR@/second; sleep 300; fi; : %s']
    idempotent: true
  - id: after
    run: 'touch @DIR@/after-ran'
""" % marker)
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: os.path.exists(plan.file("second")), message="the first attempt")
        self.crash_while(run, "sync", marker)

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        sync = self.d.step(run, "sync", status)
        self.assertEqual(sync["state"], "succeeded")
        self.assertEqual(sync["attempts"], 2)
        self.assertEqual(read(plan.file("fired")), "fired\nfired\n")
        self.assertTrue(os.path.exists(plan.file("after-ran")))

        events = self.assert_events_consistent(run, status)
        sync_events = [(e["state"], e["detail"]) for e in events
                       if e["step_id"] == "sync" and e["kind"] == "step.state"]
        self.assertEqual(sync_events, [("running", "attempt 1"),
                                       ("running", "deployd restarted; attempt 2"),
                                       ("succeeded", "")])

    def test_step_whose_verify_passes_after_restart_succeeds(self):
        marker = unique_marker("crash-verify")
        plan = self.d.write_plan("verified.yaml", """\
version: 1
name: crash-verify
steps:
  - id: install
    run: [sh, -c, 'echo fired >> @DIR@/fired; touch @DIR@/installed; sleep 300; : %s']
    verify:
      - file: "@DIR@/installed"
  - id: after
    run: 'touch @DIR@/after-ran'
""" % marker)
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: os.path.exists(plan.file("installed")), message="the action's work")
        self.crash_while(run, "install", marker)

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        install = self.d.step(run, "install", status)
        self.assertEqual(install["state"], "succeeded")
        self.assertEqual(install["attempts"], 1, "the step was fired a second time")
        self.assertEqual(read(plan.file("fired")), "fired\n")
        self.assertTrue(os.path.exists(plan.file("after-ran")))

        events = self.assert_events_consistent(run, status)
        install_events = [(e["state"], e["detail"]) for e in events
                          if e["step_id"] == "install" and e["kind"] == "step.state"]
        self.assertEqual(install_events[0], ("running", "attempt 1"))
        self.assertEqual(install_events[1][0], "verifying")
        self.assertTrue(install_events[1][1].startswith("deployd restarted"), install_events)
        self.assertEqual(install_events[-1][0], "succeeded")
        self.assertEqual(len(install_events), 3, install_events)

    def test_finished_runs_survive_a_crash(self):
        plan = self.d.write_plan("done.yaml", """\
version: 1
name: crash-done
steps:
  - id: only
    run: 'echo done'
""")
        run, _ = self.d.apply(plan, check=0)
        before = self.d.status_json(run)
        events_before = self.d.events(run)
        self.d.kill9()
        self.d.start()
        after = self.d.status_json(run)
        self.assertEqual(after, before)
        self.assertEqual(self.d.events(run), events_before, "a finished run was touched on restart")
        self.assertEqual(self.d.ctl("logs", run, "only", check=0).stdout, "done\n")


if __name__ == "__main__":
    unittest.main()
