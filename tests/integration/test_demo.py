"""The shipped plans: the demo passes end to end, and every plan under plans/ validates."""

import glob
import os
import re
import shutil
import socket
import subprocess
import time
import unittest

from harness import DEPLOYCTL_BIN, DEPLOYD_BIN, SOURCE_DIR, SYSTEMD_VARS, TAG_VAR, kill_marked, unique_marker

DEMO_PORTS = (18700, 18701)  # fixed in plans/demo.yaml and tests/demo/run-demo.sh


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
        cp = subprocess.run((prefix or []) + ["sh", script, build_dir], capture_output=True,
                            text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
        output = cp.stdout + cp.stderr
        self.assertEqual(cp.returncode, 0, output)
        self.assertIn("succeeded", cp.stdout, output)
        self.assertRegex(cp.stdout, r"run demo-\d+ succeeded", output)
        self.assertIn("8388608 bytes served", cp.stdout, output)


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
