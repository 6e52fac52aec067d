"""Hostile input through the real binaries: patterns that a backtracking matcher could not
survive, plans built to exhaust the parser, and the same verdict from `validate`, from `apply`
and from the daemon itself when a client skips the local check."""

import json
import unittest

from harness import DaemonTestCase, read_line

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

if __name__ == "__main__":
    unittest.main()
