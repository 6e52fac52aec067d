"""`deployctl why` through the real deployd and deployctl: the evidence of a failed run on one
screen (the failing step, its check's last answer, the exit status, the log's tail, the
timeline), and what it says about runs that did not fail."""

import json
import os
import re
import unittest

from harness import DaemonTestCase, who

TIME = re.compile(r"\d+(\.\d+s|m\d\ds|h\d\dm)")


def times_out(text):
    """Durations vary from run to run: each becomes T (the padding before it is kept)."""
    return TIME.sub("T", text)


def timeline_out(text):
    """The timeline right-aligns its offsets: each becomes '+T' after two blanks."""
    return re.sub(r"(?m)^ +\+\S+  ", "  +T  ", text)


class WhyTest(DaemonTestCase):
    def test_why_a_step_failed(self):
        plan = self.d.write_plan("failing.yaml", """\
version: 1
name: failing
steps:
  - id: setup
    run: 'echo setting up'
  - id: serve
    run: 'echo "loading model"; echo "CUDA error: out of memory"; exit 3'
on_failure:
  - id: report
    run: 'echo reporting'
""")
        run, _ = self.d.apply(plan, check=1)
        cp = self.d.ctl("why", run, check=1)
        log = os.path.join(self.d.state_dir, "logs", run, "serve.log")
        self.assertEqual(timeline_out(times_out(cp.stdout)), """\
run {run} failed after T: step serve failed: exit status 3

failing step: serve, attempt 1
  reason:      exit status 3
  exit status: 3
  log (last 2 lines of {log}):
    loading model
    CUDA error: out of memory

timeline:
  +T  run                      created    plan failing from {plan}, applied by {who}
  +T  run                      running
  +T  setup                    running    attempt 1
  +T  setup                    succeeded
  +T  serve                    running    attempt 1
  +T  serve                    failed     exit status 3
  +T  report                   running    attempt 1
  +T  report                   succeeded
  +T  run                      failed     step serve failed: exit status 3
""".format(run=run, log=log, plan=plan.path, who=who()))

        why = json.loads(self.d.ctl("why", run, "--json", check=1).stdout)
        self.assertEqual(why["state"], "failed")
        self.assertTrue(why["failed"])
        step = why["failing_step"]
        self.assertEqual(step["id"], "serve")
        self.assertEqual(step["exit_status"], 3)
        self.assertEqual(step["evidence"]["output_tail"], ["loading model",
                                                           "CUDA error: out of memory"])
        self.assertEqual(step["log_tail"], ["loading model", "CUDA error: out of memory"])
        self.assertEqual(step["log_path"], log)
        timeline = why["timeline"]
        self.assertEqual([(e["step"], e["kind"], e["state"]) for e in timeline][-2:],
                         [("report", "step.state", "succeeded"), ("", "run.state", "failed")])
        self.assertEqual(timeline[0]["offset_ms"], 0)
        self.assertTrue(all(e["offset_ms"] >= 0 for e in timeline), timeline)

    def test_why_a_check_failed(self):
        server = self.http_server()
        server.set("/health", 503, "loading weights")
        plan = self.d.write_plan("verifying.yaml", """\
version: 1
name: verifying
steps:
  - id: start
    run: 'echo "server: starting"'
    verify:
      - http: %s
        every: 100ms
        within: 500ms
""" % server.url("/health"))
        run, _ = self.d.apply(plan, check=1)
        cp = self.d.ctl("why", run, check=1)
        out = re.sub(r"(?m)^(    (attempts|elapsed_ms): +)\d+$", r"\1N", cp.stdout)
        url = server.url("/health")
        head = """\
run {run} failed after T: step start failed: verify failed: http GET {url}: status 503 (expected 200)

failing step: start, attempt 1
  reason:      verify failed: http GET {url}: status 503 (expected 200)
  exit status: 0
  evidence:
    check:        http GET {url}
    target:       GET {url}
    status_code:  503
    body_excerpt: loading weights
    attempts:     N
    elapsed_ms:   N
  log (last line of {log}):
    server: starting

timeline:
""".format(run=run, url=url, log=os.path.join(self.d.state_dir, "logs", run, "start.log"))
        self.assertEqual(times_out(out)[:len(head)], head)

    def test_why_preflight_failed_and_runs_that_did_not_fail(self):
        plan = self.d.write_plan("pf.yaml", """\
version: 1
name: pf
preflight:
  - file: "@DIR@/missing"
steps:
  - id: a
    run: 'true'
""")
        run, _ = self.d.apply(plan, check=1)
        cp = self.d.ctl("why", run, check=1)
        missing = plan.file("missing")
        self.assertEqual(timeline_out(times_out(cp.stdout)), """\
run {run} failed after T: preflight failed: file {missing}: does not exist

failing preflight check (no step was started):
  check:      file {missing}
  target:     {missing}
  error:      no such file
  attempts:   1
  elapsed_ms: 0
  exists:     false

timeline:
  +T  run                      created    plan pf from {plan}, applied by {who}
  +T  run                      running
  +T  run                      failed     preflight failed: file {missing}: does not exist
""".format(run=run, missing=missing, plan=plan.path, who=who()))
        why = json.loads(self.d.ctl("why", run, "--json", check=1).stdout)
        self.assertIsNone(why["failing_step"])
        self.assertEqual(why["preflight"]["target"], missing)

        ok = self.d.write_plan("ok.yaml", "version: 1\nname: fine\nsteps:\n  - id: a\n    run: 'true'\n")
        run, _ = self.d.apply(ok, check=0)
        cp = self.d.ctl("why", run, check=0)
        self.assertEqual(cp.stdout, "run %s did not fail: it is succeeded\n" % run)
        why = json.loads(self.d.ctl("why", run, "--json", check=0).stdout)
        self.assertFalse(why["failed"])
        self.assertIsNone(why["failing_step"])
        cp = self.d.ctl("why", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")


if __name__ == "__main__":
    unittest.main()
