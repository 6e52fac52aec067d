"""The seed's pivot, end to end on the simulated host: the shipped plans plans/glm5-teardown.yaml
and plans/kimi-k2.5-nvfp4.yaml run unchanged through the real deployd and deployctl, with the
stand-ins of tests/standins (systemctl, journalctl, nvidia-smi, hf, uv, vllm) first on PATH.
Every path and port is pointed into a temporary directory with --var; deployd's configuration
points its unit directory into the simulated host and allows removals only under the temporary
"/shared".

Scenarios: the whole pivot (a GLM-5 unit, a server started by hand and the orphaned workers of
a SIGKILLed one, all on the same simulated 8-GPU host); a download that stalls once and resumes;
`hf` missing (preflight fails, nothing changed); a CUDA OOM at launch (fails on the journal line,
long before the readiness deadline). And `deployctl validate` on every plan in plans/.

The kill patterns are narrowed with --var to this test's own files: the plans' default
('^VLLM::|vllm serve|...') would also match the stand-in servers of other tests running on the
same machine. Orphaned workers (titled VLLM::Worker_TPn, nothing of this test in their command
line) are therefore found the way the plans' backstop finds them: by the GPU memory they hold.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also when run from the repo root
import harness  # noqa: E402
from harness import DaemonTestCase, wait_until  # noqa: E402

STANDINS = os.path.join(harness.SOURCE_DIR, "tests", "standins")
sys.path.insert(0, STANDINS)
sys.dont_write_bytecode = True
import simhost  # noqa: E402  (set-up and clean-up helpers)
from shipped_plans import (GGUF_NAME, KIMI_PLAN, PLANS, REPO, SHARD_SIZE, SHARDS,  # noqa: E402
                           TEARDOWN_PLAN, ShippedPlansMixin, assert_launch_failed_on_oom, http_get)


class PivotTestCase(ShippedPlansMixin, DaemonTestCase):
    start_daemon = False

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="deployd-pivot-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.sim = os.path.join(self.root, "sim")
        os.makedirs(os.path.join(self.sim, "units"))
        self.addCleanup(self.kill_sim)
        self.popens = []
        self.addCleanup(self.reap_popens)
        self.shared = os.path.join(self.root, "shared")
        self.gguf_dir = os.path.join(self.shared, "glm5-gguf")
        self.gguf = os.path.join(self.gguf_dir, GGUF_NAME)
        self.model_dir = os.path.join(self.shared, "kimi-k2.5-nvfp4")
        self.venv = os.path.join(self.root, "venv")
        self.token_file = os.path.join(self.root, "hf-token")
        self.token = "hf_e2eTok" + os.urandom(12).hex()
        self.port = harness.free_port()
        self.make_host()
        config = os.path.join(self.root, "deployd.yaml")
        with open(config, "w") as f:
            f.write("unit_dir: %s\nallowed_roots: [%s]\n" % (os.path.join(self.sim, "units"), self.shared))
        self.d.extra_args = ["--config", config]

    # ---- the simulated host

    def make_host(self):
        os.makedirs(self.gguf_dir)
        with open(self.gguf, "wb") as f:  # the merged file vLLM served (magic + a little body)
            f.write(b"GGUF" + b"\x03\x00\x00\x00" + os.urandom(256 * 1024))
        for i in range(1, 3):  # split parts llama-gguf-split merged, left beside it
            with open(os.path.join(self.gguf_dir, "GLM-5-UD-Q4_K_XL-%05d-of-00010.gguf" % i), "wb") as f:
                f.write(b"GGUF" + os.urandom(64 * 1024))
        os.makedirs(os.path.join(self.venv, "bin"))
        os.symlink(sys.executable, os.path.join(self.venv, "bin", "python"))
        os.symlink(os.path.join(STANDINS, "vllm"), os.path.join(self.venv, "bin", "vllm"))
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        simhost.make_repo(self.sim, REPO, files=[{"name": "kimi_k25_vision_processing.py", "size": 3000},
                                                 {"name": "media_utils.py", "size": 12000}],
                          shards=SHARDS, shard_size=SHARD_SIZE)
        self.flag("vllm-load-seconds", "0.5")

    def flag(self, name, content=""):
        with open(os.path.join(self.sim, name), "w") as f:
            f.write(content)

    def kill_sim(self):
        left = simhost.kill_sim_processes(self.sim)
        self.assertEqual(left, [], "processes of the simulated host survived the cleanup")

    def reap_popens(self):
        for p in self.popens:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            p.wait(10)

    def env(self, exclude=()):
        env = simhost.sim_env(self.sim, exclude=exclude)
        env["DEPLOYD_NVML"] = "off"  # GPU state from the nvidia-smi stand-in, never a real driver
        env["DEPLOYD_CGROUP_ROOT"] = os.path.join(self.sim, "cgroup")  # the stand-in's cgroups
        return env

    def launch_daemon(self, exclude=()):
        self.d.start(extra_env=self.env(exclude))

    def tool(self, *argv, check=0):
        cp = subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=60,
                            cwd=self.sim, stdin=subprocess.DEVNULL)
        if check is not None:
            self.assertEqual(cp.returncode, check, "%s: rc %d\n%s%s" % (argv, cp.returncode, cp.stdout, cp.stderr))
        return cp

    def show(self, unit, *props):
        cp = self.tool("systemctl", "show", unit, "-p", ",".join(props))
        return dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)

    def gpu_apps(self):
        cp = self.tool("nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                       "--format=csv,noheader,nounits")
        return [[c.strip() for c in line.split(",")] for line in cp.stdout.splitlines() if line.strip()]

    def calls(self, tool=None):
        return simhost.read_calls(self.sim, tool)

    def wait_health(self, port):
        wait_until(lambda: http_get("http://127.0.0.1:%d/health" % port)[0] == 200,
                   timeout=60, message="/health 200 on port %d" % port)

    def start_glm5_unit(self, tp=4):
        """glm5.service as the operator had it: vLLM serving the merged GGUF on GPUs 0-3."""
        with open(os.path.join(self.sim, "units", "glm5.service"), "w") as f:
            f.write("""\
[Unit]
Description=GLM-5 UD-Q4_K_XL (vLLM, GGUF)

[Service]
Type=exec
Environment=CUDA_VISIBLE_DEVICES=0,1,2,3 CUDA_DEVICE_ORDER=PCI_BUS_ID
ExecStart=%s serve %s --served-model-name glm-5 --tensor-parallel-size %d --port %d
KillMode=mixed
TimeoutStopSec=60
Restart=on-failure

[Install]
WantedBy=multi-user.target
""" % (os.path.join(STANDINS, "vllm"), self.gguf, tp, self.port))
        self.tool("systemctl", "daemon-reload")
        self.tool("systemctl", "enable", "glm5.service")
        self.tool("systemctl", "start", "glm5.service")
        self.wait_health(self.port)

    def start_by_hand(self, gpus, tp):
        """`nohup vllm serve GGUF &` on `gpus`, in its own session; returns (Popen, port)."""
        port = harness.free_port()
        env = self.env()
        env["CUDA_VISIBLE_DEVICES"] = gpus
        p = subprocess.Popen([os.path.join(STANDINS, "vllm"), "serve", self.gguf, "--tensor-parallel-size",
                              str(tp), "--port", str(port)], env=env, cwd=self.sim, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.popens.append(p)
        self.wait_health(port)
        return p, port

    # ---- the plans

    def logs(self, run, step):
        return self.d.ctl("logs", run, step, check=0).stdout

    def assert_no_secret_anywhere(self):
        needle = self.token.encode()
        for top in (self.d.dir, self.sim):
            for dirpath, _, files in os.walk(top):
                for name in files:
                    path = os.path.join(dirpath, name)
                    try:
                        with open(path, "rb") as f:
                            data = f.read()
                    except OSError:
                        continue
                    self.assertNotIn(needle, data, "the HF token leaked into %s" % path)


class PivotTest(PivotTestCase):
    def test_glm5_to_kimi_pivot(self):
        # The host as the operator left it: glm5.service on GPUs 0-3, a server started by hand
        # on GPUs 6-7, and the orphaned engine and workers of a SIGKILLed one on GPUs 4-5.
        self.start_glm5_unit()
        stray, _ = self.start_by_hand("6,7", 2)
        crashed, _ = self.start_by_hand("4,5", 2)
        orphans = sorted(int(a[1]) for a in self.gpu_apps()
                         if a[0] in (simhost.gpu_uuid(4), simhost.gpu_uuid(5)))
        self.assertEqual(len(orphans), 3)  # VLLM::EngineCore and two workers
        os.kill(crashed.pid, signal.SIGKILL)
        crashed.wait(10)
        self.assertEqual(len(self.gpu_apps()), 5 + 3 + 3, "GPUs 0-3, 6-7 and the orphans on 4-5")
        self.launch_daemon()

        run, cp = self.apply(TEARDOWN_PLAN, self.teardown_vars())
        self.assert_succeeded(run, cp)
        self.assertEqual(self.show("glm5.service", "ActiveState", "UnitFileState"),
                         {"ActiveState": "inactive", "UnitFileState": "disabled"})
        self.assertEqual(self.gpu_apps(), [])
        self.assertIsNotNone(stray.poll(), "the server started by hand is still running")
        self.assertFalse(os.path.exists(self.gguf_dir))
        kill_log = self.logs(run, "kill-leftovers")
        self.assertIn("SIGTERM pid %d" % stray.pid, kill_log)
        gpus_log = self.logs(run, "free-gpus")
        for pid in orphans:
            self.assertIn("pid %d (VLLM::" % pid, gpus_log)
        self.assertIn("removed %s: 3 files, 1 directory, " % self.gguf_dir, self.logs(run, "remove-gguf"))
        self.assert_events_consistent(run)

        # The GGUF directory is gone, so a second GLM-5 leftover cannot come back; Kimi now.
        run, cp = self.apply(KIMI_PLAN, self.kimi_vars())
        status = self.assert_succeeded(run, cp)
        steps = {s["id"]: s for s in status["steps"] if s["phase"] == "main"}
        self.assertEqual([s["state"] for s in steps.values()], ["succeeded"] * 8, json.dumps(status, indent=1))
        self.assertEqual(self.d.step(run, "report", status)["state"], "pending")  # on_failure did not run
        self.assertEqual(steps["download-weights"]["attempts"], 1)
        self.assert_events_consistent(run, status)

        # The weights: every shard whole (checked here independently of deployd).
        shards = sorted(glob.glob(os.path.join(self.model_dir, "*.safetensors")))
        self.assertEqual(len(shards), SHARDS)
        for shard in shards:
            self.assertEqual(os.path.getsize(shard), simhost.safetensors_expected_size(shard))
        self.assertEqual(glob.glob(os.path.join(self.model_dir, ".cache", "huggingface", "download", "*.incomplete")), [])
        # The server: the unit deployd wrote, running, enabled, serving the new model.
        st = self.show("kimi.service", "ActiveState", "SubState", "UnitFileState")
        self.assertEqual(st, {"ActiveState": "active", "SubState": "running", "UnitFileState": "enabled"})
        with open(os.path.join(self.sim, "units", "kimi.service")) as f:
            unit = f.read()
        self.assertIn("ExecStart=%s serve %s --served-model-name Kimi-K2.5-NVFP4 --tensor-parallel-size 4 "
                      "--pipeline-parallel-size 2 --port %d"
                      % (os.path.join(self.venv, "bin", "vllm"), self.model_dir, self.port), unit)
        self.assertIn("Environment=CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", unit)
        self.assertEqual(http_get("http://127.0.0.1:%d/health" % self.port)[0], 200)
        models = json.loads(http_get("http://127.0.0.1:%d/v1/models" % self.port)[1])
        self.assertEqual([(m["id"], m["root"]) for m in models["data"]], [("Kimi-K2.5-NVFP4", self.model_dir)])
        self.assertEqual(json.loads(http_get("http://127.0.0.1:%d/version" % self.port)[1]), {"version": "0.16.0"})
        self.assertEqual(sorted(a[2] for a in self.gpu_apps()),
                         ["VLLM::EngineCore"] + ["VLLM::Worker_TP%d" % i for i in range(4)])

        # What deployd ran: systemd verbs, uv into the venv, hf with --local-dir and the token.
        systemctl = [c["argv"] for c in self.calls("systemctl")]
        for argv in (["stop", "glm5.service"], ["disable", "glm5.service"], ["daemon-reload"],
                     ["enable", "kimi.service"], ["start", "kimi.service"]):
            self.assertIn(argv, systemctl)
        self.assertLess(systemctl.index(["daemon-reload"], systemctl.index(["stop", "glm5.service"])),
                        systemctl.index(["start", "kimi.service"]))
        self.assertEqual([c["argv"] for c in self.calls("uv")],
                         [["pip", "install", "--python", os.path.join(self.venv, "bin", "python"), "--upgrade",
                           "vllm", "--torch-backend=auto"]])
        downloads = [c for c in self.calls("hf") if c["argv"][:1] == ["download"]]
        self.assertEqual(len(downloads), 1)
        self.assertEqual(downloads[0]["argv"][:4], ["download", REPO, "--local-dir", self.model_dir])
        self.assertIs(downloads[0]["hf_token"], True)
        self.assertNotIn("huggingface-cli", {c["tool"] for c in self.calls()})
        self.assert_no_secret_anywhere()
        # The new server, benchmarked: streamed tokens counted from vLLM's usage, a sensible
        # answer, and the first run of the plan sets the baseline.
        bench = steps["benchmark"]["evidence"]
        self.assertEqual((bench["benchmark"]["requests"], bench["benchmark"]["errors"],
                          bench["benchmark"]["output_tokens"], bench["benchmark"]["token_count"]),
                         (4, 0, 4 * 32, "usage"))
        self.assertGreater(bench["benchmark"]["tokens_per_s"], 10)
        self.assertTrue(bench["quality"]["passed"])
        self.assertIsNone(bench["baseline"]["run"])
        self.assertIn("0.16.0", self.logs(run, "benchmark"))

        # Applied again, the plan converges without touching the running server.
        starts = systemctl.count(["start", "kimi.service"])
        run2, cp = self.apply(KIMI_PLAN, self.kimi_vars())
        status = self.assert_succeeded(run2, cp)
        self.assertEqual({s["id"]: s["state"] for s in status["steps"] if s["phase"] == "main"},
                         {"stop-glm5": "succeeded", "kill-leftovers": "skipped", "free-gpus": "skipped",
                          "remove-gguf": "succeeded", "upgrade-vllm": "skipped", "download-weights": "skipped",
                          "launch": "succeeded", "benchmark": "succeeded"})
        self.assertEqual(self.d.step(run2, "benchmark", status)["evidence"]["baseline"]["run"], run)
        # history: the version the upgrade's check saw (the second run skipped the upgrade).
        history = json.loads(self.d.ctl("history", "kimi-k2.5-nvfp4", "--json", check=0).stdout)
        self.assertEqual([(r["run"], r["version"]) for r in history["runs"]], [(run2, None), (run, "0.16.0")])
        self.assertEqual([c["argv"] for c in self.calls("systemctl")].count(["start", "kimi.service"]), starts)
        self.assertEqual(len(self.calls("uv")), 1)


class DownloadStallTest(PivotTestCase):
    def test_download_stalls_once_and_resumes(self):
        # The Xet stall: hf stops writing mid-shard and hangs with the process alive.
        self.flag("hf-stall-once")
        self.launch_daemon()
        run, cp = self.apply(KIMI_PLAN, self.kimi_vars(download_stall_after="2s"))
        status = self.assert_succeeded(run, cp)
        step = self.d.step(run, "download-weights", status)
        self.assertEqual(step["attempts"], 2)
        self.assertFalse(os.path.exists(os.path.join(self.sim, "hf-stall-once")), "the stall never happened")
        events = self.assert_events_consistent(run, status)
        stalls = [e for e in events if e["step_id"] == "download-weights" and e["kind"] == "step.state"
                  and e["state"] == "pending" and e["detail"].startswith("no progress for 2s")]
        self.assertEqual(len(stalls), 1, json.dumps(events, indent=1))
        downloads = [c for c in self.calls("hf") if c["argv"][:1] == ["download"]]
        self.assertEqual(len(downloads), 2)
        self.assertRegex(self.logs(run, "download-weights"),
                         r"Resuming download of 'model-00001-of-0000%d\.safetensors' from byte \d+" % SHARDS)
        for shard in glob.glob(os.path.join(self.model_dir, "*.safetensors")):
            self.assertEqual(os.path.getsize(shard), simhost.safetensors_expected_size(shard))
        self.assertEqual(self.show("kimi.service", "ActiveState")["ActiveState"], "active")


class HfMissingTest(PivotTestCase):
    def test_preflight_fails_and_nothing_changes(self):
        self.start_glm5_unit(tp=2)
        self.launch_daemon(exclude=("hf",))
        before = len(self.calls())
        run, cp = self.apply(KIMI_PLAN, self.kimi_vars(), check=1)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "failed")
        self.assertEqual({s["state"] for s in status["steps"]}, {"pending"}, json.dumps(status, indent=1))
        # (on_failure runs only after a step failed; preflight changed nothing to report on)
        self.assertEqual(status["reason"], "preflight failed: command hf: neither hf nor huggingface-cli is on PATH")
        # The old server still serves; deployd stopped nothing, installed nothing, fetched nothing.
        self.assertEqual(self.show("glm5.service", "ActiveState")["ActiveState"], "active")
        self.assertEqual(http_get("http://127.0.0.1:%d/health" % self.port)[0], 200)
        self.assertTrue(os.path.exists(self.gguf))
        self.assertFalse(os.path.exists(self.model_dir))
        later = [c for c in self.calls()[before:]]
        self.assertFalse([c for c in later if c["tool"] == "systemctl" and c["argv"][:1] in (["stop"], ["disable"])],
                         later)
        self.assertFalse([c for c in later if c["tool"] in ("uv", "hf")], later)


class LaunchOomTest(PivotTestCase):
    def test_cuda_oom_fails_the_launch_on_the_journal_line(self):
        # Loading lasts 12s; the OOM comes at 30% of the shards, after the unit has settled.
        self.flag("vllm-load-seconds", "12")
        self.flag("vllm-oom")
        self.launch_daemon()
        run, cp = self.apply(KIMI_PLAN, self.kimi_vars(ready_within="10m"), check=1)
        status, started, failed = assert_launch_failed_on_oom(self, run)
        # The measured latency: the line in the journal -> the step's failure event.
        with open(os.path.join(self.sim, "journal", "kimi.service.jsonl")) as f:
            entries = [json.loads(line) for line in f if line.strip()]
        oom_at = [e for e in entries if "CUDA out of memory" in e.get("msg", "")]
        self.assertTrue(oom_at, "no OOM line in the journal")
        t_line = float(oom_at[0]["t"])
        print("\nOOM: journal line -> launch failed: %.0f ms (launch fired -> failed: %.1f s; ready_within 10m)"
              % (failed["at_ms"] - t_line * 1000, (failed["at_ms"] - started["at_ms"]) / 1000.0), file=sys.stderr)
        # on_failure reported the host's state, and changed nothing.
        report = self.logs(run, "report")
        self.assertIn("kimi.service:", report)
        self.assertIn("glm5.service:", report)
        self.assertIn("%s: removed" % self.gguf_dir, report)


class PlansValidateTest(unittest.TestCase):
    def test_every_plan_validates(self):
        plans = sorted(glob.glob(os.path.join(PLANS, "*.yaml")))
        self.assertIn(TEARDOWN_PLAN, plans)
        self.assertIn(KIMI_PLAN, plans)
        for plan in plans:
            cp = subprocess.run([harness.DEPLOYCTL_BIN, "validate", plan], capture_output=True, text=True,
                                timeout=60, stdin=subprocess.DEVNULL)
            self.assertEqual(cp.returncode, 0, "%s:\n%s%s" % (plan, cp.stdout, cp.stderr))


if __name__ == "__main__":
    unittest.main()
