"""A `service` step that starts its unit follows the unit's journal while it verifies: a fatal
line of the server fails the step at once (not when the readiness check runs out), also after
deployd itself was restarted in the middle of the verify. On the simulated host: the
systemctl and journalctl stand-ins (tests/standins/, named fakes) are first on PATH."""

import os
import shutil
import sys
import tempfile
import unittest

from harness import DaemonTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.normpath(os.path.join(HERE, "..", "standins"))
sys.path.insert(0, STANDINS)
sys.dont_write_bytecode = True
import simhost  # noqa: E402

# The "server": says it is loading, waits until the test creates GO, then dies as vLLM does
# when its engine cannot start.
SERVER = r"""
import os, sys, time
go = sys.argv[1]
print("Loading safetensors checkpoint shards:   0% Completed | 0/4", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
print("RuntimeError: Engine core initialization failed. See root cause above.", flush=True)
sys.exit(1)
"""


class ServiceStepTest(DaemonTestCase):
    start_daemon = False

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="deployd-service-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.sim = os.path.join(self.root, "sim")
        os.makedirs(os.path.join(self.sim, "units"))
        self.addCleanup(simhost.kill_sim_processes, self.sim)
        config = os.path.join(self.root, "deployd.yaml")
        with open(config, "w") as f:
            f.write("unit_dir: %s\n" % os.path.join(self.sim, "units"))
        self.d.extra_args = ["--config", config]
        env = simhost.sim_env(self.sim)
        env["DEPLOYD_CGROUP_ROOT"] = os.path.join(self.sim, "cgroup")
        self.env = env
        self.d.start(extra_env=env)
        self.go = os.path.join(self.root, "go")
        server = os.path.join(self.root, "server.py")
        with open(server, "w") as f:
            f.write(SERVER)
        self.plan = self.d.write_plan("launch.yaml", """\
version: 1
name: launch
steps:
  - id: launch
    service:
      unit: model.service
      state: started
      exec: [%s, %s, %s]
    watch:
      fail_on: vllm
    verify:
      - tcp: 127.0.0.1:9
        every: 200ms
        within: 10m
""" % (sys.executable, server, self.go))

    ENGINE_DIED = ("the engine died: the root cause is in the lines before (`deployctl logs`): "
                   "RuntimeError: Engine core initialization failed. See root cause above.")
    MAIN_DIED = ("the server's main process died (the lines before say why): model.service: "
                 "Main process exited, code=exited, status=1/FAILURE")

    def assert_failed_on_the_journal(self, run, reasons=(ENGINE_DIED,)):
        # Failed within a minute, with a verify that would wait 10m: the journal said so.
        status = self.d.wait_run(run, timeout=60)
        step = self.d.step(run, "launch", status)
        self.assertEqual(step["state"], "failed", status)
        self.assertIn(step["reason"], reasons)
        logs = self.d.ctl("logs", run, "launch", check=0).stdout
        self.assertIn("Loading safetensors checkpoint shards", logs)

    def test_a_fatal_journal_line_fails_the_step_while_it_verifies(self):
        run, _ = self.d.apply(self.plan, wait=False, check=0)
        self.d.wait_step(run, "launch", ("verifying",))
        open(self.go, "w").close()
        self.assert_failed_on_the_journal(run)

    def test_the_journal_is_followed_again_after_a_restart_of_deployd(self):
        run, _ = self.d.apply(self.plan, wait=False, check=0)
        self.d.wait_step(run, "launch", ("verifying",))
        self.d.kill9()
        self.d.start(extra_env=self.env)
        self.d.wait_step(run, "launch", ("verifying",))
        open(self.go, "w").close()
        # The new journalctl may start reading just after the server's own last line: then
        # systemd's line about its exit is the one that fails the step.
        self.assert_failed_on_the_journal(run, (self.ENGINE_DIED, self.MAIN_DIED))


if __name__ == "__main__":
    unittest.main()
