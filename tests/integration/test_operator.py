"""What an operator does with a failed run: retry it once the cause is fixed, or skip the
failed step and let the run go on."""

import os
import unittest

from harness import DaemonTestCase, who


class RetryRunTest(DaemonTestCase):
    def test_retry_after_fixing_the_cause_succeeds(self):
        plan = self.d.write_plan("fixable.yaml", """\
version: 1
name: fixable
steps:
  - id: needs-file
    run: 'echo fired >> @DIR@/fired'
    verify:
      - file: "@DIR@/ready"
  - id: after
    run: 'touch @DIR@/after-ran'
on_failure:
  - id: report
    run: 'echo report >> @DIR@/reports'
""")
        run, _ = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "failed")
        step = self.d.step(run, "needs-file", status)
        self.assertEqual(step["state"], "failed")
        self.assertTrue(step["reason"].startswith("verify failed: file %s" % plan.file("ready")),
                        step["reason"])
        self.assertEqual(self.d.step(run, "after", status)["state"], "pending")
        self.assertEqual(self.d.step(run, "report", status)["state"], "succeeded")

        # Fix the cause, then retry the run: it goes on from the failed step.
        with open(plan.file("ready"), "w") as f:
            f.write("ok")
        cp = self.d.ctl("retry", run, "--wait", check=0)
        self.assertEqual(cp.stdout.splitlines()[0], "run %s resumed" % run)
        self.assertIn("run %s succeeded" % run, cp.stdout)

        status = self.d.status_json(run)
        self.assertEqual(status["state"], "succeeded")
        steps = {s["id"]: s for s in status["steps"]}
        self.assertEqual(steps["needs-file"]["state"], "succeeded")
        self.assertEqual(steps["needs-file"]["attempts"], 1, "a retry starts the count afresh")
        self.assertEqual(steps["after"]["state"], "succeeded")
        self.assertTrue(os.path.exists(plan.file("after-ran")))
        with open(plan.file("fired")) as f:
            self.assertEqual(f.read(), "fired\nfired\n")
        # The on_failure step belongs to the failed attempt: reset, and not run again.
        self.assertEqual(steps["report"]["state"], "pending")
        with open(plan.file("reports")) as f:
            self.assertEqual(f.read(), "report\n")
        self.assert_events_consistent(run, status)

    def test_retry_refusals(self):
        plan = self.d.write_plan("ok.yaml", """\
version: 1
name: fine
steps:
  - id: only
    run: 'true'
""")
        run, _ = self.d.apply(plan, check=0)
        cp = self.d.ctl("retry", run, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s is succeeded; only a failed or "
                                    "cancelled run can be retried\n" % run)
        cp = self.d.ctl("retry", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")


class SkipStepTest(DaemonTestCase):
    def test_skip_failed_step_lets_the_run_continue(self):
        plan = self.d.write_plan("skippable.yaml", """\
version: 1
name: skippable
steps:
  - id: broken
    run: 'exit 1'
  - id: after
    run: 'touch @DIR@/after-ran'
""")
        run, _ = self.d.apply(plan, check=1)
        self.assertEqual(self.d.step(run, "broken")["state"], "failed")
        self.assertFalse(os.path.exists(plan.file("after-ran")))

        cp = self.d.ctl("skip", run, "broken", "--wait", check=0)
        self.assertEqual(cp.stdout.splitlines()[0], "run %s resumed" % run)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded")
        broken = self.d.step(run, "broken", status)
        self.assertEqual(broken["state"], "skipped")
        self.assertEqual(broken["reason"], "skipped by " + who())
        self.assertEqual(self.d.step(run, "after", status)["state"], "succeeded")
        self.assertTrue(os.path.exists(plan.file("after-ran")))
        self.assert_events_consistent(run, status)

        # Skipping it again is refused.
        cp = self.d.ctl("skip", run, "broken", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s is succeeded; only steps of a "
                                    "running, failed or cancelled run can be skipped\n" % run)
        self.d.ctl("skip", run, "nosuch", check=2)


if __name__ == "__main__":
    unittest.main()
