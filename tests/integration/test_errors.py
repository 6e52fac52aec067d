"""Errors a user can cause, each with its exact message and exit status: invalid plans, bad
arguments, unknown runs, no daemon, and malformed requests on the raw socket."""

import json
import unittest

from harness import DaemonTestCase, read_line


class PlanErrorsTest(DaemonTestCase):
    start_daemon = False  # validate is offline; the daemon is started where a test needs it

    def test_validate_bad_plan_reports_every_problem(self):
        plan = self.d.write_plan("bad.yaml", """\
version: 1
name: bad
steps:
  - id: build
    run: make
    tmeout: 5m
  - id: Build
    run: make
""")
        cp = self.d.ctl("validate", plan.path, check=2)
        self.assertEqual(cp.stdout, "")
        self.assertEqual(cp.stderr, (
            "{p}:6:5: error: unknown key 'tmeout' in step 'build' (did you mean 'timeout'?)\n"
            "    tmeout: 5m\n"
            "    ^\n"
            "{p}:7:9: error: invalid step id 'Build' (use lowercase letters, digits, '_' and '-')\n"
            "  - id: Build\n"
            "        ^\n").format(p=plan.path))

    def test_validate_good_plan(self):
        plan = self.d.write_plan("good.yaml", """\
version: 1
name: good
steps:
  - id: a
    run: 'true'
  - id: b
    run: [echo, hi]
""")
        cp = self.d.ctl("validate", plan.path, check=0)
        self.assertEqual(cp.stdout, "%s: ok (plan good, 2 steps)\n" % plan.path)
        self.assertEqual(cp.stderr, "")

    def test_apply_of_an_invalid_plan_is_refused_before_the_daemon(self):
        plan = self.d.write_plan("bad-var.yaml", """\
version: 1
name: badvar
steps:
  - id: a
    run: echo ${nope}
""")
        # No daemon is running: the plan is refused first, with exit status 2.
        cp = self.d.ctl("apply", plan.path, check=2)
        self.assertEqual(cp.stdout, "")
        self.assertEqual(cp.stderr, (
            "{p}:5:10: error: undefined variable 'nope'\n"
            "    run: echo ${{nope}}\n"
            "         ^\n").format(p=plan.path))

    def test_apply_of_a_missing_file(self):
        missing = self.d.path("no-such-plan.yaml")
        cp = self.d.ctl("apply", missing, check=2)
        self.assertEqual(cp.stdout, "")
        self.assertEqual(cp.stderr, "deployctl: error: cannot read plan %s: No such file or "
                                    "directory\n" % missing)

    def test_var_without_equals(self):
        plan = self.d.write_plan("vars.yaml", """\
version: 1
name: vars
vars:
  port: "8000"
steps:
  - id: a
    run: echo ${port}
""")
        cp = self.d.ctl("apply", plan.path, "--var", "port", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --var expects NAME=VALUE, got 'port'\n")
        cp = self.d.ctl("validate", plan.path, "--var", "=8000", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --var expects NAME=VALUE, got '=8000'\n")
        cp = self.d.ctl("validate", plan.path, "--var", "prot=1", check=2)
        self.assertEqual(cp.stderr, "%s: error: --var 'prot': the plan declares no variable "
                                    "'prot'\n" % plan.path)

    def test_no_daemon_at_the_socket(self):
        cp = self.d.ctl("runs", check=3)
        self.assertEqual(cp.stdout, "")
        lines = cp.stderr.splitlines()
        self.assertEqual(len(lines), 1, cp.stderr)
        self.assertTrue(lines[0].startswith("deployctl: error: cannot reach deployd at %s: "
                                            % self.d.socket), lines[0])
        self.assertIn("No such file or directory", lines[0])

        # --socket overrides DEPLOYD_SOCKET.
        other = self.d.path("other.sock")
        cp = self.d.ctl("--socket", other, "status", "x-1", check=3)
        self.assertTrue(cp.stderr.startswith("deployctl: error: cannot reach deployd at %s: "
                                             % other), cp.stderr)

    def test_usage_errors(self):
        cp = self.d.ctl(check=2)
        self.assertIn("Subcommands:", cp.stderr)
        cp = self.d.ctl("frobnicate", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: unknown command 'frobnicate' "
                                    "(`deployctl --help` lists the commands)\n")
        self.d.ctl("status", check=2)


class RunErrorsTest(DaemonTestCase):
    def test_status_of_an_unknown_run(self):
        cp = self.d.ctl("status", "nope-1", check=2)
        self.assertEqual(cp.stdout, "")
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")
        cp = self.d.ctl("status", "nope-1", "--json", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")
        cp = self.d.ctl("logs", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")

    def test_runs_is_empty_at_first(self):
        cp = self.d.ctl("runs", "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), [])


class RawProtocolTest(DaemonTestCase):
    def call(self, sock, line, buffer=b""):
        sock.sendall(line)
        answer, rest = read_line(sock, buffer)
        self.assertIsNotNone(answer, "the daemon closed the connection after %r" % line[:80])
        return json.loads(answer), rest

    def test_bad_requests_get_exact_errors(self):
        with self.d.raw_connect() as s:
            ping, rest = self.call(s, b'{"v": 1, "op": "ping"}\n')
            self.assertEqual(ping["ok"], True)
            self.assertEqual(ping["protocol"], 1)
            version = ping["version"]

            cases = [
                (b"this is not json\n", "bad request: not a JSON object"),
                (b'["v", 1]\n', "bad request: not a JSON object"),
                (b'{"op": "ping"}\n', 'bad request: missing protocol version "v"'),
                (b'{"v": "1", "op": "ping"}\n', 'bad request: missing protocol version "v"'),
                (b'{"v": 2, "op": "ping"}\n',
                 "protocol version 2 is not supported (deployd %s speaks 1)" % version),
                (b'{"v": 1}\n', 'bad request: missing "op"'),
                (b'{"v": 1, "op": "frobnicate"}\n', "bad request: unknown op 'frobnicate'"),
                (b'{"v": 1, "op": "status"}\n', 'bad request: status needs "run"'),
                (b'{"v": 1, "op": "skip", "run": "x-1"}\n', 'bad request: skip needs "step"'),
                (b'{"v": 1, "op": "apply"}\n', 'bad request: apply needs "plan_text"'),
                (b'{"v": 1, "op": "status", "run": "nope-1"}\n', "no run 'nope-1'"),
            ]
            for request, error in cases:
                with self.subTest(request=request):
                    answer, rest = self.call(s, request, rest)
                    self.assertEqual(answer, {"ok": False, "error": error})

            # The connection still serves after all those errors.
            ping, rest = self.call(s, b'{"v": 1, "op": "ping"}\n', rest)
            self.assertEqual(ping["ok"], True)

    def test_invalid_plan_over_the_socket_gets_diagnostics(self):
        request = {"v": 1, "op": "apply", "plan_file": "raw.yaml",
                   "plan_text": "version: 1\nname: raw\nsteps:\n  - id: a\n    rnu: x\n"}
        with self.d.raw_connect() as s:
            answer, _ = self.call(s, json.dumps(request).encode() + b"\n")
        self.assertEqual(answer["ok"], False)
        self.assertEqual(answer["error"], "invalid plan raw.yaml")
        self.assertTrue(answer["diagnostics"], answer)
        self.assertTrue(all(d.startswith("raw.yaml:") for d in answer["diagnostics"]), answer)

    def test_request_larger_than_the_limit(self):
        limit = 4 << 20
        with self.d.raw_connect(timeout=30) as s:
            s.sendall(b"x" * limit)  # no newline: the line never ends within the limit
            answer, rest = read_line(s)
            self.assertIsNotNone(answer)
            self.assertEqual(json.loads(answer),
                             {"ok": False,
                              "error": "request too large (the limit is %d bytes)" % limit})
            # Then the connection is closed.
            try:
                tail = rest + s.recv(100)
            except ConnectionResetError:
                tail = b""
            self.assertEqual(tail, b"")
        # The daemon is unharmed.
        self.d.ctl("runs", check=0)

    def test_request_just_under_the_limit_is_read(self):
        # A padded but complete request well under the limit is answered normally.
        pad = "x" * (1 << 20)
        line = json.dumps({"v": 1, "op": "ping", "pad": pad}).encode() + b"\n"
        with self.d.raw_connect(timeout=30) as s:
            answer, _ = self.call(s, line)
        self.assertEqual(answer["ok"], True)


if __name__ == "__main__":
    unittest.main()
