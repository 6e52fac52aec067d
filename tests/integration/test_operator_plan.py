"""`deployctl plan` through the real deployd and deployctl: a dry run that shows the resolved
steps and which preflight and skip_if checks pass right now, and changes nothing."""

import json
import os
import unittest

from harness import DaemonTestCase, free_port


class PlanDryRunTest(DaemonTestCase):
    PLAN = """\
version: 1
name: preview
description: what a dry run shows
vars:
  port: "1"
  dir: "@DIR@"
preflight:
  - file: ${dir}/present
  - file: ${dir}/missing
steps:
  - id: shell
    run: echo "${dir}" $${dir}
    timeout: 5m
    retries: 2
    env: {A: "1"}
    cwd: /tmp
    watch:
      fail_on: [boom]
    verify:
      - http: http://127.0.0.1:${port}/health
        after: 1s
        every: 500ms
        within: 30s
  - id: argv
    run: [printf, '%s\\n', "hello world", '${port}']
    background: true
    idempotent: true
    skip_if:
      - file: ${dir}/present
  - id: multi
    run: |
      touch ${dir}/multi-ran
      echo two
    skip_if:
      - file: ${dir}/present
      - tcp: 127.0.0.1:${port}
  - id: gate
    approval: check ${dir}
on_failure:
  - id: report
    run: 'true'
"""

    def test_plan_shows_the_resolved_steps_and_the_checks_now(self):
        plan = self.d.write_plan("preview.yaml", self.PLAN)
        with open(plan.file("present"), "w"):
            pass
        port = free_port()
        cp = self.d.ctl("plan", plan, "--var", "port=%d" % port, check=1)
        self.assertEqual(cp.stdout, """\
plan preview ({plan}): 4 steps, 1 on_failure step
what a dry run shows
vars: dir={dir}, port={port}
dry run: nothing was changed; preflight and skip_if checks were probed once, now

preflight:
  pass  file {dir}/present: exists (0B)
  FAIL  file {dir}/missing: does not exist

steps:
  1. shell
       run (sh -c): echo "{dir}" ${{dir}}
       options: timeout 5m (then SIGTERM, SIGKILL after 10s), retries 2 (delay 1s, doubling), cwd /tmp, env A=1
       fail_on: 'boom'
       verify:  http GET http://127.0.0.1:{port}/health (after 1s, every 500ms, within 30s)
  2. argv  [background]
       run (argv): printf '%s\\n' 'hello world' {port}
       options: idempotent
       skip_if: pass  file {dir}/present: exists (0B)
                every skip_if check passes now: the step would be skipped
  3. multi
       run (sh -c):
         touch {dir}/multi-ran
         echo two
       skip_if: pass  file {dir}/present: exists (0B)
       skip_if: FAIL  tcp 127.0.0.1:{port}: connection refused
  4. gate
       approval: check {dir}
                 (waits for `deployctl approve RUN gate`)

on_failure (run when a step fails):
  5. report
       run (sh -c): true

1 of 2 preflight checks fail now: apply would fail before changing anything
""".format(plan=plan.path, dir=plan.work, port=port))
        self.assertEqual(cp.stderr, "")

        # Nothing was recorded or run.
        self.assertEqual(json.loads(self.d.ctl("runs", "--json", check=0).stdout), [])
        self.assertFalse(os.path.exists(plan.file("multi-ran")))

        # Once every preflight check passes, the dry run exits 0.
        with open(plan.file("missing"), "w"):
            pass
        data = json.loads(self.d.ctl("plan", plan, "--json", check=0).stdout)
        self.assertTrue(data["preflight_passed"])
        self.assertEqual([s["id"] for s in data["steps"]], ["shell", "argv", "multi", "gate"])
        shell, argv, multi, gate = data["steps"]
        self.assertEqual(shell["command"], {"shell": True, "script": 'echo "%s" ${dir}' % plan.work,
                                            "argv": ["/bin/sh", "-c",
                                                     'echo "%s" ${dir}' % plan.work]})
        self.assertEqual(shell["timeout_ms"], 300000)
        self.assertEqual(shell["verify"][0]["check"], "http GET http://127.0.0.1:1/health")
        self.assertEqual(argv["command"]["argv"], ["printf", "%s\\n", "hello world", "1"])
        self.assertTrue(argv["would_skip"])
        self.assertFalse(multi["would_skip"])
        self.assertEqual(gate["action"], "approval")
        self.assertEqual(gate["approval"], "check %s" % plan.work)
        self.assertEqual(data["on_failure"][0]["id"], "report")
        self.assertEqual(json.loads(self.d.ctl("runs", "--json", check=0).stdout), [])

    def test_an_invalid_plan_gets_its_diagnostics(self):
        plan = self.d.write_plan("bad.yaml", """\
version: 1
name: bad
steps:
  - id: a
    approval: ok?
    run: make
""")
        cp = self.d.ctl("plan", plan, check=2)
        self.assertEqual(cp.stdout, "")
        self.assertEqual(cp.stderr, """\
{plan}:6:5: error: a step has one action: 'approval' or 'run', not both
    run: make
    ^
""".format(plan=plan.path))
        cp = self.d.ctl("plan", plan, "--var", "nope=1", check=2)
        self.assertIn("--var 'nope': the plan declares no variable 'nope'", cp.stderr)

    def test_plan_shows_what_a_step_watches(self):
        plan = self.d.write_plan("watched.yaml", """\
version: 1
name: watched
steps:
  - id: fetch
    run: [hf, download, org/model]
    retries: 2
    watch:
      progress: {path: "@DIR@/dl", total: 600GiB, stall_after: 10m}
      on_stall: restart
  - id: load
    run: 'vllm serve'
    watch:
      progress: {stall_after: 20m, every: 30s}
""")
        cp = self.d.ctl("plan", plan, check=0)
        self.assertIn("""\
  1. fetch
       run (argv): hf download org/model
       options: retries 2 (delay 1s, doubling)
       progress: bytes under {dl} (of 600.0GiB), sampled every 5s; no progress for 10m → restart
  2. load
       run (sh -c): vllm serve
       progress: progress lines in the output, sampled every 30s; no progress for 20m → fail
""".format(dl=plan.file("dl")), cp.stdout)
        progress = json.loads(self.d.ctl("plan", plan, "--json", check=0).stdout)["steps"][0]["progress"]
        self.assertEqual(progress, {"path": plan.file("dl"), "stall_after_ms": 600000,
                                    "every_ms": 5000, "total_bytes": 600 * 1024 ** 3,
                                    "on_stall": "restart"})


if __name__ == "__main__":
    unittest.main()
