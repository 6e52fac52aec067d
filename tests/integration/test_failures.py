"""Steps that fail, and how: a verify check against a real HTTP server, a timeout that must
kill a whole process group, a fail_on output line, a GPU fault in the kernel's log, retries
with backoff, and cancel."""

import json
import os
import shutil
import tempfile
import time
import unittest

import harness
from harness import DaemonTestCase, free_port, pids_with_marker, unique_marker, wait_no_marker, wait_until, who

STANDINS = os.path.join(harness.SOURCE_DIR, "tests", "standins")


class VerifyFailureTest(DaemonTestCase):
    def test_http_verify_503_fails_with_evidence(self):
        server = self.http_server()
        server.set("/health", 503, "model still loading: shard 3/8\n")
        plan = self.d.write_plan("verify.yaml", """\
version: 1
name: verify-e2e
vars:
  port: "0"
steps:
  - id: launch
    run: 'echo launched'
    verify:
      - http: {url: "http://127.0.0.1:${port}/health", status: 200}
""")
        run, cp = self.d.apply(plan, "--var", "port=%d" % server.port, check=1)
        url = "http://127.0.0.1:%d/health" % server.port
        reason = "verify failed: http GET %s: status 503 (expected 200)" % url

        status = self.d.status_json(run)
        self.assertEqual(status["state"], "failed")
        self.assertEqual(status["reason"], "step launch failed: " + reason)
        step = self.d.step(run, "launch", status)
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"], reason)
        self.assertEqual(step["attempts"], 1)
        evidence = step["evidence"]
        self.assertEqual(evidence["status_code"], 503)
        self.assertIn("model still loading: shard 3/8", evidence["body_excerpt"])
        self.assertEqual(evidence["check"], "http GET %s" % url)
        self.assertGreaterEqual(server.hits.get("/health", 0), 1)

        # apply --wait shows the failure and its evidence.
        self.assertIn("run %s failed" % run, cp.stdout)
        self.assertIn("  step launch: " + reason, cp.stdout)
        self.assertIn("    status_code: 503", cp.stdout)
        self.assertIn("model still loading", cp.stdout)
        self.assert_events_consistent(run, status)

    def test_http_verify_passes_once_the_server_is_healthy(self):
        server = self.http_server()
        server.set("/health", 200, "ok\n")
        plan = self.d.write_plan("verify-ok.yaml", """\
version: 1
name: verify-ok
vars:
  port: "0"
steps:
  - id: launch
    run: 'true'
    verify:
      - http: {url: "http://127.0.0.1:${port}/health", status: 200, body_contains: ok}
""")
        run, _ = self.d.apply(plan, "--var", "port=%d" % server.port, check=0)
        self.assertEqual(self.d.step(run, "launch")["state"], "succeeded")

    def test_tcp_verify_with_nothing_listening(self):
        port = free_port()
        plan = self.d.write_plan("tcp.yaml", """\
version: 1
name: tcp-e2e
vars:
  port: "0"
preflight:
  - port_free: {port: "${port}", host: 127.0.0.1}
steps:
  - id: listen
    run: 'true'
    verify:
      - tcp: 127.0.0.1:${port}
""")
        run, _ = self.d.apply(plan, "--var", "port=%d" % port, check=1)
        step = self.d.step(run, "listen")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "verify failed: tcp 127.0.0.1:%d: connection refused" % port)
        self.assertEqual(step["evidence"]["error"], "connection refused")

    def test_http_verify_of_a_large_body(self):
        # A status check of a large answer (a model file) passes; body_contains searches the
        # first 4MiB that the probe reads, and says so when the text is not there.
        server = self.http_server()
        server.set("/model.bin", 200, b"weights " * (1 << 20) + b"TAIL")  # 8MiB
        plan = self.d.write_plan("large.yaml", """\
version: 1
name: large-body
vars:
  port: "0"
steps:
  - id: status-only
    run: 'true'
    verify:
      - http: {url: "http://127.0.0.1:${port}/model.bin", status: 200}
  - id: contains
    run: 'true'
    verify:
      - http: {url: "http://127.0.0.1:${port}/model.bin", body_contains: weights}
  - id: past-the-limit
    run: 'true'
    verify:
      - http: {url: "http://127.0.0.1:${port}/model.bin", body_contains: TAIL}
""")
        run, _ = self.d.apply(plan, "--var", "port=%d" % server.port, check=1)
        status = self.d.status_json(run)
        self.assertEqual(self.d.step(run, "status-only", status)["state"], "succeeded")
        self.assertEqual(self.d.step(run, "contains", status)["state"], "succeeded")
        tail = self.d.step(run, "past-the-limit", status)
        self.assertEqual(tail["state"], "failed")
        self.assertEqual(tail["reason"],
                         "verify failed: http GET http://127.0.0.1:%d/model.bin: status 200, "
                         "body does not contain 'TAIL' in its first 4MiB" % server.port)
        self.assertEqual(tail["evidence"]["status_code"], 200)
        self.assertTrue(tail["evidence"]["body_too_large"])


class TimeoutTest(DaemonTestCase):
    def test_timeout_kills_the_whole_process_group(self):
        marker = unique_marker("timeout")
        # The step's shell starts a grandchild that ignores SIGTERM (and so does its sleep), then
        # waits: only SIGKILL of the whole group, after the grace period, ends it.
        plan = self.d.write_plan("timeout.yaml", """\
version: 1
name: timeout-e2e
steps:
  - id: hang
    run: |
      sh -c 'trap "" TERM; echo grandchild up; sleep 300; : %s' &
      echo started
      wait
    timeout: 500ms
    grace: 300ms
  - id: later
    run: 'touch @DIR@/later-ran'
""" % marker)
        run, cp = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "failed")
        step = self.d.step(run, "hang", status)
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"], "timed out after 500ms")
        self.assertEqual(step["evidence"]["timeout_ms"], 500)
        self.assertEqual(self.d.step(run, "later", status)["state"], "pending")
        self.assertFalse(os.path.exists(plan.file("later-ran")))
        # The grandchild (and the sleep it runs) must be gone: killed as a group.
        wait_no_marker(marker)
        self.wait_no_step_processes()
        self.assert_events_consistent(run, status)


class FailOnTest(DaemonTestCase):
    def test_fail_on_line_fails_the_step_and_stops_it(self):
        marker = unique_marker("failon")
        plan = self.d.write_plan("failon.yaml", """\
version: 1
name: failon-e2e
steps:
  - id: boot
    run: |
      echo "loading weights"
      echo "ValueError: fp8e4nv data type is not supported on CUDA arch < 89"
      sleep 300
      : %s
    watch:
      fail_on: ['CUDA out of memory', 'is not supported']
    grace: 2s
""" % marker)
        run, cp = self.d.apply(plan, check=1)
        step = self.d.step(run, "boot")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "output matched fail_on 'is not supported': "
                         "ValueError: fp8e4nv data type is not supported on CUDA arch < 89")
        self.assertEqual(step["evidence"]["fail_on"], "is not supported")
        self.assertEqual(step["evidence"]["line"],
                         "ValueError: fp8e4nv data type is not supported on CUDA arch < 89")
        # The shell and its sleeper are gone.
        wait_no_marker(marker)
        self.wait_no_step_processes()
        logs = self.d.ctl("logs", run, "boot", check=0).stdout
        self.assertIn("is not supported", logs)
        self.assert_events_consistent(run)


class KernelFailOnTest(DaemonTestCase):
    """An Xid is the kernel's line, never the server's: `fail_on: vllm` follows the kernel's
    log. The journal is the journalctl stand-in's (tests/standins/journalctl: `-k` reads the
    simulated host's journal/kernel.jsonl), so that the test neither needs journald nor writes
    into this machine's kernel log."""

    start_daemon = False

    def test_an_xid_in_the_kernel_log_fails_the_step(self):
        sim = tempfile.mkdtemp(prefix="deployd-kernel-")
        self.addCleanup(shutil.rmtree, sim, ignore_errors=True)
        os.makedirs(os.path.join(sim, "journal"))
        env = {"PATH": STANDINS + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
               "DEPLOYD_SIM_DIR": sim}
        self.d.start(extra_env=env)
        marker = unique_marker("xid")
        plan = self.d.write_plan("xid.yaml", """\
version: 1
name: xid-e2e
steps:
  - id: serve
    run: 'echo serving; touch @DIR@/started; sleep 300; : %s'
    watch:
      fail_on: vllm
    grace: 2s
""" % marker)
        run, _ = self.d.apply(plan, wait=False)
        self.d.wait_step(run, "serve", ("running",))
        wait_until(lambda: os.path.exists(plan.file("started")), message="the step started")
        # The driver's line, as journald stores it from the kernel's ring buffer (after the
        # step's fire: journalctl --since the fire reads it whenever it starts).
        xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
        with open(os.path.join(sim, "journal", "kernel.jsonl"), "a") as f:
            f.write(json.dumps({"t": time.time(), "pid": 0, "id": "kernel", "unit": "kernel",
                                "msg": xid}) + "\n")
        self.d.wait_run(run)
        step = self.d.step(run, "serve")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"], "a GPU hardware fault (Xid): the GPU may need a reset or "
                                         "the host a reboot: kernel: " + xid)
        self.assertEqual(step["evidence"]["from"], "kernel")
        self.assertEqual(step["evidence"]["line"], xid)
        self.assertEqual(step["evidence"]["fail_on"], "NVRM: Xid|fallen off the bus")
        wait_no_marker(marker)
        # It was read where the kernel writes: journalctl -k, from the attempt's fire.
        with open(os.path.join(sim, "calls.log")) as f:
            calls = [json.loads(line) for line in f if line.strip()]
        kernel = [c for c in calls if c.get("tool") == "journalctl" and "-k" in c.get("argv", [])]
        self.assertTrue(kernel, calls)
        self.assertIn("-f", kernel[0]["argv"])
        self.assertIn("--since", kernel[0]["argv"])
        # The kernel's follower ends with the step: nothing of the simulated host is left but
        # deployd itself.
        wait_until(lambda: pids_with_marker("DEPLOYD_SIM_DIR=" + sim, where=("environ",))
                   == [self.d.proc.pid], message="journalctl -k to end with the step")


class RetryTest(DaemonTestCase):
    def test_retries_with_backoff_then_success(self):
        plan = self.d.write_plan("retry.yaml", """\
version: 1
name: retry-e2e
steps:
  - id: flaky
    run: |
      n=$(cat @DIR@/count 2>/dev/null || echo 0)
      n=$((n + 1))
      echo $n > @DIR@/count
      echo "attempt $n"
      [ $n -ge 3 ]
    retries: 3
    retry_delay: 200ms
""")
        run, cp = self.d.apply(plan, check=0)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "succeeded")
        step = self.d.step(run, "flaky", status)
        self.assertEqual(step["state"], "succeeded")
        self.assertEqual(step["attempts"], 3)
        with open(plan.file("count")) as f:
            self.assertEqual(f.read().strip(), "3")

        events = self.assert_events_consistent(run, status)
        flaky = [e for e in events if e["step_id"] == "flaky" and e["kind"] == "step.state"]
        self.assertEqual([e["state"] for e in flaky],
                         ["running", "pending", "running", "pending", "running", "succeeded"],
                         flaky)
        self.assertEqual([e["detail"] for e in flaky if e["state"] == "running"],
                         ["attempt 1", "attempt 2", "attempt 3"])
        self.assertEqual(flaky[1]["detail"], "exit status 1")
        # The retry delay is a lower bound: 200ms after the first failure, doubled after the
        # second (the event times are the daemon's commit times, in ms).
        self.assertGreaterEqual(flaky[2]["at_ms"] - flaky[1]["at_ms"], 200, flaky)
        self.assertGreaterEqual(flaky[4]["at_ms"] - flaky[3]["at_ms"], 400, flaky)

    def test_retries_exhausted_fail_the_step(self):
        plan = self.d.write_plan("retry-fail.yaml", """\
version: 1
name: retry-fail
steps:
  - id: hopeless
    run: 'echo try >> @DIR@/tries; exit 7'
    retries: 1
    retry_delay: 100ms
""")
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "hopeless")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["attempts"], 2)
        self.assertEqual(step["reason"], "exit status 7")
        with open(plan.file("tries")) as f:
            self.assertEqual(f.read(), "try\ntry\n")


class CancelTest(DaemonTestCase):
    def test_cancel_stops_the_step_and_the_rest_of_the_run(self):
        marker = unique_marker("cancel")
        plan = self.d.write_plan("cancel.yaml", """\
version: 1
name: cancel-e2e
steps:
  - id: quick
    run: 'true'
  - id: long
    run: [sh, -c, 'sleep 300; : %s']
  - id: after
    run: 'touch @DIR@/after-ran'
on_failure:
  - id: report
    run: 'touch @DIR@/report-ran'
""" % marker)
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "long", ("running",))
        wait_until(lambda: pids_with_marker(marker), message="the long step's process")

        cp = self.d.ctl("cancel", run, check=0)
        self.assertEqual(cp.stdout, "run %s cancelled\n" % run)

        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "cancelled")
        self.assertEqual(status["reason"], "cancelled by " + who())
        steps = {s["id"]: s for s in status["steps"]}
        self.assertEqual(steps["quick"]["state"], "succeeded")
        self.assertEqual(steps["long"]["state"], "cancelled")
        self.assertEqual(steps["long"]["reason"], "cancelled by " + who())
        self.assertEqual(steps["after"]["state"], "cancelled")
        self.assertEqual(steps["report"]["state"], "cancelled")
        wait_no_marker(marker)
        self.assertFalse(os.path.exists(plan.file("after-ran")))
        self.assertFalse(os.path.exists(plan.file("report-ran")))
        # status of a cancelled run exits 1.
        self.d.ctl("status", run, check=1)

        again = self.d.ctl("cancel", run, check=2)
        self.assertEqual(again.stdout, "")
        self.assertEqual(again.stderr,
                         "deployctl: error: run %s has already finished (cancelled)\n" % run)
        self.assert_events_consistent(run, status)

    def test_cancel_while_verifying_stops_the_probes(self):
        server = self.http_server()
        server.set("/health", 503, "not yet\n")
        plan = self.d.write_plan("cancel-verify.yaml", """\
version: 1
name: cancel-verify
vars:
  port: "0"
steps:
  - id: launch
    run: 'true'
    verify:
      - http: {url: "http://127.0.0.1:${port}/health"}
        every: 100ms
        within: 5m
""")
        run, _ = self.d.apply(plan, "--var", "port=%d" % server.port, wait=False, check=0)
        self.d.wait_step(run, "launch", ("verifying",))
        wait_until(lambda: server.hits.get("/health", 0) >= 2, message="the verify probes")
        self.d.ctl("cancel", run, check=0)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "cancelled")
        self.assertEqual(self.d.step(run, "launch", status)["state"], "cancelled")
        # No probe is made after the cancel has been answered (one may have been in flight).
        hits = server.hits.get("/health", 0)
        time.sleep(0.5)
        self.assertLessEqual(server.hits.get("/health", 0), hits + 1)
        self.assert_events_consistent(run, status)

    def test_cancel_of_unknown_run(self):
        cp = self.d.ctl("cancel", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")


if __name__ == "__main__":
    unittest.main()
