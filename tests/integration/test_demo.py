"""The shipped plans: the demo passes end to end, and every plan under plans/ validates."""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from harness import DEPLOYCTL_BIN, DEPLOYD_BIN, SOURCE_DIR, SYSTEMD_VARS, TAG_VAR, kill_marked, unique_marker

# Fixed in plans/demo.yaml and tests/demo/run-demo.sh: the old server, the new one, the hub.
DEMO_PORTS = (18700, 18701, 18702)


def port_in_use(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


def private_network_prefix():
    """A command prefix that runs its command in a fresh network namespace with only a loopback
    (root, unshare and ip needed), or None where that is not possible."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return None
    probe = subprocess.run(["unshare", "--net", "ip", "link", "set", "lo", "up"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        return None
    return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


class DemoTest(unittest.TestCase):
    def test_demo_plan_passes(self):
        # The demo's ports are fixed: another demo running on this machine (another checkout's
        # test run, say) would make this one fail for reasons of its own. Where possible the
        # demo gets a network namespace of its own; elsewhere, wait a while for the ports.
        prefix = private_network_prefix()
        if prefix is None:
            deadline = time.monotonic() + 60
            while any(port_in_use(p) for p in DEMO_PORTS):
                if time.monotonic() >= deadline:
                    self.skipTest("ports %s are in use by another process" % (DEMO_PORTS,))
                time.sleep(0.5)
        build_dir = os.path.dirname(os.path.dirname(os.path.abspath(DEPLOYD_BIN)))
        script = os.path.join(SOURCE_DIR, "tests", "demo", "run-demo.sh")
        env = dict(os.environ)
        for name in SYSTEMD_VARS + ("DEPLOYD_SOCKET",):
            env.pop(name, None)
        # Whatever the script leaves behind (it cleans up after itself, unless it is killed)
        # carries this tag and is killed afterwards.
        env[TAG_VAR] = unique_marker("demo")
        self.addCleanup(kill_marked, env[TAG_VAR], ("environ",))
        tmp = tempfile.mkdtemp(prefix="deployd-e2e-demo-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        status_file = os.path.join(tmp, "status.json")
        env["DEPLOYD_DEMO_STATUS"] = status_file
        cp = subprocess.run((prefix or []) + ["sh", script, build_dir], capture_output=True,
                            text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
        out = cp.stdout
        output = cp.stdout + cp.stderr
        self.assertEqual(cp.returncode, 0, output)
        self.assertRegex(out, r"run demo-\d+ succeeded", output)
        with open(status_file) as f:
            steps = {s["id"]: s for s in json.load(f)["steps"]}
        for step in ("stop-old-server", "remove-old-weights", "download-weights", "start-server",
                     "smoke-test"):
            self.assertEqual(steps[step]["state"], "succeeded", (step, output))

        # kill: the old server and, with its process group, its worker; then no DEMO:: process
        # of this demo is left and the port is free (the step's verify).
        self.assertRegex(out, r"SIGTERM pid \d+ \(DEMO::OldServer\), group \d+", output)
        self.assertRegex(out, r"SIGTERM pid \d+ \(DEMO::Worker_0\), group \d+", output)
        self.assertIn("2 processes stopped by SIGTERM", out, output)

        # remove: the old weights (2 shards and an index) are gone.
        self.assertRegex(out, r"removed /tmp/deployd-demo-\w+/site/models/old-3b: 3 files, "
                              r"1 directory, 2\.0MiB freed", output)

        # The hub stalled once; deployd noticed after stall_after, stopped the attempt, and the
        # second attempt resumed the partial shard and completed the weights.
        self.assertEqual(out.count("stalling demo-7b/model-00003-of-00004.safetensors"), 1, output)
        stalls = re.findall(r"download-weights +pending +no progress for 3s \(bytes under "
                            r"/tmp/deployd-demo-\w+/site/models/demo-7b stuck at [\d.]+MiB\)",
                            out)
        self.assertEqual(len(stalls), 1, output)
        self.assertRegex(out, r"download-weights +running +attempt 2\n", output)
        self.assertNotIn("attempt 3", out, output)
        self.assertEqual(steps["download-weights"]["attempts"], 2, output)
        self.assertIn("model-00003-of-00004.safetensors: resuming at 8.0MiB", out, output)
        self.assertEqual(out.count("model-00004-of-00004.safetensors: 16.0MiB"), 1, output)

        # Readiness: the server answered /health and /v1/models once it had loaded the model,
        # then the smoke test's completion.
        self.assertIn("loaded 4 shards (4 tensors); serving on 127.0.0.1:18701", out, output)
        self.assertIn('"GET /v1/models HTTP/1.1" 200', out, output)
        self.assertIn("Hello from demo-7b, deployed and verified by deployd.", out, output)

        # The benchmark: streamed completions measured, the quality smoke passed, the figure
        # printed; the demo's state is fresh, so its run sets the baseline.
        evidence = steps["smoke-test"]["evidence"]
        figures = evidence["benchmark"]
        self.assertEqual((figures["requests"], figures["errors"], figures["output_tokens"]), (4, 0, 80))
        self.assertTrue(evidence["quality"]["passed"], output)
        self.assertIsNone(evidence["baseline"]["run"], output)
        self.assertIn("== the new server streams 40 tokens/s to each request; the benchmark measured "
                      "%.1f tokens/s (4 requests, concurrency 2, max_tokens 20, prompt_tokens 16)"
                      % figures["tokens_per_s"], out, output)
        self.assertRegex(out, r"smoke-test +succeeded +benchmark http://127\.0\.0\.1:18701/v1/"
                              r"completions: \d+\.\d tokens/s, .*this run sets the baseline\n", output)


class ShippedPlansTest(unittest.TestCase):
    def test_every_shipped_plan_validates(self):
        plans = sorted(glob.glob(os.path.join(SOURCE_DIR, "plans", "*.yaml")))
        self.assertTrue(plans, "no plans under %s/plans" % SOURCE_DIR)
        for plan in plans:
            with self.subTest(plan=os.path.basename(plan)):
                cp = subprocess.run([DEPLOYCTL_BIN, "validate", plan], capture_output=True,
                                    text=True, timeout=60, stdin=subprocess.DEVNULL)
                self.assertEqual(cp.returncode, 0, cp.stderr)
                self.assertRegex(cp.stdout, r"^%s: ok \(plan [A-Za-z0-9._-]+, \d+ steps\)\n$"
                                 % re.escape(plan))
                self.assertEqual(cp.stderr, "")


if __name__ == "__main__":
    unittest.main()
