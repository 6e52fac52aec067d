"""Hostile input through the real binaries: patterns that a backtracking matcher could not
survive, plans built to exhaust the parser, and the same verdict from `validate`, from `apply`
and from the daemon itself when a client skips the local check."""

import json
import os
import subprocess
import unittest

from harness import CTL_TIMEOUT, DEPLOYCTL_BIN, DaemonTestCase, read_line

# A line of about 64 KiB (the longest line deployd matches whole), with the text that matters
# in the middle of it.
FILL = "x" * 32000


class LongLinesTest(DaemonTestCase):
    def test_a_64kib_line_through_dot_star_patterns_and_the_vllm_set(self):
        plan = self.d.write_plan("long.yaml", """\
version: 1
name: long-lines
steps:
  - id: config-dump
    run: python3 -c "print('Model architectures [' + 'x' * 64000)"
    watch:
      fail_on: ['(?i)error.*cuda', vllm]
  - id: crash
    run: |
      python3 -c "print('%s' + ' ERROR: no CUDA-capable device is detected ' + '%s')"
    watch:
      fail_on: ['(?i)error.*cuda', vllm]
""" % (FILL, FILL))
        run, cp = self.d.apply(plan, check=1)
        status = self.d.status_json(run)
        self.assertEqual(self.d.step(run, "config-dump", status)["state"], "succeeded")
        crash = self.d.step(run, "crash", status)
        self.assertEqual(crash["state"], "failed")
        line = crash["evidence"]["line"]
        # The line is quoted from shortly before the match, cut to 1 KiB with "…" at both ends.
        self.assertLessEqual(len(line.encode()), 1024)
        self.assertTrue(line.startswith("…xxx"), line[:20])
        self.assertTrue(line.endswith("xxx…"), line[-20:])
        self.assertIn(" ERROR: no CUDA-capable device is detected ", line)
        self.assertEqual(crash["reason"], "output matched fail_on '(?i)error.*cuda': " + line)
        self.assertEqual(crash["evidence"]["fail_on"], "(?i)error.*cuda")
        # The daemon is still there, and its log has the whole line.
        self.assertTrue(self.d.running())
        self.d.ctl("runs", check=0)
        logs = self.d.ctl("logs", run, "crash", check=0).stdout
        self.assertIn(FILL + " ERROR: no CUDA-capable device is detected " + FILL, logs)


class VerdictTestCase(DaemonTestCase):
    def raw_apply(self, text, path, op="apply"):
        """The daemon's own verdict on a plan, sent without deployctl's local check."""
        s = self.d.raw_connect()
        try:
            request = {"v": 1, "op": op, "plan_text": text, "plan_file": path}
            s.sendall(json.dumps(request).encode() + b"\n")
            line, _ = read_line(s)
            return json.loads(line)
        finally:
            s.close()

    def assert_refused_everywhere(self, plan, text, expected):
        """validate, apply and the daemon itself (apply and plan) refuse it with `expected`."""
        self.assertEqual(self.d.ctl("validate", plan, check=2).stderr, expected)
        self.assertEqual(self.d.ctl("apply", plan, check=2).stderr, expected)
        for op in ("apply", "plan"):
            answer = self.raw_apply(text, plan, op)
            self.assertEqual(answer["error"], "invalid plan " + plan)
            self.assertEqual("".join(d + "\n" for d in answer["diagnostics"]), expected)
        self.assertEqual(json.loads(self.d.ctl("runs", "--json", check=0).stdout), [])


class RefusedPatternsTest(VerdictTestCase):
    def test_patterns_re2_cannot_take_are_refused_by_validate_and_apply(self):
        nested = "(" * 40 + "x" + ")" * 40
        text = """\
version: 1
name: refused
steps:
  - id: a
    run: make
    watch:
      fail_on: ['%s', '(\\w+) \\1']
  - id: b
    kill: {match: 'vllm(?!-router)'}
""" % nested
        plan = self.d.write_plan("refused.yaml", text)
        expected = (
            "{p}:7:17: error: invalid regex '{q}…': groups nested deeper than 32\n"
            "      fail_on: ['{n}', '(\\w+) \\1']\n"
            "                ^\n"
            "{p}:7:102: error: invalid regex '(\\w+) \\1': back-references (\\1) are not "
            "supported (patterns are RE2 syntax)\n"
            "      fail_on: ['{n}', '(\\w+) \\1']\n"
            + " " * 101 + "^\n"
            "{p}:9:19: error: invalid regex 'vllm(?!-router)': lookahead ((?!) is not supported "
            "(patterns are RE2 syntax)\n"
            "    kill: {{match: 'vllm(?!-router)'}}\n"
            "                  ^\n").format(p=plan.path, n=nested, q=nested[:77])
        self.assert_refused_everywhere(plan.path, text, expected)


class HostileDocumentsTest(VerdictTestCase):
    # yaml-cpp's LoadAll never got past it: validate grew to 3.8 GB and died; one `plan` request
    # held the daemon's thread for 9 s and left it at 2.5 GB.
    def test_a_one_byte_plan_of_a_comma_is_refused_at_once(self):
        plan = self.d.write_file("comma.yaml", ",")
        expected = "%s:1:1: error: invalid YAML: unexpected ','\n,\n^\n" % plan
        self.assert_refused_everywhere(plan, ",", expected)
        self.d.ctl("runs", check=0)  # and the daemon still answers


GOOD = b"version: 1\nname: fine\nvars:\n  who: x\nsteps:\n  - id: a\n    run: echo ${who}\n"

# Plans that deployd took, or took differently from validate, before; each now has one verdict.
VERDICT_CASES = [
    ("not-utf8", b"version: 1\nname: caf\xe9\nsteps: [{id: a, run: b}]\n", ()),
    ("nul-byte", b"version: 1\nname: a\x00b\nsteps: [{id: a, run: b}]\n", ()),
    ("nul-escape", b'version: 1\nname: "a\\0b"\nsteps: [{id: a, run: b}]\n', ()),
    ("comma", b",", ()),
    ("tag", b"version: 1\nname: !custom t\nsteps: [{id: a, run: b}]\n", ()),
    ("open-quote", b'version: 1\nname: t\nsteps:\n  - id: a\n    run: "echo hi\n', ()),
    ("version-string", b'version: "1"\nname: t\nsteps: [{id: a, run: b}]\n', ()),
    ("cwd-empty", b"version: 1\nname: t\nsteps: [{id: a, run: b, cwd: ''}]\n", ()),
    ("timeout-overflow", b"version: 1\nname: t\nsteps: [{id: a, run: b, timeout: 110000d}]\n", ()),
    ("back-reference", b"version: 1\nname: t\nsteps: [{id: a, run: b, watch: {fail_on: '(a)\\1'}}]\n",
     ()),
    ("var-not-utf8", GOOD, (b"--var", b"who=caf\xe9")),
]


class SameVerdictTest(VerdictTestCase):
    """validate, apply and deployd itself give one verdict on every plan: the same exit status
    and the same diagnostics, byte for byte."""

    def ctl_bytes(self, *args):
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        cp = subprocess.run([DEPLOYCTL_BIN.encode()] + list(args), env=env, capture_output=True,
                            timeout=CTL_TIMEOUT, stdin=subprocess.DEVNULL)
        return cp.returncode, cp.stderr

    def test_invalid_plans_get_the_same_verdict_everywhere(self):
        for name, text, extra in VERDICT_CASES:
            with self.subTest(name):
                path = os.fsencode(self.d.path(name + ".yaml"))
                with open(path, "wb") as f:
                    f.write(text)
                status, validate = self.ctl_bytes(b"validate", path, *extra)
                self.assertEqual(status, 2, validate)
                self.assertTrue(validate.startswith(path + b":"), validate)
                self.assertEqual(self.ctl_bytes(b"apply", path, *extra), (2, validate))
                self.assertEqual(self.ctl_bytes(b"plan", path, *extra), (2, validate))
                # deployd's own verdict, for a client that skips the local check: requests are
                # JSON, so only what is UTF-8 can reach it.
                try:
                    plan_text = text.decode()
                except UnicodeDecodeError:
                    continue
                if extra:
                    continue
                for op in ("apply", "plan"):
                    answer = self.raw_apply(plan_text, os.fsdecode(path), op)
                    self.assertEqual("".join(d + "\n" for d in answer["diagnostics"]).encode(),
                                     validate)
        self.assertEqual(json.loads(self.d.ctl("runs", "--json", check=0).stdout), [])

    def test_a_plan_whose_file_name_is_not_utf8_is_applied_as_it_is_validated(self):
        path = os.fsencode(self.d.path("")) + b"caf\xe9.yaml"
        with open(path, "wb") as f:
            f.write(GOOD)
        status, stderr = self.ctl_bytes(b"validate", path)
        self.assertEqual((status, stderr), (0, b""))
        self.assertEqual(self.ctl_bytes(b"apply", path, b"--wait"), (0, b""))
        runs = json.loads(self.d.ctl("runs", "--json", check=0).stdout)
        self.assertEqual([(r["plan"], r["state"]) for r in runs], [("fine", "succeeded")])


if __name__ == "__main__":
    unittest.main()
