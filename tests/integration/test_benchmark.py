"""The `benchmark` check end to end: the real deployd and deployctl against a streaming server in
this test — Python's http.server on 127.0.0.1 answering `"stream": true` completions as an
OpenAI-compatible server does (tests/demo/completion_stream.py), at a rate the test sets. The
server stands for the model server each deploy launches; between deploys the test changes what
it does (its rate, its answer).

What is asserted is what deployd measured of a known rate, and what it decided: the measured
output tokens/s is within 10% of the rate the server streams at, a second deploy with the server
30% slower fails with a message naming both figures, a server that answers garbage fails the
quality smoke, and the first run says that it sets the baseline.
"""

import http.server
import json
import os
import re
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also when run from the repo root
import harness  # noqa: E402
from harness import DaemonTestCase  # noqa: E402

sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "tests", "demo"))
from completion_stream import stream_completion  # noqa: E402

MODEL = "bench-7b"
ANSWER = "Paris is the capital of France."
RATE = 50.0  # tokens/s of each streamed answer
MAX_TOKENS = 50  # a second an answer at RATE
REQUESTS = 4
CONCURRENCY = 2

PLAN = """version: 1
name: bench
steps:
  - id: launch
    run: "true"
    verify:
      - benchmark:
          url: http://${host}:${port}
          model: %s
          api: ${api}
          prompt_tokens: 32
          max_tokens: %d
          requests: %d
          concurrency: %d
          at_least: {tokens_per_s: 10}
          at_most: {ttft_p95: 5s}
          regression: 10%%
          expect: {prompt: 'The capital of France is', matches: '(?i)\\bparis\\b'}
vars:
  host: 127.0.0.1
  port: "0"
  api: completions
""" % (MODEL, MAX_TOKENS, REQUESTS, CONCURRENCY)


class StreamingServer:
    """Completions streamed at `rate` tokens/s, with `answer` as their text; `usage` says
    whether the stream ends with the usage chunk when asked for it. Requests are counted."""

    def __init__(self):
        self.rate = RATE
        self.answer = ANSWER
        self.usage = True
        self.requests = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                owner.requests.append((self.path, request))
                if not owner.usage:
                    request.pop("stream_options", None)
                if request.get("model") != MODEL:
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b'{"error": "no such model"}')
                    return
                stream_completion(self, request, MODEL, owner.answer, owner.rate)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


class BenchmarkTest(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.server = StreamingServer()
        self.addCleanup(self.server.close)
        self.plan = self.d.write_plan("bench.yaml", PLAN)

    def deploy(self, check, api="completions", port=None, host="127.0.0.1"):
        return self.d.apply(self.plan, "--var", "port=%d" % (port or self.server.port),
                            "--var", "api=" + api, "--var", "host=" + host, check=check)

    def figures(self, run):
        evidence = self.d.step(run, "launch")["evidence"]
        return evidence, evidence.get("benchmark")

    def assert_near(self, measured, expected, what):
        self.assertLess(abs(measured - expected), 0.1 * expected,
                        "%s: measured %.1f tokens/s, the server streams %.1f" % (what, measured, expected))

    def test_measures_the_rate_and_fails_a_deploy_30_percent_slower(self):
        run1, cp = self.deploy(check=0)
        evidence, f = self.figures(run1)
        # Two answers at a time, each at RATE: the aggregate is twice that.
        self.assert_near(f["tokens_per_s"], RATE * CONCURRENCY, "aggregate")
        self.assert_near(f["request_tokens_per_s_p50"], RATE, "per request")
        self.assertEqual((f["requests"], f["errors"], f["output_tokens"], f["token_count"]),
                         (REQUESTS, 0, REQUESTS * MAX_TOKENS, "usage"))
        self.assertEqual(f["load"], "4 requests, concurrency 2, max_tokens 50, prompt_tokens 32")
        self.assertEqual(f["url"], "http://127.0.0.1:%d/v1/completions" % self.server.port)
        self.assertLess(f["ttft_p50_ms"], f["ttft_p95_ms"] + 0.01)
        self.assertGreater(f["itl_p50_ms"], 0)
        self.assertEqual(evidence["quality"]["passed"], True)
        self.assertIn("Paris", evidence["quality"]["answer"])
        # The first run sets the baseline and says so: in its evidence and as the step ends.
        note = "no earlier succeeded run of plan 'bench' measured step 'launch': this run sets the baseline"
        self.assertEqual(evidence["baseline"], {"run": None, "note": note})
        self.assertIn(note, cp.stdout)
        # The quality request came first, at temperature 0; then the load, streamed.
        paths = [p for p, _ in self.server.requests]
        self.assertEqual(paths, ["/v1/completions"] * (1 + REQUESTS))
        first = self.server.requests[0][1]
        self.assertEqual((first["prompt"], first["temperature"], first["stream"]),
                         ("The capital of France is", 0, True))
        load = self.server.requests[1][1]
        self.assertEqual((load["max_tokens"], load["stream"], load["stream_options"]),
                         (MAX_TOKENS, True, {"include_usage": True}))
        self.assertEqual(len(load["prompt"].split()), 32)

        # The same server again: within 10% of the baseline, and compared with it.
        run2, cp = self.deploy(check=0)
        evidence2, f2 = self.figures(run2)
        self.assertEqual(evidence2["baseline"]["run"], run1)
        self.assertEqual(evidence2["baseline"]["tokens_per_s"], f["tokens_per_s"])

        # 30% slower: the regression fails the deploy, naming both figures.
        self.server.rate = RATE * 0.7
        run3, cp = self.deploy(check=1)
        step = self.d.step(run3, "launch")
        self.assertEqual(step["state"], "failed")
        slow = step["evidence"]["benchmark"]["tokens_per_s"]
        self.assert_near(slow, RATE * 0.7 * CONCURRENCY, "slowed")
        base = f2["tokens_per_s"]
        m = re.fullmatch(r"verify failed: benchmark http://127\.0\.0\.1:\d+/v1/completions: "
                         r"(\d+\.\d) tokens/s is (\d+\.\d)% below (\d+\.\d) tokens/s, the baseline "
                         r"of run (\S+) \(at most 10% allowed\)", step["reason"])
        self.assertIsNotNone(m, step["reason"])
        self.assertEqual(m.group(1), "%.1f" % slow)
        self.assertEqual(m.group(3), "%.1f" % base)
        self.assertEqual(m.group(4), run2)
        self.assertAlmostEqual(float(m.group(2)), (1 - slow / base) * 100, delta=0.06)
        self.assertIn(step["reason"], cp.stdout)

        # why shows the figures of the failed run; history all three.
        why = self.d.ctl("why", run3, check=1).stdout
        self.assertIn("tokens_per_s:", why)
        self.assertIn("baseline:", why)
        self.assertIn("run:                 " + run2, why)
        history = json.loads(self.d.ctl("history", "bench", "--json", check=0).stdout)
        self.assertEqual([(r["run"], r["state"]) for r in history["runs"]],
                         [(run3, "failed"), (run2, "succeeded"), (run1, "succeeded")])
        self.assertEqual([r["benchmarks"][0]["benchmark"]["tokens_per_s"] for r in history["runs"]],
                         [slow, f2["tokens_per_s"], f["tokens_per_s"]])
        table = self.d.ctl("history", "bench", check=0).stdout.splitlines()
        self.assertEqual(table[0].split(), ["DATE", "RUN", "STATE", "VERSION", "TOKENS/S", "TTFT_P50",
                                            "TTFT_P95", "ITL_P95"])
        self.assertEqual([line.split()[2:6] for line in table[1:]],
                         [[run3, "failed", "-", "%.1f" % slow],
                          [run2, "succeeded", "-", "%.1f" % f2["tokens_per_s"]],
                          [run1, "succeeded", "-", "%.1f" % f["tokens_per_s"]]])
        # The baseline is still the last run that succeeded.
        self.server.rate = RATE
        run4, _ = self.deploy(check=0)
        self.assertEqual(self.figures(run4)[0]["baseline"]["run"], run2)
        status = self.d.ctl("status", run4, check=0).stdout
        self.assertIn("benchmark of launch: %.1f tokens/s" % self.figures(run4)[1]["tokens_per_s"], status)

    def test_a_server_that_answers_garbage_fails_the_quality_smoke(self):
        self.server.answer = "zq xv blorp quux"
        run, cp = self.deploy(check=1)
        step = self.d.step(run, "launch")
        self.assertEqual(
            step["reason"],
            "verify failed: benchmark http://127.0.0.1:%d/v1/completions: the answer to \"The capital "
            "of France is\" does not match '(?i)\\bparis\\b': \"zq xv blorp quux zq xv blorp quux zq xv "
            "blorp quux zq xv blorp quux\"" % self.server.port)
        self.assertEqual(step["evidence"]["quality"]["passed"], False)
        self.assertNotIn("benchmark", step["evidence"])
        # Fast but incoherent: no load was sent after the wrong answer.
        self.assertEqual(len(self.server.requests), 1)
        why = self.d.ctl("why", run, check=1).stdout
        self.assertIn("does not match", why)

    def test_chat_without_usage_counts_chunks(self):
        # A name, resolved (an address is connected to as it is).
        self.server.usage = False
        run, _ = self.deploy(check=0, api="chat", host="localhost")
        _, f = self.figures(run)
        self.assertEqual(f["token_count"], "chunks")
        self.assertEqual(f["output_tokens"], REQUESTS * MAX_TOKENS)
        self.assertEqual(f["url"], "http://localhost:%d/v1/chat/completions" % self.server.port)
        self.assert_near(f["tokens_per_s"], RATE * CONCURRENCY, "chat")
        request = self.server.requests[-1][1]
        self.assertEqual(request["messages"][0]["role"], "user")
        self.assertEqual(len(request["messages"][0]["content"].split()), 32)

    def test_a_server_that_stalls_is_bounded_by_the_timeout(self):
        # 50 tokens at 1 token/s: each answer would take 50 s; the check gives it 2.
        self.server.rate = 1.0
        plan = self.d.write_plan("stall.yaml", """version: 1
name: stall
steps:
  - id: launch
    run: "true"
    verify:
      - benchmark: {url: "http://127.0.0.1:%d", model: %s, prompt_tokens: 8, max_tokens: 50,
                    requests: 2, concurrency: 2}
        timeout: 2s
""" % (self.server.port, MODEL))
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "launch")
        self.assertEqual(step["reason"], "verify failed: benchmark http://127.0.0.1:%d/v1/completions: "
                         "timed out after 2s: 0 of 2 requests finished" % self.server.port)
        self.assertEqual(len(self.server.requests), 2)

    def test_a_server_that_is_not_there(self):
        port = harness.free_port()
        run, _ = self.deploy(check=1, port=port)
        self.assertEqual(self.d.step(run, "launch")["reason"],
                         "verify failed: benchmark http://127.0.0.1:%d/v1/completions: the quality request "
                         "failed: connection refused" % port)


if __name__ == "__main__":
    unittest.main()
