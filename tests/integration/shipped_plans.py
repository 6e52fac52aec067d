"""What the end-to-end tests of the shipped plans share, on the stand-ins
(tests/integration/test_pivot.py) and under real systemd (tests/systemd/test_plans.py): the
plans, the --var values that point them at a test's own files and shorten their timings, and
how a failed launch on a CUDA OOM is judged."""

import json
import os
import re
import socket
import urllib.error
import urllib.request

import harness

PLANS = os.path.join(harness.SOURCE_DIR, "plans")
TEARDOWN_PLAN = os.path.join(PLANS, "glm5-teardown.yaml")
KIMI_PLAN = os.path.join(PLANS, "kimi-k2.5-nvfp4.yaml")
REPO = "nvidia/Kimi-K2.5-NVFP4"
SHARDS = 8
SHARD_SIZE = 1 << 20
GGUF_NAME = "GLM-5-UD-Q4_K_XL.gguf"
# A pivot runs two plans with several vLLM starts: more than harness.CTL_TIMEOUT on a loaded box.
APPLY_TIMEOUT = 180.0


def http_get(url, timeout=5):
    """(status, body) or (None, error) when the connection fails."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
        return None, e


def regex_literal(text):
    """`text` as a pattern (RE2) matching itself (temporary paths: letters, digits, _-./)."""
    return re.sub(r"([.^$|?*+()\[\]{}\\])", r"\\\1", text)


class ShippedPlansMixin:
    """For a test case with self.d (a harness.Daemon or its systemd kind) and the test's own
    gguf_dir, venv, model_dir, token_file and port (as deployd sees them)."""

    def teardown_vars(self):
        """glm5-teardown.yaml's variables: the kill pattern narrowed to this test's GGUF (the
        plan's default would also match the stand-in servers of other tests on the machine)."""
        return {"weights": self.gguf_dir, "leftovers": "vllm serve " + regex_literal(self.gguf_dir),
                "port": str(self.port), "kill_grace": "5s", "gpus_stable_for": "500ms",
                "gpus_every": "200ms", "gpus_within": "30s"}

    def kimi_vars(self, **override):
        """kimi-k2.5-nvfp4.yaml's variables for 8 shards of 1 MiB and second-long timings."""
        v = {"old_weights": self.gguf_dir,
             "leftovers": "vllm serve " + regex_literal(self.gguf_dir),
             "kill_grace": "5s", "gpus_stable_for": "500ms", "gpus_within": "30s",
             "venv": self.venv, "vllm_min_version": "0.16.0",
             "model_dir": self.model_dir, "model_size": "8MiB", "disk_needed": "16MiB",
             "hf_token_file": self.token_file,
             "download_stall_after": "5s", "download_sample_every": "500ms",
             "weights_after": "200ms", "weights_every": "200ms", "download_within": "2m",
             "port": str(self.port), "ready_after": "200ms", "ready_every": "200ms",
             "ready_within": "2m",
             # A short benchmark; the stand-in streams 400 tokens/s per request. A second apply
             # compares with the first: on a loaded machine a 40 ms run varies more than the
             # plan's 10% (tests/integration/test_benchmark.py measures a rate precisely).
             "bench_requests": "4", "bench_concurrency": "2", "bench_prompt_tokens": "16",
             "bench_max_tokens": "32", "bench_min_tokens_per_s": "10", "bench_regression": "90%"}
        v.update(override)
        return v

    def apply(self, plan, variables, check=None):
        """`deployctl apply PLAN --var … --wait`; returns (run id, CompletedProcess)."""
        args = ["apply", plan]
        for k, v in sorted(variables.items()):
            args += ["--var", "%s=%s" % (k, v)]
        args.append("--wait")
        cp = self.d.ctl(*args, check=check, timeout=APPLY_TIMEOUT)
        lines = cp.stdout.splitlines()
        self.assertTrue(lines, "apply printed no run id (exit %d)\n%s" % (cp.returncode, cp.stderr))
        return lines[0], cp

    def assert_succeeded(self, run, cp):
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "succeeded",
                         "run %s: %s\n--- apply\n%s%s\n--- deployd log\n%s"
                         % (run, json.dumps(status, indent=1), cp.stdout, cp.stderr,
                            self.d.log()[-4000:]))
        return status


def assert_launch_failed_on_oom(test, run):
    """The run failed at `launch`, on its first attempt, on vLLM's CUDA OOM line; returns the
    run's status and the step's fire and failure events."""
    status = test.d.status_json(run)
    test.assertEqual(status["state"], "failed")
    launch = test.d.step(run, "launch", status)
    test.assertEqual(launch["state"], "failed")
    test.assertIn("CUDA out of memory: a foreign process holds GPU memory", launch["reason"])
    test.assertIn("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", launch["reason"])
    test.assertEqual(launch["attempts"], 1)
    events = test.assert_events_consistent(run, status)
    steps = [e for e in events if e["step_id"] == "launch" and e["kind"] == "step.state"]
    fired = [e for e in steps if e["state"] == "running"][0]
    failed = [e for e in steps if e["state"] == "failed"][0]
    return status, fired, failed
