"""Runs that go as planned, through the real deployd and deployctl: apply --wait, status and
runs JSON, logs, skip_if, on_failure and preflight."""

import json
import os
import unittest

from harness import DaemonTestCase


class PassingRunTest(DaemonTestCase):
    def test_apply_wait_succeeds_and_reports_json(self):
        plan = self.d.write_plan("pass.yaml", """\
version: 1
name: pass-e2e
description: two steps that succeed
vars:
  greeting: hello
steps:
  - id: hello
    run: echo "${greeting} from the first step"
  - id: write
    run: [sh, -c, 'echo written > @DIR@/written.txt']
    verify:
      - file: {path: "@DIR@/written.txt", min_size: 1B}
""")
        run, cp = self.d.apply(plan, "--var", "greeting=bonjour", check=0)

        # apply prints the run id as its first line; --wait follows the run to its end.
        self.assertRegex(run, r"^pass-e2e-\d+$")
        self.assertIn("run %s succeeded" % run, cp.stdout)

        status = self.d.status_json(run)
        self.assertEqual(status["id"], run)
        self.assertEqual(status["plan"], "pass-e2e")
        self.assertEqual(status["state"], "succeeded")
        self.assertEqual(status["vars"], {"greeting": "bonjour"})
        self.assertEqual([s["id"] for s in status["steps"]], ["hello", "write"])
        for s in status["steps"]:
            self.assertEqual(s["state"], "succeeded", s)
            self.assertEqual(s["attempts"], 1, s)
            self.assertEqual(s["exit_status"], 0, s)
        self.assertTrue(os.path.exists(plan.file("written.txt")))

        # The human form of status exits 0 for a succeeded run and lists the steps.
        human = self.d.ctl("status", run, check=0)
        self.assertIn("state:   succeeded", human.stdout)
        self.assertRegex(human.stdout, r"(?m)^hello\s+succeeded\s+1\s")

        runs = self.d.ctl("runs", "--json", check=0)
        listed = json.loads(runs.stdout)
        self.assertIsInstance(listed, list)
        mine = [r for r in listed if r["id"] == run]
        self.assertEqual(len(mine), 1, listed)
        self.assertEqual(mine[0]["state"], "succeeded")
        self.assertEqual(mine[0]["plan"], "pass-e2e")

        self.assert_events_consistent(run, status)

    def test_logs_print_the_step_output(self):
        plan = self.d.write_plan("logs.yaml", """\
version: 1
name: logs-e2e
steps:
  - id: talk
    run: |
      echo "line one"
      echo "line two on stderr" >&2
      echo "line three"
  - id: quiet
    run: 'true'
""")
        run, _ = self.d.apply(plan, check=0)
        cp = self.d.ctl("logs", run, "talk", check=0)
        self.assertEqual(cp.stdout, "line one\nline two on stderr\nline three\n")

        # Without a step: each step that ran, under a header.
        cp = self.d.ctl("logs", run, check=0)
        self.assertIn("==> talk <==\nline one\n", cp.stdout)
        self.assertIn("==> quiet <==\n", cp.stdout)

        cp = self.d.ctl("logs", run, "--json", check=0)
        entries = json.loads(cp.stdout)
        self.assertEqual([e["step"] for e in entries], ["talk", "quiet"])

        cp = self.d.ctl("logs", run, "nosuch", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s has no step 'nosuch'\n" % run)

    def test_second_run_gets_its_own_id(self):
        plan = self.d.write_plan("twice.yaml", """\
version: 1
name: twice
steps:
  - id: only
    run: 'true'
""")
        first, _ = self.d.apply(plan, check=0)
        second, _ = self.d.apply(plan, check=0)
        self.assertNotEqual(first, second)
        listed = json.loads(self.d.ctl("runs", "--json", check=0).stdout)
        ids = [r["id"] for r in listed]
        self.assertIn(first, ids)
        self.assertIn(second, ids)
        self.assertLess(ids.index(second), ids.index(first), "runs are listed newest first")


class SkipIfTest(DaemonTestCase):
    def test_skip_if_passing_skips_and_failing_runs(self):
        plan = self.d.write_plan("skip.yaml", """\
version: 1
name: skip-e2e
steps:
  - id: converged
    skip_if:
      - file: "@DIR@/already-there"
    run: 'touch @DIR@/converged-ran'
  - id: not-converged
    skip_if:
      - file: "@DIR@/missing"
    run: 'touch @DIR@/not-converged-ran'
""")
        with open(plan.file("already-there"), "w") as f:
            f.write("x")
        run, _ = self.d.apply(plan, check=0)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "succeeded")

        converged = self.d.step(run, "converged", status)
        self.assertEqual(converged["state"], "skipped")
        self.assertEqual(converged["attempts"], 0)
        self.assertTrue(converged["reason"].startswith("skip_if: "), converged)
        self.assertTrue(converged["reason"].endswith("; already done"), converged)
        self.assertFalse(os.path.exists(plan.file("converged-ran")), "a skipped action ran")

        other = self.d.step(run, "not-converged", status)
        self.assertEqual(other["state"], "succeeded")
        self.assertEqual(other["attempts"], 1)
        self.assertTrue(os.path.exists(plan.file("not-converged-ran")), "the action did not run")
        self.assert_events_consistent(run, status)


class OnFailureTest(DaemonTestCase):
    def test_on_failure_steps_run_and_later_steps_stay_pending(self):
        plan = self.d.write_plan("onfail.yaml", """\
version: 1
name: onfail-e2e
steps:
  - id: fine
    run: 'true'
  - id: breaks
    run: 'echo "about to break"; exit 3'
  - id: never
    run: 'touch @DIR@/never-ran'
on_failure:
  - id: report
    run: 'echo reported > @DIR@/report.txt'
  - id: tidy
    run: 'touch @DIR@/tidy-ran'
""")
        run, cp = self.d.apply(plan, check=1)
        self.assertIn("run %s failed" % run, cp.stdout)
        self.assertIn("step breaks: exit status 3", cp.stdout)
        self.assertIn("about to break", cp.stdout)

        status = self.d.status_json(run)
        self.assertEqual(status["state"], "failed")
        self.assertEqual(status["reason"], "step breaks failed: exit status 3")
        steps = {s["id"]: s for s in status["steps"]}
        self.assertEqual(steps["fine"]["state"], "succeeded")
        self.assertEqual(steps["breaks"]["state"], "failed")
        self.assertEqual(steps["breaks"]["reason"], "exit status 3")
        self.assertEqual(steps["breaks"]["exit_status"], 3)
        self.assertEqual(steps["breaks"]["evidence"]["output_tail"], ["about to break"])
        self.assertEqual(steps["never"]["state"], "pending")
        self.assertEqual(steps["never"]["attempts"], 0)
        for name in ("report", "tidy"):
            self.assertEqual(steps[name]["state"], "succeeded", steps[name])
            self.assertEqual(steps[name]["phase"], "on_failure")
        with open(plan.file("report.txt")) as f:
            self.assertEqual(f.read(), "reported\n")
        self.assertTrue(os.path.exists(plan.file("tidy-ran")))
        self.assertFalse(os.path.exists(plan.file("never-ran")))

        # The human status of a failed run exits 1.
        self.d.ctl("status", run, check=1)
        self.assert_events_consistent(run, status)


def write_shard(path, data_bytes):
    """A safetensors file whose one tensor needs 8 bytes; `data_bytes` of them are written."""
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + b"x" * data_bytes)


FETCH = r"""
import os, subprocess, sys
d = sys.argv[1]
os.makedirs(os.path.join(d, ".cache/huggingface/download"), exist_ok=True)
header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(len(header).to_bytes(8, "little") + header + b"x" * 3)
open(os.path.join(d, ".cache/huggingface/download/x.incomplete"), "w").close()
# The rest arrives while the step verifies (the action runs in the background).
subprocess.run([sys.executable, os.path.join(os.path.dirname(sys.argv[0]), "finish.py"), d])
"""

FINISH = r"""
import os, sys, time
d = sys.argv[1]
time.sleep(0.5)
with open(os.path.join(d, "model.safetensors"), "ab") as f:
    f.write(b"x" * 5)
os.remove(os.path.join(d, ".cache/huggingface/download/x.incomplete"))
"""


class WeightsCompleteTest(DaemonTestCase):
    def test_verify_waits_for_whole_shards(self):
        # The "download" leaves a truncated shard and an .incomplete file, and completes them
        # while the step verifies; verify polls until the directory is whole.
        plan = self.d.write_plan("weights.yaml", """\
version: 1
name: weights
steps:
  - id: fetch
    run: [python3, '@DIR@/fetch.py', '@DIR@/model']
    background: true
    verify:
      - weights_complete: '@DIR@/model'
        every: 100ms
        within: 30s
""")
        with open(plan.file("fetch.py"), "w") as f:
            f.write(FETCH)
        with open(plan.file("finish.py"), "w") as f:
            f.write(FINISH)
        run, _ = self.d.apply(plan, check=0)
        step = self.d.step(run, "fetch")
        self.assertEqual(step["state"], "succeeded")

    def test_a_truncated_shard_fails_with_evidence(self):
        plan = self.d.write_plan("truncated.yaml", """\
version: 1
name: truncated
steps:
  - id: fetch
    run: 'true'
    verify:
      - weights_complete: '@DIR@'
""")
        write_shard(plan.file("model-00001-of-00001.safetensors"), 7)
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "fetch")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "verify failed: weights_complete %s: shard "
                         "model-00001-of-00001.safetensors is truncated (69B of 70B)"
                         % plan.work)
        self.assertEqual(step["evidence"]["check"], "weights_complete %s" % plan.work)


    def test_numbered_shards_without_an_index_must_all_be_there(self):
        # A download cut after two of three shards, with no index to name the third.
        plan = self.d.write_plan("numbered.yaml", """\
version: 1
name: numbered
steps:
  - id: fetch
    run: 'true'
    verify:
      - weights_complete: '@DIR@'
""")
        for k in (1, 2):
            write_shard(plan.file("model-%05d-of-00003.safetensors" % k), 8)
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "fetch")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "verify failed: weights_complete %s: 1 of the 3 shards named "
                         "model-*-of-00003 is missing (no index): model-00003-of-00003.safetensors"
                         % plan.work)
        self.assertEqual(step["evidence"]["numbered"],
                         [{"name": "model-*-of-00003", "shards": 3, "present": 2,
                           "missing": ["model-00003-of-00003.safetensors"]}])
        write_shard(plan.file("model-00003-of-00003.safetensors"), 8)
        run, _ = self.d.apply(plan, check=0)
        self.assertEqual(self.d.step(run, "fetch")["state"], "succeeded")


class WeightsDigestTest(DaemonTestCase):
    def test_sha256_digests_are_verified_in_a_probe_child(self):
        import hashlib
        plan = self.d.write_plan("digests.yaml", """\
version: 1
name: digests
steps:
  - id: fetch
    run: 'true'
    verify:
      - weights_complete:
          path: '@DIR@'
          sha256: {model-00001-of-00001.safetensors: '@GOOD@'}
  - id: again
    run: 'true'
    verify:
      - weights_complete:
          path: '@DIR@'
          sha256: {model-00001-of-00001.safetensors: '@BAD@'}
""")
        shard = plan.file("model-00001-of-00001.safetensors")
        write_shard(shard, 8)
        with open(shard, "rb") as f:
            good = hashlib.sha256(f.read()).hexdigest()
        with open(plan.path) as f:
            text = f.read().replace("@GOOD@", good).replace("@BAD@", "0" * 64)
        with open(plan.path, "w") as f:
            f.write(text)
        run, _ = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        self.assertEqual(self.d.step(run, "fetch", status)["state"], "succeeded")
        again = self.d.step(run, "again", status)
        self.assertEqual(again["state"], "failed")
        self.assertIn("model-00001-of-00001.safetensors does not match its sha256", again["reason"])
        self.assertTrue(again["reason"].startswith("verify failed: weights_complete %s: "
                                                   % plan.work), again["reason"])


class VersionCheckTest(DaemonTestCase):
    def test_the_version_is_read_from_stdout_before_stderr(self):
        # The tool warns on stderr, with a version-like token, before it prints its version.
        plan = self.d.write_plan("version.yaml", """\
version: 1
name: version-e2e
steps:
  - id: runtime
    run: 'true'
    verify:
      - version:
          run: [sh, -c, 'echo "WARNING: CUDA 12.1 is older than this build expects" >&2; echo "vllm 0.15.1"']
          at_least: 0.15.0
          below: 0.16.0
  - id: newer
    run: 'true'
    verify:
      - version:
          run: [sh, -c, 'echo "WARNING: CUDA 12.1 is older than this build expects" >&2; echo "vllm 0.15.1"']
          at_least: 0.16.0
""")
        run, _ = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        self.assertEqual(self.d.step(run, "runtime", status)["state"], "succeeded")
        newer = self.d.step(run, "newer", status)
        self.assertEqual(newer["state"], "failed")
        self.assertTrue(newer["reason"].endswith(": version 0.15.1 is below 0.16.0"),
                        newer["reason"])
        self.assertEqual(newer["evidence"]["version"], "0.15.1")
        self.assertEqual(newer["evidence"]["version_line"], "vllm 0.15.1")
        self.assertEqual(newer["evidence"]["version_from"], "stdout")


class PreflightTest(DaemonTestCase):
    def test_failed_preflight_stops_the_run_before_any_step(self):
        plan = self.d.write_plan("preflight.yaml", """\
version: 1
name: preflight-e2e
preflight:
  - command: sh
  - command: deployd-no-such-tool
steps:
  - id: first
    run: 'touch @DIR@/first-ran'
  - id: second
    run: 'true'
on_failure:
  - id: report
    run: 'touch @DIR@/report-ran'
""")
        run, cp = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "failed")
        self.assertTrue(status["reason"].startswith("preflight failed:"), status["reason"])
        self.assertIn("deployd-no-such-tool", status["reason"])
        self.assertIn("preflight failed:", cp.stdout)
        for s in status["steps"]:
            self.assertEqual(s["state"], "pending", s)
            self.assertEqual(s["attempts"], 0, s)
        self.assertFalse(os.path.exists(plan.file("first-ran")))
        self.assertFalse(os.path.exists(plan.file("report-ran")))
        events = self.assert_events_consistent(run, status)
        self.assertFalse([e for e in events if e["kind"] == "step.state"], events)

    def test_every_preflight_check_runs_and_every_failure_is_named(self):
        plan = self.d.write_plan("preflight-all.yaml", """\
version: 1
name: preflight-all
secrets:
  TOKEN: {env: DEPLOYD_E2E_UNSET_PREFLIGHT}
preflight:
  - command: deployd-no-such-tool
  - command: sh
  - file: "@DIR@/missing"
steps:
  - id: first
    run: 'touch @DIR@/first-ran'
  - id: second
    secrets: [TOKEN]
    run: 'true'
""")
        run, cp = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        missing = plan.file("missing")
        self.assertEqual(status["reason"],
                         "preflight failed: secret TOKEN: environment variable "
                         "DEPLOYD_E2E_UNSET_PREFLIGHT is not set in deployd's environment; "
                         "command deployd-no-such-tool: not found on PATH; "
                         "file %s: does not exist (3 of 4 checks failed)" % missing)
        self.assertFalse(os.path.exists(plan.file("first-ran")))
        why = json.loads(self.d.ctl("why", run, "--json", check=1).stdout)
        self.assertEqual([f["check"] for f in why["preflight"]["failures"]],
                         ["secret TOKEN", "command deployd-no-such-tool", "file " + missing])
        out = self.d.ctl("why", run, check=1).stdout
        self.assertIn("failing preflight checks (no step was started):\n"
                      "  - check:    secret TOKEN\n"
                      "    attempts: 1\n"
                      "  - check:", out)
        # A list in the evidence is printed once, a line an item.
        self.assertEqual(out.count("searched:"), 1, out)

    def test_passing_preflight_is_recorded(self):
        plan = self.d.write_plan("preflight-ok.yaml", """\
version: 1
name: preflight-ok
preflight:
  - command: sh
  - file: "@DIR@"
steps:
  - id: only
    run: 'true'
""")
        run, _ = self.d.apply(plan, check=0)
        events = self.assert_events_consistent(run)
        kinds = [e["kind"] for e in events]
        self.assertIn("run.preflight", kinds)
        self.assertLess(kinds.index("run.preflight"), kinds.index("step.state"))


if __name__ == "__main__":
    unittest.main()
