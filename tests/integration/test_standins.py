"""The test stand-ins in tests/standins (systemctl, journalctl, nvidia-smi, hf, uv, vllm and the
`vllm` Python package), exercised as black boxes on PATH the way deployd's end-to-end tests use
them. Needs neither the deployd binaries nor a GPU, systemd, network or Hugging Face.

Each test gets its own simulated host (a temporary DEPLOYD_SIM_DIR); every process the stand-ins
start carries DEPLOYD_SIM_DIR in its environment, so the cleanup finds and kills them all,
orphans included, also when a test fails.
"""

import glob
import json
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.normpath(os.path.join(HERE, "..", "standins"))
sys.path.insert(0, STANDINS)
sys.dont_write_bytecode = True
import simhost  # noqa: E402  (set-up and clean-up helpers only; behaviour is checked from outside)

TIMEOUT = 20.0


def wait_until(pred, timeout=TIMEOUT, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=5):
    """(status, body bytes), or (None, error) when the connection fails (refused while loading)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
        return None, e


def safetensors_ok(path):
    """Independent of the stand-ins' code: the size equals 8 + header length + max data offset."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    return os.path.getsize(path) == 8 + n + end


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class SimHostCase(unittest.TestCase):
    def setUp(self):
        self.sim = tempfile.mkdtemp(prefix="deployd-sim-")
        self.addCleanup(shutil.rmtree, self.sim, ignore_errors=True)
        self.addCleanup(self.kill_everything)
        self.env = simhost.sim_env(self.sim)

    def kill_everything(self):
        left = simhost.kill_sim_processes(self.sim)
        self.assertEqual(left, [], "processes of the simulated host survived the cleanup")

    def flag(self, name, content=""):
        with open(os.path.join(self.sim, name), "w") as f:
            f.write(content)

    def run_tool(self, *argv, check=None, env=None, timeout=TIMEOUT, **kw):
        cp = subprocess.run(list(argv), env=env or self.env, capture_output=True, text=True,
                            timeout=timeout, cwd=kw.pop("cwd", self.sim), **kw)
        if check is not None:
            self.assertEqual(cp.returncode, check, "%s: rc %d\nstdout: %s\nstderr: %s"
                             % (" ".join(argv), cp.returncode, cp.stdout, cp.stderr))
        return cp

    def show(self, unit, *props):
        cp = self.run_tool("systemctl", "show", unit, "-p", ",".join(props), check=0)
        return dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)

    def gpus(self):
        cp = self.run_tool("nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total",
                           "--format=csv,noheader,nounits", check=0)
        rows = [[c.strip() for c in line.split(",")] for line in cp.stdout.splitlines()]
        return {int(r[0]): {"uuid": r[1], "name": r[2], "used": r[3], "total": r[4]} for r in rows}

    def apps(self):
        cp = self.run_tool("nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                           "--format=csv,noheader,nounits", check=0)
        return [[c.strip() for c in line.split(",")] for line in cp.stdout.splitlines() if line.strip()]

    def journal(self, unit):
        return self.run_tool("journalctl", "-u", unit, "-o", "cat", "--no-pager", check=0).stdout

    def model_dir(self, shards=2):
        d = os.path.join(self.sim, "models", "kimi")
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["DeepseekV3ForCausalLM"], "max_position_embeddings": 262144}, f)
        for i in range(shards):
            body = json.dumps({"w%d" % i: {"dtype": "U8", "shape": [1000], "data_offsets": [0, 1000]}}).encode()
            with open(os.path.join(d, "model-%05d-of-%05d.safetensors" % (i + 1, shards)), "wb") as f:
                f.write(struct.pack("<Q", len(body)) + body + b"\0" * 1000)
        return d

    def write_unit(self, name, body):
        os.makedirs(os.path.join(self.sim, "units"), exist_ok=True)
        with open(os.path.join(self.sim, "units", name), "w") as f:
            f.write(body)

    def vllm_unit(self, name="kimi.service", port=None, tp=4, kill_mode="mixed", stop_timeout=10,
                  restart="no", model=None, extra=""):
        port = port or free_port()
        model = model or self.model_dir()
        self.write_unit(name, """\
[Unit]
Description=Kimi K2.5 (test)

[Service]
Type=exec
Environment=CUDA_DEVICE_ORDER=PCI_BUS_ID HF_HUB_OFFLINE=1
ExecStart=%s serve %s --served-model-name kimi \\
    --tensor-parallel-size %d --port %d %s
KillMode=%s
TimeoutStopSec=%s
Restart=%s

[Install]
WantedBy=multi-user.target
""" % (os.path.join(STANDINS, "vllm"), model, tp, port, extra, kill_mode, stop_timeout, restart))
        return port, model

    def wait_ready(self, port):
        return wait_until(lambda: http("GET", "http://127.0.0.1:%d/health" % port)[0] == 200,
                          what="/health 200")


class StandinFilesTest(unittest.TestCase):
    def test_each_stand_in_says_what_it_is(self):
        for tool in simhost.TOOLS:
            path = os.path.join(STANDINS, tool)
            self.assertTrue(os.access(path, os.X_OK), tool)
            with open(path) as f:
                head = f.read(400)
            self.assertTrue(head.startswith("#!/usr/bin/env python3\n# TEST STAND-IN for"), tool)
        self.assertFalse(os.path.exists(os.path.join(STANDINS, "huggingface-cli")),
                         "huggingface-cli must stay absent: the real CLI was renamed to hf")
        with open(os.path.join(STANDINS, "pylib", "vllm", "__init__.py")) as f:
            self.assertTrue(f.read().startswith("# TEST STAND-IN"))


class ServiceTest(SimHostCase):
    def setUp(self):
        super().setUp()
        self.flag("vllm-load-seconds", "0.4")

    def test_vllm_unit_lifecycle(self):
        self.flag("vllm-load-seconds", "1")  # long enough to see the refusal
        port, model = self.vllm_unit()
        self.run_tool("systemctl", "daemon-reload", check=0)
        self.run_tool("systemctl", "enable", "kimi.service", check=0)
        self.assertEqual(self.run_tool("systemctl", "is-enabled", "kimi", check=0).stdout.strip(), "enabled")
        self.run_tool("systemctl", "start", "kimi.service", check=0)
        st = self.show("kimi.service", "ActiveState", "SubState", "MainPID", "ExecMainStatus")
        self.assertEqual((st["ActiveState"], st["SubState"], st["ExecMainStatus"]), ("active", "running", "0"))
        main = int(st["MainPID"])
        self.assertTrue(alive(main))
        # Loading: the port refuses connections (an open port is not readiness).
        status, err = http("GET", "http://127.0.0.1:%d/health" % port)
        self.assertIsNone(status, "answered while loading")
        self.assertIn("refused", str(err).lower())
        self.wait_ready(port)
        status, body = http("GET", "http://127.0.0.1:%d/v1/models" % port)
        self.assertEqual(status, 200)
        data = json.loads(body)["data"]
        self.assertEqual([(m["id"], m["root"]) for m in data], [("kimi", model)])
        status, body = http("POST", "http://127.0.0.1:%d/v1/completions" % port,
                            {"model": "kimi", "prompt": "hi", "max_tokens": 1})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 1)
        status, body = http("POST", "http://127.0.0.1:%d/v1/chat/completions" % port,
                            {"model": "kimi", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
        self.assertEqual(status, 200)
        self.assertEqual(http("GET", "http://127.0.0.1:%d/version" % port),
                         (200, json.dumps({"version": "0.15.1"}).encode()))
        # GPU memory on GPUs 0-3, held by the renamed workers; 4-7 idle.
        gpus = self.gpus()
        self.assertEqual(len(gpus), 8)
        self.assertEqual(gpus[0]["total"], "143771")
        for i in range(4):
            self.assertGreater(int(gpus[i]["used"]), 100000, gpus[i])
        for i in range(4, 8):
            self.assertLess(int(gpus[i]["used"]), 100, gpus[i])
        names = sorted(a[2] for a in self.apps())
        self.assertEqual(names, ["VLLM::EngineCore"] + ["VLLM::Worker_TP%d" % i for i in range(4)])
        # The simulated cgroup holds the main process.
        with open(os.path.join(self.sim, "cgroup", "system.slice", "kimi.service", "cgroup.procs")) as f:
            self.assertIn(main, [int(x) for x in f.read().split()])
        log = self.journal("kimi")
        for line in ("Started kimi.service - Kimi K2.5 (test).", "Application startup complete.",
                     "Loading safetensors checkpoint shards: 100% Completed | 2/2"):
            self.assertIn(line, log)
        # Stop: SIGTERM to the main process, graceful shutdown of the whole tree.
        self.run_tool("systemctl", "stop", "kimi.service", check=0)
        st = self.show("kimi.service", "ActiveState", "SubState", "MainPID", "Result")
        self.assertEqual(st, {"ActiveState": "inactive", "SubState": "dead", "MainPID": "0", "Result": "success"})
        self.assertEqual(self.run_tool("systemctl", "is-active", "kimi").returncode, 3)
        self.assertEqual(self.apps(), [])
        self.assertFalse(alive(main))
        self.assertIsNone(http("GET", "http://127.0.0.1:%d/health" % port)[0])
        log = self.journal("kimi")
        self.assertIn("Stopping kimi.service - Kimi K2.5 (test)...", log)
        self.assertIn("Stopped kimi.service - Kimi K2.5 (test).", log)
        calls = [c["argv"][0] for c in simhost.read_calls(self.sim, "systemctl")]
        self.assertEqual(calls[:3], ["daemon-reload", "enable", "is-enabled"])

    def test_sigkill_of_main_leaves_orphan_workers_holding_gpus(self):
        port, _ = self.vllm_unit()
        self.run_tool("systemctl", "start", "kimi", check=0)
        self.wait_ready(port)
        main = int(self.show("kimi", "MainPID")["MainPID"])
        workers = [int(a[1]) for a in self.apps() if a[2].startswith("VLLM::Worker_TP")]
        self.assertEqual(len(workers), 4)
        os.kill(main, signal.SIGKILL)
        wait_until(lambda: self.show("kimi", "ActiveState")["ActiveState"] == "failed", what="unit failed")
        st = self.show("kimi", "Result", "ExecMainCode", "ExecMainStatus")
        self.assertEqual(st, {"Result": "signal", "ExecMainCode": "2", "ExecMainStatus": "9"})
        self.assertIn("kimi.service: Main process exited, code=killed, status=9/KILL", self.journal("kimi"))
        # The port frees at once, but the orphans keep their GPU memory.
        self.assertIsNone(http("GET", "http://127.0.0.1:%d/health" % port)[0])
        held = {int(a[1]): a for a in self.apps()}
        for pid in workers:
            self.assertTrue(alive(pid))
            self.assertEqual(comm(pid), "VLLM::Worker_TP")  # comm keeps 15 characters
            self.assertIn(pid, held)
            self.assertGreater(int(held[pid][3]), 100000)
        with open("/proc/%d/cmdline" % workers[0], "rb") as f:
            self.assertTrue(f.read().startswith(b"VLLM::Worker_TP"))
        # A new start fails: the GPUs are not free.
        self.run_tool("systemctl", "reset-failed", "kimi", check=0)
        self.run_tool("systemctl", "start", "kimi", check=0)
        wait_until(lambda: self.show("kimi", "ActiveState")["ActiveState"] == "failed", what="second start fails")
        self.assertRegex(self.journal("kimi"), r"Free memory on device cuda:0 \([\d.]+/[\d.]+ GiB\) on startup "
                                               r"is less than desired GPU memory utilization")
        # Killing the orphans (SIGTERM: they exit) frees the GPUs.
        for pid in [int(a[1]) for a in self.apps()]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # listed a moment ago, gone since (an engine follows its workers out)
        wait_until(lambda: self.apps() == [], what="GPUs free")
        self.assertTrue(all(int(g["used"]) < 100 for g in self.gpus().values()))

    def test_stop_timeout_kills_the_group_but_not_workers_that_left_it(self):
        port, _ = self.vllm_unit(stop_timeout=1)
        self.flag("vllm-ignore-sigterm")
        self.run_tool("systemctl", "start", "kimi", check=0)
        self.wait_ready(port)
        t0 = time.monotonic()
        self.run_tool("systemctl", "stop", "kimi", check=0)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        st = self.show("kimi", "ActiveState", "Result", "ExecMainStatus")
        self.assertEqual(st, {"ActiveState": "failed", "Result": "timeout", "ExecMainStatus": "9"})
        log = self.journal("kimi")
        self.assertIn("kimi.service: State 'stop-sigterm' timed out. Killing.", log)
        self.assertIn("with signal SIGKILL.", log)
        self.assertEqual(len([a for a in self.apps() if a[2].startswith("VLLM::Worker_TP")]), 4)

    def test_launch_failures_from_flags(self):
        # CUDA OOM during loading: the unit fails within a couple of seconds, the line is in the journal.
        port, _ = self.vllm_unit()
        self.flag("vllm-oom")
        t0 = time.monotonic()
        self.run_tool("systemctl", "start", "kimi", check=0)
        wait_until(lambda: self.show("kimi", "ActiveState")["ActiveState"] == "failed", what="OOM failure")
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(self.show("kimi", "ExecMainStatus", "Result"), {"ExecMainStatus": "1", "Result": "exit-code"})
        log = self.journal("kimi")
        self.assertIn("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", log)
        self.assertIn("kimi.service: Main process exited, code=exited, status=1/FAILURE", log)
        wait_until(lambda: self.apps() == [], what="failed server released the GPUs")
        os.unlink(os.path.join(self.sim, "vllm-oom"))
        # FP8 KV cache unsupported on this GPU.
        self.flag("vllm-kv-fp8-unsupported")
        self.run_tool("systemctl", "reset-failed", check=0)
        self.run_tool("systemctl", "start", "kimi", check=0)
        wait_until(lambda: self.show("kimi", "ActiveState")["ActiveState"] == "failed", what="fp8 failure")
        self.assertIn("type fp8e4nv not supported in this architecture", self.journal("kimi"))

    def test_port_taken_for_real(self):
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        self.addCleanup(holder.close)
        self.vllm_unit(port=holder.getsockname()[1], tp=1)
        self.run_tool("systemctl", "start", "kimi", check=0)
        wait_until(lambda: self.show("kimi", "ActiveState")["ActiveState"] == "failed", what="bind failure")
        self.assertIn("OSError: [Errno 98] Address already in use", self.journal("kimi"))

    def test_gguf_model_serves(self):
        gguf = os.path.join(self.sim, "glm5-gguf", "GLM-5-UD-Q4_K_XL.gguf")
        os.makedirs(os.path.dirname(gguf))
        with open(gguf, "wb") as f:
            f.write(b"GGUF" + b"\0" * 4096)
        port, _ = self.vllm_unit(name="glm5.service", tp=1, model=gguf)
        self.run_tool("systemctl", "start", "glm5.service", check=0)
        self.wait_ready(port)
        status, body = http("GET", "http://127.0.0.1:%d/v1/models" % port)
        self.assertEqual(json.loads(body)["data"][0]["root"], gguf)
        self.assertEqual(sorted(a[2] for a in self.apps()), ["VLLM::EngineCore", "VLLM::Worker_TP0"])

    def test_restart_always_and_start_limit(self):
        self.write_unit("flaky.service", """\
[Unit]
StartLimitBurst=3
StartLimitIntervalSec=60

[Service]
Type=exec
ExecStart=/bin/sh -c "echo attempt; exit 3"
Restart=always
RestartSec=0.1
""")
        self.run_tool("systemctl", "start", "flaky", check=0)
        wait_until(lambda: self.show("flaky", "Result")["Result"] == "start-limit-hit", what="start limit")
        st = self.show("flaky", "ActiveState", "NRestarts", "ExecMainStatus")
        self.assertEqual(st, {"ActiveState": "failed", "NRestarts": "3", "ExecMainStatus": "3"})
        log = self.journal("flaky")
        self.assertEqual(log.count("attempt"), 3)
        self.assertIn("flaky.service: Scheduled restart job, restart counter is at 2.", log)
        self.assertIn("flaky.service: Start request repeated too quickly.", log)

    def test_missing_binary_unknown_unit_and_reload_warning(self):
        self.write_unit("broken.service", "[Service]\nType=exec\nExecStart=/nonexistent/vllm serve /m\n")
        cp = self.run_tool("systemctl", "start", "broken.service", check=1)
        self.assertIn("Job for broken.service failed because the control process exited with error code.", cp.stderr)
        self.assertEqual(self.show("broken.service", "ExecMainStatus", "Result"),
                         {"ExecMainStatus": "203", "Result": "exit-code"})
        self.assertIn("status=203/EXEC", self.journal("broken"))
        cp = self.run_tool("systemctl", "start", "nope.service", check=5)
        self.assertEqual(cp.stderr, "Failed to start nope.service: Unit nope.service not found.\n")
        cp = self.run_tool("systemctl", "is-active", "nope.service", check=3)
        self.assertEqual(cp.stdout, "inactive\n")
        self.assertEqual(self.show("nope.service", "LoadState"), {"LoadState": "not-found"})
        # A unit file changed after it was loaded: the warning, and NeedDaemonReload until reloaded.
        self.write_unit("broken.service", "[Service]\nType=exec\nExecStart=/bin/sleep 30\n")
        self.assertEqual(self.show("broken.service", "NeedDaemonReload"), {"NeedDaemonReload": "yes"})
        self.run_tool("systemctl", "daemon-reload", check=0)
        self.run_tool("systemctl", "reset-failed", check=0)
        cp = self.run_tool("systemctl", "start", "broken.service", check=0)
        self.assertNotIn("daemon-reload", cp.stderr)
        self.assertEqual(self.show("broken.service", "ActiveState")["ActiveState"], "active")
        cp = self.run_tool("systemctl", "cat", "broken.service", check=0)
        self.assertIn("ExecStart=/bin/sleep 30", cp.stdout)
        self.run_tool("systemctl", "stop", "broken.service", check=0)
        self.assertEqual(self.show("broken.service", "ActiveState")["ActiveState"], "inactive")

    def test_journalctl_follow_and_tail(self):
        self.write_unit("talk.service", """\
[Service]
Type=exec
ExecStart=/bin/sh -c 'for i in 1 2 3 4 5; do echo line $i; sleep 0.1; done; sleep 30'
""")
        follower = subprocess.Popen(["journalctl", "-u", "talk.service", "-f", "-o", "cat", "-n", "0"],
                                    env=self.env, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.addCleanup(lambda: (follower.kill(), follower.wait(), follower.stdout.close()))
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x.rstrip("\n")) for x in follower.stdout], daemon=True).start()
        self.run_tool("systemctl", "start", "talk.service", check=0)
        seen = [lines.get(timeout=TIMEOUT) for _ in range(6)]
        self.assertEqual(seen, ["Started talk.service.", "line 1", "line 2", "line 3", "line 4", "line 5"])
        cp = self.run_tool("journalctl", "-u", "talk", "-n", "2", "-o", "cat", check=0)
        self.assertEqual(cp.stdout, "line 4\nline 5\n")
        cp = self.run_tool("journalctl", "-u", "talk", "-n", "1", check=0)
        self.assertRegex(cp.stdout, r"^\w{3} \d\d \d\d:\d\d:\d\d simhost sh\[\d+\]: line 5\n$")
        cp = self.run_tool("journalctl", "-u", "quiet.service", check=0)
        self.assertEqual(cp.stdout, "-- No entries --\n")
        # -o json with the fields deployd asks for: each entry names its invocation, as
        # _SYSTEMD_INVOCATION_ID (the service's lines) or INVOCATION_ID (systemd's).
        invocation = self.run_tool("systemctl", "show", "talk", "-p", "InvocationID", "--value",
                                   check=0).stdout.strip()
        self.assertRegex(invocation, r"^[0-9a-f]{32}$")
        cp = self.run_tool("journalctl", "-u", "talk", "-o", "json", "-a", "-q", "--since", "@0",
                           "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,INVOCATION_ID", check=0)
        entries = [json.loads(line) for line in cp.stdout.splitlines()]
        self.assertEqual(entries[0], {"__REALTIME_TIMESTAMP": entries[0]["__REALTIME_TIMESTAMP"],
                                      "MESSAGE": "Started talk.service.",
                                      "INVOCATION_ID": invocation})
        self.assertEqual([(e["MESSAGE"], e["_SYSTEMD_INVOCATION_ID"]) for e in entries[1:]],
                         [("line %d" % i, invocation) for i in range(1, 6)])
        # --until with -n: the last entries before that time.
        cp = self.run_tool("journalctl", "-u", "talk", "-o", "cat", "-n", "1", "--until",
                           "@%d.%06d" % divmod(int(entries[2]["__REALTIME_TIMESTAMP"]), 10**6),
                           check=0)
        self.assertEqual(cp.stdout, "line 2\n")


class NvidiaSmiTest(SimHostCase):
    def test_formats_na_and_no_driver(self):
        with open(os.path.join(self.sim, "gpus.json"), "w") as f:
            json.dump({"count": 2, "gpus": [{"index": 1, "memory_used_na": True}]}, f)
        holder = subprocess.Popen(["sleep", "30"], env=self.env)
        self.addCleanup(lambda: (holder.kill(), holder.wait()))
        os.makedirs(os.path.join(self.sim, "gpu-procs"))
        with open(os.path.join(self.sim, "gpu-procs", "%d.json" % holder.pid), "w") as f:
            json.dump({"pid": holder.pid, "gpus": [0], "mib": 70000}, f)
        with open(os.path.join(self.sim, "gpu-procs", "999999999.json"), "w") as f:
            json.dump({"pid": 999999999, "gpus": [0], "mib": 5000}, f)  # dead: ignored
        cp = self.run_tool("nvidia-smi", "--query-gpu=index,memory.used,memory.total", "--format=csv", check=0)
        self.assertEqual(cp.stdout.splitlines(), ["index, memory.used [MiB], memory.total [MiB]",
                                                  "0, 70004 MiB, 143771 MiB", "1, [N/A], [N/A]"])
        apps = self.apps()
        self.assertEqual(len(apps), 1)
        self.assertEqual(apps[0][1:], [str(holder.pid), "sleep", "70000"])
        self.assertEqual(apps[0][0], self.gpus()[0]["uuid"])
        cp = self.run_tool("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv", check=0)
        self.assertEqual(cp.stdout, "pid, used_gpu_memory [MiB]\n%d, 70000 MiB\n" % holder.pid)
        self.assertRegex(self.run_tool("nvidia-smi", "-L", check=0).stdout,
                         r"^GPU 0: NVIDIA H200 \(UUID: GPU-[0-9a-f-]{36}\)\nGPU 1: ")
        holder.kill()
        holder.wait()
        self.assertEqual(self.apps(), [])
        cp = self.run_tool("nvidia-smi", "--query-gpu=index,bogus", "--format=csv", check=2)
        self.assertIn('Field "bogus" is not a valid field to query.', cp.stdout)
        self.flag("nvidia-smi-no-driver")
        cp = self.run_tool("nvidia-smi", "-L", check=9)
        self.assertIn("couldn't communicate with the NVIDIA driver", cp.stdout)


class HfTest(SimHostCase):
    REPO = "nvidia/Kimi-K2.5-NVFP4"

    def setUp(self):
        super().setUp()
        simhost.make_repo(self.sim, self.REPO, files=[{"name": "media_utils.py", "size": 5000}],
                          shards=4, shard_size=2 * 1024 * 1024)
        self.dest = os.path.join(self.sim, "shared", "kimi-k2.5-nvfp4")

    def check_complete(self):
        names = sorted(os.listdir(self.dest))
        self.assertEqual(names, [".cache", "config.json", "media_utils.py"] +
                         ["model-%05d-of-00004.safetensors" % i for i in range(1, 5)] +
                         ["model.safetensors.index.json"])
        for shard in glob.glob(os.path.join(self.dest, "*.safetensors")):
            self.assertTrue(safetensors_ok(shard), shard)
            self.assertEqual(os.path.getsize(shard), 2 * 1024 * 1024)
        with open(os.path.join(self.dest, "model.safetensors.index.json")) as f:
            index = json.load(f)
        self.assertEqual(set(index["weight_map"].values()),
                         {"model-%05d-of-00004.safetensors" % i for i in range(1, 5)})
        self.assertEqual(glob.glob(os.path.join(self.dest, ".cache", "huggingface", "download", "*.incomplete")), [])

    def test_download_complete(self):
        cp = self.run_tool("hf", "download", self.REPO, "--local-dir", self.dest, check=0)
        self.assertEqual(cp.stdout.splitlines()[-1], self.dest)
        self.check_complete()
        segments = [s for s in cp.stderr.replace("\r", "\n").split("\n") if s.strip()]
        self.assertIn("Fetching 7 files: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 7/7", cp.stderr)
        self.assertTrue(any(s.startswith("Downloading 'media_utils.py' to '%s/.cache/huggingface/download/"
                                         "tMK7rvKZJIdqDfs7XZ9XAwWWNGY=." % self.dest) and s.endswith(".incomplete'")
                            for s in segments), segments)
        self.assertIn("Download complete. Moving file to %s/config.json" % self.dest, segments)
        with open(os.path.join(self.dest, ".cache", "huggingface", "download", "config.json.metadata")) as f:
            self.assertEqual(len(f.read().splitlines()), 3)
        # A second run has nothing to do; the CLI's version and the calls log.
        t0 = time.monotonic()
        self.run_tool("hf", "download", self.REPO, "--local-dir", self.dest, "--quiet", check=0)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertRegex(self.run_tool("hf", "version", check=0).stdout, r"^huggingface_hub version: \d+\.\d+\.\d+\n$")
        self.assertIsNone(shutil.which("huggingface-cli", path=self.env["PATH"].split(os.pathsep)[0]))
        calls = simhost.read_calls(self.sim, "hf")
        self.assertEqual(calls[0]["argv"], ["download", self.REPO, "--local-dir", self.dest])
        self.assertIs(calls[0]["hf_token"], False)

    def test_stall_once_then_resume(self):
        self.flag("hf-stall-once")
        self.flag("hf-speed", str(8 * 1024 * 1024))
        p = subprocess.Popen(["hf", "download", self.REPO, "--local-dir", self.dest], env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        wait_until(lambda: not os.path.exists(os.path.join(self.sim, "hf-stall-once")), what="the stall")
        inc = glob.glob(os.path.join(self.dest, ".cache", "huggingface", "download", "*.incomplete"))
        self.assertEqual(len(inc), 1)
        size = os.path.getsize(inc[0])
        time.sleep(0.3)
        self.assertEqual(os.path.getsize(inc[0]), size, "still growing after the stall")
        self.assertIsNone(p.poll(), "a stalled download stays alive")
        self.assertGreater(size, 0)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        cp = self.run_tool("hf", "download", self.REPO, "--local-dir", self.dest, check=0)
        self.assertIn("Resuming download of 'model-00001-of-00004.safetensors' from byte %d" % size, cp.stderr)
        self.check_complete()

    def test_gated_no_space_and_token_never_logged(self):
        self.flag("hf-gated")
        cp = self.run_tool("hf", "download", self.REPO, "--local-dir", self.dest, check=1)
        self.assertIn("GatedRepoError: 401 Client Error", cp.stderr)
        self.assertIn("Cannot access gated repo for url https://huggingface.co/api/models/%s" % self.REPO, cp.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dest, "config.json")))
        env = dict(self.env, HF_TOKEN="hf_secretvalue123")
        self.run_tool("hf", "download", self.REPO, "--local-dir", self.dest, "--include", "*.json", env=env, check=0)
        self.assertTrue(os.path.exists(os.path.join(self.dest, "config.json")))
        self.assertFalse(glob.glob(os.path.join(self.dest, "*.safetensors")))
        self.run_tool("hf", "auth", "whoami", "--token", "hf_othersecret", check=0)
        with open(os.path.join(self.sim, "calls.log")) as f:
            log = f.read()
        self.assertNotIn("secret", log)
        self.assertEqual([c["hf_token"] for c in simhost.read_calls(self.sim, "hf")], [False, True, True])
        os.unlink(os.path.join(self.sim, "hf-gated"))
        self.flag("hf-no-space")
        cp = self.run_tool("hf", "download", self.REPO, "--local-dir", self.dest, check=1)
        self.assertIn("OSError: [Errno 28] No space left on device", cp.stderr)
        cp = self.run_tool("hf", "download", "nobody/nothing", "--local-dir", self.dest, check=1)
        self.assertIn("RepositoryNotFoundError", cp.stderr)

    def test_hf_missing_from_path(self):
        env = simhost.sim_env(self.sim, exclude=("hf",))
        cp = subprocess.run(["sh", "-c", "command -v hf || echo missing; command -v systemctl"], env=env,
                            capture_output=True, text=True)
        lines = cp.stdout.splitlines()
        self.assertEqual(lines[0], "missing")
        self.assertTrue(lines[1].endswith("/systemctl"))


class UvVllmTest(SimHostCase):
    def version(self, env=None):
        cp = self.run_tool(sys.executable, "-c", "import vllm; print(vllm.__version__)", env=env, check=0)
        return cp.stdout.strip()

    def test_upgrade_changes_the_version(self):
        self.assertEqual(self.version(), "0.15.1")
        self.assertEqual(self.run_tool("vllm", "--version", check=0).stdout, "0.15.1\n")
        # Outside a virtual environment uv refuses, as the real one does.
        cp = self.run_tool("uv", "pip", "install", "--upgrade", "vllm", check=2)
        self.assertIn("No virtual environment found", cp.stderr)
        env = dict(self.env, VIRTUAL_ENV=os.path.join(self.sim, "venv"))
        self.flag("uv-fail")
        cp = self.run_tool("uv", "pip", "install", "--upgrade", "vllm", env=env, check=1)
        self.assertIn("No solution found when resolving dependencies", cp.stderr)
        self.assertEqual(self.version(), "0.15.1")
        os.unlink(os.path.join(self.sim, "uv-fail"))
        self.flag("vllm-available-version", "0.16.0rc2.dev313")
        cp = self.run_tool("uv", "pip", "install", "--upgrade", "vllm", env=env, check=0)
        self.assertIn(" - vllm==0.15.1", cp.stderr)
        self.assertIn(" + vllm==0.16.0rc2.dev313", cp.stderr)
        self.assertEqual(self.version(), "0.16.0rc2.dev313")
        self.assertEqual(self.run_tool("vllm", "--version", check=0).stdout, "0.16.0rc2.dev313\n")
        cp = self.run_tool("uv", "pip", "install", "vllm==0.16.0", "--python", "/srv/venv/bin/python", check=0)
        self.assertEqual(self.version(), "0.16.0")
        self.assertRegex(self.run_tool("uv", "--version", check=0).stdout, r"^uv \d+\.\d+\.\d+")
        self.flag("vllm-abi-broken")
        cp = self.run_tool(sys.executable, "-c", "import vllm._C", check=1)
        self.assertIn("undefined symbol", cp.stderr)


if __name__ == "__main__":
    unittest.main()
