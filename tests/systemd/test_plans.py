"""The shipped plans on a systemd host: plans/glm5-teardown.yaml, then plans/kimi-k2.5-nvfp4.yaml,
unchanged, run by deployd.service under real systemd 252 with the real systemctl and journalctl
(the units are real units, their cgroups and journals systemd's own). Only what cannot run here
is a stand-in (tests/standins/: nvidia-smi, hf, uv, vllm; named fakes), on deployd's PATH and,
through drop-ins, in the units' environment. tests/integration/test_pivot.py runs the same
plans on the systemctl and journalctl stand-ins; this is the same pivot where systemd is real.

Scenarios: the pivot (glm5.service serving the GGUF on GPUs 0-3 and the orphaned engine and
workers of a SIGKILLed server on GPUs 4-5, then Kimi written, enabled and started by deployd);
and a CUDA OOM at launch failing the step on the journal line, long before the readiness
deadline.
"""

import glob
import json
import os
import sys

from systemd_case import SOURCE_INSIDE, SystemdTestCase, harness, main
from shipped_plans import (GGUF_NAME, KIMI_PLAN, REPO, SHARD_SIZE, SHARDS, TEARDOWN_PLAN,
                           ShippedPlansMixin, assert_launch_failed_on_oom, http_get)

STANDINS = os.path.join(harness.SOURCE_DIR, "tests", "standins")
sys.path.insert(0, STANDINS)
import simhost  # noqa: E402  (set-up and clean-up helpers)

VLLM_INSIDE = SOURCE_INSIDE + "/tests/standins/vllm"
NVIDIA_SMI_INSIDE = SOURCE_INSIDE + "/tests/standins/nvidia-smi"


class PlansTestCase(ShippedPlansMixin, SystemdTestCase):
    UNITS = ("glm5.service", "kimi.service", "e2e-crashed.service")

    def setUp(self):
        super().setUp()
        d = self.d
        self.sim = d.path("sim")          # as the host sees it
        self.sim_inside = d.inside + "/sim"
        self.addCleanup(self.kill_sim)
        for unit in self.UNITS:
            self.unit_cleanup(unit)
            self.addCleanup(d.sh, "rm", "-rf", "/etc/systemd/system/%s.d" % unit, check=False)
        self.port = harness.free_port()
        self.gguf_dir = d.inside + "/shared/glm5-gguf"
        self.model_dir = d.inside + "/shared/kimi-k2.5-nvfp4"
        self.venv = d.inside + "/venv"
        self.token_file = d.inside + "/hf-token"
        os.makedirs(d.path("shared", "glm5-gguf"))
        with open(d.path("shared", "glm5-gguf", GGUF_NAME), "wb") as f:
            f.write(b"GGUF" + b"\x03\x00\x00\x00" + os.urandom(256 * 1024))
        os.makedirs(d.path("venv", "bin"))
        os.symlink("/usr/bin/python3", d.path("venv", "bin", "python"))
        os.symlink(VLLM_INSIDE, d.path("venv", "bin", "vllm"))
        with open(d.path("hf-token"), "w") as f:
            f.write("hf_e2eTok%s\n" % os.urandom(12).hex())
        os.chmod(d.path("hf-token"), 0o600)
        os.makedirs(self.sim, exist_ok=True)
        simhost.make_repo(self.sim, REPO, files=[{"name": "media_utils.py", "size": 12000}],
                          shards=SHARDS, shard_size=SHARD_SIZE)
        self.flag("vllm-load-seconds", "0.5")
        # The units deployd writes get the simulated host through a drop-in, as an operator
        # would give a unit what its plan does not.
        self.sim_env = {"DEPLOYD_SIM_DIR": self.sim_inside,
                        "PYTHONPATH": SOURCE_INSIDE + "/tests/standins/pylib"}
        self.drop_in("kimi.service")

    def flag(self, name, content=""):
        with open(os.path.join(self.sim, name), "w") as f:
            f.write(content)

    def drop_in(self, unit):
        lines = ["[Service]"] + ["Environment=%s=%s" % kv for kv in sorted(self.sim_env.items())]
        self.d.sh("mkdir", "-p", "/etc/systemd/system/%s.d" % unit)
        self.d.sh("tee", "/etc/systemd/system/%s.d/sim.conf" % unit, input="\n".join(lines) + "\n")

    def kill_sim(self):
        for unit in self.UNITS:
            self.d.systemctl("kill", "--signal=SIGKILL", unit, check=False)
        self.assertEqual(simhost.kill_sim_processes(self.sim_inside), [],
                         "processes of the simulated host survived the cleanup")

    def install(self):
        config = "unit_dir: /etc/systemd/system\nallowed_roots: [%s/shared]\n" % self.d.inside
        self.d.install(config=config, environment={"DEPLOYD_NVML": "off"})

    def wait_health(self, port):
        harness.wait_until(lambda: http_get("http://127.0.0.1:%d/health" % port)[0] == 200,
                           timeout=60, message="/health 200 on port %d" % port)

    def gpu_apps(self):
        cp = self.d.sh("env", "DEPLOYD_SIM_DIR=" + self.sim_inside, NVIDIA_SMI_INSIDE,
                       "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                       "--format=csv,noheader,nounits")
        return [[c.strip() for c in line.split(",")] for line in cp.stdout.splitlines()
                if line.strip()]

    def start_glm5_unit(self):
        """glm5.service as the operator had it: vLLM serving the merged GGUF on GPUs 0-3."""
        env = " ".join("%s=%s" % kv for kv in sorted(self.sim_env.items()))
        self.d.sh("tee", "/etc/systemd/system/glm5.service", input="""\
[Unit]
Description=GLM-5 UD-Q4_K_XL (vLLM, GGUF_NAME)

[Service]
Type=exec
Environment=CUDA_VISIBLE_DEVICES=0,1,2,3 CUDA_DEVICE_ORDER=PCI_BUS_ID %s
ExecStart=%s serve %s/%s --served-model-name glm-5 --tensor-parallel-size 4 --port %d
KillMode=mixed
TimeoutStopSec=60
Restart=on-failure

[Install]
WantedBy=multi-user.target
""" % (env, VLLM_INSIDE, self.gguf_dir, GGUF_NAME, self.port))
        self.d.systemctl("daemon-reload")
        self.d.systemctl("enable", "--now", "glm5.service")
        self.wait_health(self.port)

    def crash_a_server(self):
        """The orphans of a SIGKILLed vLLM on GPUs 4-5: its engine and workers live on, holding
        their GPU memory, in the cgroup of a unit systemd calls dead (KillMode=process)."""
        port = harness.free_port()
        argv = ["systemd-run", "--unit=e2e-crashed", "-p", "KillMode=process",
                "-E", "CUDA_VISIBLE_DEVICES=4,5"]
        for kv in sorted(self.sim_env.items()):
            argv += ["-E", "%s=%s" % kv]
        self.d.sh(*argv, VLLM_INSIDE, "serve", "%s/%s" % (self.gguf_dir, GGUF_NAME),
                  "--tensor-parallel-size", "2", "--port", str(port))
        self.wait_health(port)
        self.d.systemctl("kill", "--signal=SIGKILL", "--kill-whom=main", "e2e-crashed.service")
        harness.wait_until(lambda: http_get("http://127.0.0.1:%d/health" % port)[0] is None,
                           timeout=30, message="the crashed server's API gone")
        gpus = (simhost.gpu_uuid(4), simhost.gpu_uuid(5))
        return sorted(int(a[1]) for a in self.gpu_apps() if a[0] in gpus)


class PivotTest(PlansTestCase):
    def test_glm5_to_kimi_pivot_under_systemd(self):
        self.install()
        self.start_glm5_unit()
        orphans = self.crash_a_server()
        self.assertEqual(len(orphans), 3)  # VLLM::EngineCore and two workers
        self.assertEqual(len(self.gpu_apps()), 5 + 3, "GPUs 0-3 and the orphans on 4-5")

        run, cp = self.apply(TEARDOWN_PLAN, self.teardown_vars())
        self.assert_succeeded(run, cp)
        self.assertEqual(self.d.show("glm5.service", "ActiveState", "UnitFileState"),
                         {"ActiveState": "inactive", "UnitFileState": "disabled"})
        self.assertIn("glm5.service is stopped: inactive (dead), no process left in its cgroup",
                      self.d.ctl("logs", run, "stop-glm5", check=0).stdout)
        self.assertEqual(self.gpu_apps(), [])
        gpus_log = self.d.ctl("logs", run, "free-gpus", check=0).stdout
        for pid in orphans:
            self.assertIn("pid %d (VLLM::" % pid, gpus_log)
        self.assertFalse(os.path.exists(self.d.path("shared", "glm5-gguf")))

        run, cp = self.apply(KIMI_PLAN, self.kimi_vars())
        status = self.assert_succeeded(run, cp)
        steps = {s["id"]: s["state"] for s in status["steps"] if s["phase"] == "main"}
        self.assertEqual(list(steps.values()), ["succeeded"] * 8, steps)
        self.assertIn("tokens/s", self.d.step(run, "benchmark", status)["reason"])
        shards = sorted(glob.glob(self.d.path("shared", "kimi-k2.5-nvfp4", "*.safetensors")))
        self.assertEqual(len(shards), SHARDS)
        # The unit deployd wrote, as systemd has it: running, enabled, in its own cgroup.
        props = self.d.show("kimi.service", "ActiveState", "SubState", "UnitFileState",
                            "FragmentPath", "KillMode", "ControlGroup")
        self.assertEqual(props, {"ActiveState": "active", "SubState": "running",
                                 "UnitFileState": "enabled",
                                 "FragmentPath": "/etc/systemd/system/kimi.service",
                                 "KillMode": "mixed",
                                 "ControlGroup": "/system.slice/kimi.service"})
        models = json.loads(http_get("http://127.0.0.1:%d/v1/models" % self.port)[1])
        self.assertEqual([(m["id"], m["root"]) for m in models["data"]],
                         [("Kimi-K2.5-NVFP4", self.model_dir)])
        self.assertEqual(sorted(a[2] for a in self.gpu_apps()),
                         ["VLLM::EngineCore"] + ["VLLM::Worker_TP%d" % i for i in range(4)])
        # The server's own lines reached the step's log through the journal.
        self.assertIn("Starting vLLM API server", self.d.ctl("logs", run, "launch", check=0).stdout)

        # Applied again, the plan converges without touching the running server.
        main_pid = self.d.show("kimi.service", "MainPID")["MainPID"]
        run2, cp = self.apply(KIMI_PLAN, self.kimi_vars())
        status = self.assert_succeeded(run2, cp)
        self.assertEqual(self.d.step(run2, "launch", status)["state"], "succeeded")
        self.assertEqual(self.d.show("kimi.service", "MainPID")["MainPID"], main_pid)


class LaunchOomTest(PlansTestCase):
    def test_cuda_oom_fails_the_launch_on_the_journal_line(self):
        # Loading lasts 12s; the OOM comes at 30% of the shards, after the unit has settled.
        self.flag("vllm-load-seconds", "12")
        self.flag("vllm-oom")
        self.install()
        run, cp = self.apply(KIMI_PLAN, self.kimi_vars(ready_within="10m"), check=1)
        status, fired, failed = assert_launch_failed_on_oom(self, run)
        # The line as journald has it, of the invocation deployd started.
        said = [e for e in self.d.journal_entries("kimi.service")
                if "CUDA out of memory" in str(e.get("MESSAGE"))]
        self.assertTrue(said, "no OOM line in the journal")
        t_line = int(said[0]["__REALTIME_TIMESTAMP"]) / 1000.0
        print("\nOOM under systemd: journal line -> launch failed: %.0f ms (fired -> failed: "
              "%.1f s; ready_within 10m)" % (failed["at_ms"] - t_line,
                                            (failed["at_ms"] - fired["at_ms"]) / 1000.0),
              file=sys.stderr)
        report = self.d.ctl("logs", run, "report", check=0).stdout
        self.assertIn("kimi.service: ", report)
        self.assertIn("glm5.service: inactive", report)


if __name__ == "__main__":
    main()
