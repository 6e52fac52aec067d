"""`deployctl logs` with where each attempt begins and, with --timestamps, when each line was
written, through the real deployd: the marks are kept beside the log (STEP.log.times,
STEP.log.attempts) by the supervisor, so the log itself holds exactly the output — what fail_on,
progress and `why` read."""

import json
import os
import re

from harness import DaemonTestCase, main_skipping_with_77

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+s ago\)"

PLAN = """\
version: 1
name: flaky
steps:
  - id: flaky
    run: 'n=$(cat @DIR@/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > @DIR@/count; echo "try $n"; echo "said twice $n"; [ $n -ge 3 ]'
    retries: 2
    retry_delay: 100ms
  - id: quiet
    run: 'echo once'
"""


class LogMarksTest(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.plan = self.d.write_plan("flaky.yaml", PLAN)
        self.run_id, _ = self.d.apply(self.plan, check=0)
        self.log = os.path.join(self.d.state_dir, "logs", self.run_id, "flaky.log")

    def test_a_line_where_each_attempt_begins(self):
        out = self.d.ctl("logs", self.run_id, "flaky", check=0).stdout
        self.assertRegex(out, "^" + "".join(
            r"── attempt %d of 3, started %s ──\ntry %d\nsaid twice %d\n" % (n, WHEN, n, n)
            for n in (1, 2, 3)) + "$")
        # A step of one attempt: its output as it is.
        self.assertEqual(self.d.ctl("logs", self.run_id, "quiet", check=0).stdout, "once\n")
        # The log itself is the output, and nothing else; the marks are beside it.
        with open(self.log) as f:
            self.assertEqual(f.read(), "".join("try %d\nsaid twice %d\n" % (n, n)
                                               for n in (1, 2, 3)))
        with open(self.log + ".attempts") as f:
            attempts = [l.split() for l in f.read().splitlines()]
        self.assertEqual([(a[0], a[2], a[3]) for a in attempts],
                         [("0", "1", "3"), ("19", "2", "3"), ("38", "3", "3")])
        self.assertTrue(os.path.exists(self.log + ".times"))

    def test_timestamps(self):
        out = self.d.ctl("logs", self.run_id, "flaky", "--timestamps", check=0).stdout
        lines = out.splitlines()
        self.assertEqual(len(lines), 9, out)
        for i, line in enumerate(lines):
            if i % 3 == 0:
                self.assertRegex(line, r"^── attempt %d of 3, started " % (i // 3 + 1))
            else:
                self.assertRegex(line, r"^%s (try|said twice) %d$" % (TIME, i // 3 + 1))
        # A later attempt's lines were written later.
        times = [l.split(" ")[0] for i, l in enumerate(lines) if i % 3]
        self.assertEqual(times, sorted(times))
        self.assertEqual(self.d.ctl("logs", self.run_id, "-t", check=0).stdout.count(" once\n"), 1)

    def test_json_has_the_marks(self):
        entry = json.loads(self.d.ctl("logs", self.run_id, "flaky", "--json", "--timestamps",
                                      check=0).stdout)[0]
        self.assertEqual([(a["at"], a["attempt"], a["of"]) for a in entry["attempts"]],
                         [(0, 1, 3), (19, 2, 3), (38, 3, 3)])
        self.assertTrue(all(isinstance(a["started_at_ms"], int) for a in entry["attempts"]))
        self.assertEqual(entry["times"][0][0], 0)
        self.assertTrue(all(at in (0, 6, 19, 25, 38, 44) for at, _ in entry["times"]),
                        entry["times"])
        plain = json.loads(self.d.ctl("logs", self.run_id, "flaky", "--json", check=0).stdout)[0]
        self.assertNotIn("times", plain)

    def test_follow_with_timestamps(self):
        cp = self.d.ctl("logs", self.run_id, "flaky", "-f", "--timestamps", check=0)
        self.assertEqual(cp.stdout, self.d.ctl("logs", self.run_id, "flaky", "-t",
                                               check=0).stdout)


if __name__ == "__main__":
    main_skipping_with_77()
