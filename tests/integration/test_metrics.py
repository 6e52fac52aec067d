"""deployd's metrics end to end: the real deployd runs plans that succeed (with a benchmark
against a streaming server in this test), fail (an exit status, a timeout, a verify, a
preflight), stall (twice: restarted, then failed) and wait for an approval; then `deployctl
metrics`, `deployctl metrics --json`, the node_exporter textfile and `/metrics` over HTTP are
scraped and read with Prometheus's own parser (Debian's python3-prometheus-client), and every
count is checked against what `deployctl status --json` says happened. The counts come from the
store: a restart of deployd keeps them. Configuration errors stop deployd with a clear message.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also when run from the repo root
import harness  # noqa: E402
from harness import DEPLOYD_BIN, DaemonTestCase, free_port, wait_until  # noqa: E402
from test_benchmark import StreamingServer  # noqa: E402

# Prometheus's parser, run by the interpreter that has it: Debian's python3 gets it from
# python3-prometheus-client (.ci/packages), which another python3 first on PATH may not see.
PARSE = r"""
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = []
for f in text_string_to_metric_families(sys.stdin.read()):
    families.append({"name": f.name, "type": f.type, "help": f.documentation,
                     "samples": [[s.name, s.labels, s.value] for s in f.samples]})
json.dump(families, sys.stdout)
"""


def parser_python():
    for python in (sys.executable, "/usr/bin/python3"):
        cp = subprocess.run([python, "-c", "import prometheus_client.parser"],
                            capture_output=True, timeout=60)
        if cp.returncode == 0:
            return python
    raise AssertionError("no python3 with prometheus_client: apt-get install "
                         "python3-prometheus-client (it is in .ci/packages)")


class Scrape:
    """One scrape, as Prometheus's parser read it: samples by name and labels."""

    NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")

    def __init__(self, test, text, python):
        cp = subprocess.run([python, "-c", PARSE], input=text, capture_output=True, text=True,
                            timeout=60)
        test.assertEqual(cp.returncode, 0, "prometheus_client refused the text:\n%s\n%s"
                         % (cp.stderr, text[:3000]))
        self.text = text
        self.families = {f["name"]: f for f in json.loads(cp.stdout)}
        self.samples = {}
        for f in self.families.values():
            for name, labels, value in f["samples"]:
                self.samples[(name, tuple(sorted(labels.items())))] = value

    def value(self, name, **labels):
        """The sample's value; None when there is none."""
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def series(self, name):
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def stable(self):
        """The samples that do not change between two scrapes while nothing happens."""
        volatile = ("deployd_uptime_seconds", "deployd_open_fds", "deployd_resident_memory_bytes")
        return {k: v for k, v in self.samples.items() if k[0] not in volatile}


PLAN_OK = """version: 1
name: ok
steps:
  - id: prep
    run: "true"
  - id: bench
    run: "true"
    verify:
      - benchmark:
          url: http://127.0.0.1:${port}
          model: bench-7b
          prompt_tokens: 16
          max_tokens: 20
          requests: 2
vars:
  port: "0"
"""

PLAN_BAD = """version: 1
name: bad
steps:
  - id: work
    run: ${cmd}
    timeout: 1s
    verify:
      - run: ${check}
vars:
  cmd: "true"
  check: "true"
"""

PLAN_PRE = """version: 1
name: pre
preflight:
  - command: deployd-e2e-no-such-command
steps:
  - id: never
    run: "true"
"""

PLAN_STALL = """version: 1
name: stall
steps:
  - id: fetch
    run: [sh, -c, 'echo "fetching [1/10]"; exec sleep 600']
    retries: 1
    retry_delay: 100ms
    watch:
      progress: {stall_after: 1s, every: 200ms}
      on_stall: restart
"""

PLAN_GATE = """version: 1
name: gate
steps:
  - id: confirm
    approval: the operator says so
"""


class MetricsTestCase(DaemonTestCase):
    start_daemon = False

    def setUp(self):
        super().setUp()
        self.python = parser_python()
        os.makedirs(self.d.path("textfile"))
        self.textfile = self.d.path("textfile", "deployd.prom")
        self.port = free_port()
        config = self.d.write_file("deployd.yaml", "metrics_textfile: %s\nmetrics_listen: "
                                   "127.0.0.1:%d\n" % (self.textfile, self.port))
        self.d.extra_args = ["--config", config]
        self.d.start()

    def scrape_ctl(self):
        return Scrape(self, self.d.ctl("metrics", check=0).stdout, self.python)

    def get(self, path, method="GET"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            return response, response.read().decode()
        finally:
            conn.close()

    def scrape_http(self):
        response, body = self.get("/metrics")
        self.assertEqual(response.status, 200, body)
        self.assertEqual(response.getheader("Content-Type"),
                         "text/plain; version=0.0.4; charset=utf-8")
        return Scrape(self, body, self.python)

    def scrape_textfile(self):
        with open(self.textfile) as f:
            return Scrape(self, f.read(), self.python)


class CountsTest(MetricsTestCase):
    def assert_conventions(self, scrape):
        for name, f in scrape.families.items():
            self.assertRegex(name, Scrape.NAME)
            self.assertTrue(name.startswith("deployd_"), name)
            self.assertTrue(f["help"], name)
            self.assertIn("# TYPE %s%s %s\n" % (name, "_total" if f["type"] == "counter" else "",
                                               f["type"]), scrape.text)
        for (name, labels), value in scrape.samples.items():
            self.assertNotIn("run", dict(labels), "run ids are not labels: %s" % name)
        # Every histogram's buckets are cumulative and end with +Inf at the count.
        for (name, labels), count in scrape.samples.items():
            if name != "deployd_step_duration_seconds_count":
                continue
            buckets = sorted((float(dict(ls)["le"]), c) for (n, ls), c in scrape.samples.items()
                             if n == "deployd_step_duration_seconds_bucket"
                             and tuple(x for x in ls if x[0] != "le") == labels)
            counts = [c for _, c in buckets]
            self.assertEqual(counts, sorted(counts), labels)
            self.assertEqual(buckets[-1], (float("inf"), count), labels)

    def apply(self, plan, *args, check):
        run, _ = self.d.apply(plan, *args, check=check)
        return self.d.status_json(run)

    def test_runs_failures_stalls_durations_and_benchmarks_in_every_scrape(self):
        before = self.scrape_ctl()
        self.assertEqual(before.series("deployd_runs_finished_total"), {})
        self.assertEqual(before.value("deployd_build_info", version="0.1.0"), 1)
        self.assertEqual(before.value("deployd_storage_fault_active"), 0)

        server = StreamingServer()
        server.rate = 400.0
        self.addCleanup(server.close)
        ok = self.apply(self.d.write_plan("ok.yaml", PLAN_OK), "--var", "port=%d" % server.port,
                        check=0)
        bad = self.d.write_plan("bad.yaml", PLAN_BAD)
        exit3 = self.apply(bad, "--var", "cmd=exit 3", check=1)
        timeout = self.apply(bad, "--var", "cmd=exec sleep 60", check=1)
        verify = self.apply(bad, "--var", "check=false", check=1)
        pre = self.apply(self.d.write_plan("pre.yaml", PLAN_PRE), check=1)
        stall = self.apply(self.d.write_plan("stall.yaml", PLAN_STALL), check=1)
        for status, reason in ((exit3, "exit status 3"), (timeout, "timed out after 1s"),
                               (verify, "verify failed: "), (pre, "preflight failed: "),
                               (stall, "no progress for 1s")):
            self.assertIn(reason, status["reason"])
        gate, _ = self.d.apply(self.d.write_plan("gate.yaml", PLAN_GATE), wait=False, check=0)
        self.d.wait_run(gate, states=("waiting",))

        s = self.scrape_ctl()
        self.assert_conventions(s)
        finished = {("bad", "failed"): 3, ("ok", "succeeded"): 1, ("pre", "failed"): 1,
                    ("stall", "failed"): 1}
        for plan in ("bad", "gate", "ok", "pre", "stall"):
            for state in ("succeeded", "failed", "cancelled"):
                self.assertEqual(s.value("deployd_runs_finished_total", plan=plan, state=state),
                                 finished.get((plan, state), 0), (plan, state))
            for state in ("pending", "running", "paused", "waiting"):
                self.assertEqual(s.value("deployd_active_runs", plan=plan, state=state),
                                 1 if (plan, state) == ("gate", "waiting") else 0, (plan, state))
        failures = {("bad", "exit"): 1, ("bad", "timeout"): 1, ("bad", "verify"): 1,
                    ("pre", "preflight"): 1, ("stall", "stall"): 1}
        for plan in ("bad", "ok", "pre", "stall"):
            for reason in ("exit", "fail_on", "interrupted", "other", "preflight", "stall",
                           "timeout", "verify"):
                self.assertEqual(s.value("deployd_failures_total", plan=plan, reason=reason),
                                 failures.get((plan, reason), 0), (plan, reason))
        self.assertEqual(s.value("deployd_stalls_total", plan="stall"), 2)
        self.assertEqual(s.value("deployd_stalls_total", plan="ok"), 0)
        self.assertEqual(s.value("deployd_last_success_timestamp_seconds", plan="ok"),
                         ok["finished_at_ms"] / 1000)
        self.assertIsNone(s.value("deployd_last_success_timestamp_seconds", plan="bad"))

        # Each step's duration, from its record: the sum is exact, the count one.
        for step in ok["steps"]:
            labels = dict(plan="ok", step=step["id"], state="succeeded")
            self.assertEqual(s.value("deployd_step_duration_seconds_count", **labels), 1)
            self.assertEqual(s.value("deployd_step_duration_seconds_sum", **labels),
                             (step["finished_at_ms"] - step["started_at_ms"]) / 1000)
        self.assertEqual(s.value("deployd_step_duration_seconds_count", plan="bad", step="work",
                                 state="failed"), 3)
        took = [(w["finished_at_ms"] - w["started_at_ms"]) / 1000
                for w in (self.d.step(r["id"], "work", r) for r in (exit3, timeout, verify))]
        self.assertGreaterEqual(took[1], 1)  # the timeout
        for le in ("0.01", "0.05", "0.25", "1", "5", "15", "28800", "+Inf"):
            self.assertEqual(s.value("deployd_step_duration_seconds_bucket", plan="bad",
                                     step="work", state="failed", le=le),
                             len([t for t in took if t <= float(le)]), le)

        figures = self.d.step(ok["id"], "bench", ok)["evidence"]["benchmark"]
        labels = dict(plan="ok", step="bench")
        self.assertEqual(s.value("deployd_benchmark_tokens_per_second", **labels),
                         figures["tokens_per_s"])
        self.assertEqual(s.value("deployd_benchmark_ttft_p95_seconds", **labels),
                         figures["ttft_p95_ms"] / 1000)
        self.assertEqual(s.value("deployd_benchmark_itl_p50_seconds", **labels),
                         figures["itl_p50_ms"] / 1000)
        self.assertEqual(s.value("deployd_benchmark_timestamp_seconds", **labels),
                         ok["finished_at_ms"] / 1000)
        self.assertGreater(figures["tokens_per_s"], 0)

        # --json, the textfile and /metrics say the same. The textfile is written again within
        # a second of a change.
        families = json.loads(self.d.ctl("metrics", "--json", check=0).stdout)
        from_json = {(x["name"], tuple(sorted(x["labels"].items()))): x["value"]
                     for f in families for x in f["samples"]}
        self.assertEqual({k: v for k, v in from_json.items() if k in s.stable()}, s.stable())
        wait_until(lambda: self.scrape_textfile().stable() == s.stable(), timeout=30,
                   interval=0.2, message="the textfile to hold the counts")
        self.assertEqual(os.stat(self.textfile).st_mode & 0o777, 0o644)
        self.assertEqual(os.listdir(self.d.path("textfile")), ["deployd.prom"])
        self.assertEqual(self.scrape_http().stable(), s.stable())

        # Approved, the gate's run ends: no longer active, counted as succeeded.
        self.d.ctl("approve", gate, "confirm", check=0)
        self.d.wait_run(gate)
        s = self.scrape_http()
        self.assertEqual(s.value("deployd_active_runs", plan="gate", state="waiting"), 0)
        self.assertEqual(s.value("deployd_runs_finished_total", plan="gate", state="succeeded"), 1)

        # The counts are the store's: a restart keeps every one.
        self.d.restart()

        def kept(scrape):
            return {k: v for k, v in scrape.stable().items() if k[0].startswith("deployd_")
                    and not k[0].startswith(("deployd_storage", "deployd_start_time"))}
        self.assertEqual(kept(self.scrape_ctl()), kept(s))

    def test_deployd_itself(self):
        s = self.scrape_ctl()
        pid = self.d.proc.pid
        with open("/proc/%d/stat" % pid) as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        start = boot + ticks / os.sysconf("SC_CLK_TCK")
        self.assertAlmostEqual(s.value("deployd_start_time_seconds"), start, places=6)
        self.assertGreaterEqual(s.value("deployd_uptime_seconds"), 0)
        self.assertGreater(s.value("deployd_resident_memory_bytes"), 1 << 20)
        fds = len(os.listdir("/proc/%d/fd" % pid))
        # The scrape's own connection is open while deployd counts; not any more now.
        self.assertLessEqual(abs(s.value("deployd_open_fds") - fds), 2)
        self.assertGreater(s.value("deployd_max_fds"), s.value("deployd_open_fds"))


class EndpointTest(MetricsTestCase):
    def test_only_get_and_head_of_metrics(self):
        response, body = self.get("/metrics", "HEAD")
        self.assertEqual(response.status, 200)
        self.assertEqual(body, "")
        self.assertGreater(int(response.getheader("Content-Length")), 1000)
        response, body = self.get("/")
        self.assertEqual((response.status, body), (404, "deployd serves its metrics at /metrics\n"))
        response, body = self.get("/metrics", "POST")
        self.assertEqual((response.status, body), (405, "/metrics answers GET and HEAD\n"))
        self.assertEqual(response.getheader("Allow"), "GET, HEAD")
        response, body = self.get("/metrics?x=1")
        self.assertEqual(response.status, 200)

    def test_sighup_keeps_the_metrics_as_deployd_started_with_them(self):
        other = free_port()
        self.d.write_file("deployd.yaml", "metrics_textfile: %s\nmetrics_listen: 127.0.0.1:%d\n"
                          % (self.textfile, other))
        before = len(self.d.log())
        self.d.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "SIGHUP: reloaded" in self.d.log()[before:], timeout=30,
                   message="deployd to reload its configuration")
        self.assertIn("SIGHUP: metrics_listen changed to '127.0.0.1:%d': it takes effect when "
                      "deployd restarts" % other, self.d.log()[before:])
        self.assertEqual(self.get("/metrics")[0].status, 200)

    def test_a_connection_past_the_limit_is_closed_and_the_others_served(self):
        idle = []
        for _ in range(8):
            c = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            self.addCleanup(c.close)
            idle.append(c)
        # Each is accepted in turn; the ninth finds the limit reached and is closed at once.
        ninth = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        self.addCleanup(ninth.close)
        self.assertEqual(ninth.recv(1024), b"")
        idle[0].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while True:
            chunk = idle[0].recv(65536)
            if not chunk:
                break
            answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer[:200])
        for c in idle:
            c.close()
        wait_until(lambda: self.get("/metrics")[0].status == 200, timeout=30,
                   message="/metrics once the idle connections are gone")


class ConfigTest(DaemonTestCase):
    start_daemon = False

    def refused(self, config_text, code):
        config = self.d.write_file("deployd.yaml", config_text)
        cp = subprocess.run([DEPLOYD_BIN, "--config", config, "--socket", self.d.socket,
                             "--state-dir", self.d.state_dir],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(cp.returncode, code, cp.stderr)
        return cp.stderr.replace(config, "CONFIG")

    def test_bad_addresses_and_paths_stop_deployd_with_what_is_wrong(self):
        self.assertEqual(
            self.refused("metrics_listen: 0.0.0.0:9464\n", 2),
            "CONFIG:1:17: error: 'metrics_listen' 0.0.0.0:9464 is not a loopback address: the "
            "metrics would be served to the network; set metrics_allow_remote: true to allow "
            "that\nmetrics_listen: 0.0.0.0:9464\n                ^\n")
        self.assertEqual(
            self.refused("metrics_listen: localhost:9464\n", 2),
            "CONFIG:1:17: error: invalid address 'localhost:9464' (expected an IP address and a "
            "port, e.g. 127.0.0.1:9464 or [::1]:9464)\nmetrics_listen: localhost:9464\n"
            "                ^\n")
        self.assertEqual(
            self.refused("metrics_textfile: node-exporter/deployd.prom\n", 2),
            "CONFIG:1:19: error: 'metrics_textfile' must be an absolute path ending in .prom "
            "(node_exporter's textfile collector reads only *.prom files)\n"
            "metrics_textfile: node-exporter/deployd.prom\n                  ^\n")
        missing = self.d.path("no-such-dir", "deployd.prom")
        self.assertEqual(self.refused("metrics_textfile: %s\n" % missing, 1),
                         "deployd: error: metrics_textfile: cannot write %s: No such file or "
                         "directory\n" % missing)
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            self.assertEqual(self.refused("metrics_listen: 127.0.0.1:%d\n" % port, 1),
                             "deployd: error: cannot listen for metrics on 127.0.0.1:%d: Address "
                             "already in use\n" % port)
        self.assertFalse(os.path.exists(self.d.socket))


if __name__ == "__main__":
    unittest.main()
