"""Runs' records as a whole, through the real deployd and deployctl: `runs` filtered and paged
(--plan, --state, --since, --limit, --before, --all) with its bad values refused by deployctl
and by deployd; `show` (who applied a run, its vars, `--plan` the exact text it ran, never a
secret's value); `delete` and `prune` (finished runs only; record, events and logs gone); and
who asked, in the events of apply, cancel, pause, resume, retry and skip."""

import json
import os
import re
import sqlite3
import unittest

from harness import DaemonTestCase, read_line, who

QUICK = """\
version: 1
name: %s
steps:
  - id: only
    run: 'echo %s'
"""

FAILING = """\
version: 1
name: failing
steps:
  - id: broken
    run: 'test -e @DIR@/fixed'
  - id: after
    run: 'true'
"""

# `first` blocks on a FIFO until the test writes to it.
BLOCKED = """\
version: 1
name: blocked
steps:
  - id: first
    run: 'read line < @DIR@/gate'
  - id: second
    run: 'true'
"""


def listed(cp):
    """The run ids of `runs` printed as a table (its first column), without the header."""
    return [line.split()[0] for line in cp.stdout.splitlines()[1:]]


class RunsFilterTest(DaemonTestCase):
    def apply_quick(self, name):
        plan = self.d.write_plan(name + ".yaml", QUICK % (name, name))
        run, _ = self.d.apply(plan, check=0)
        return run

    def test_filters_and_pages_without_gaps_or_repeats(self):
        runs = [self.apply_quick("alpha") for _ in range(3)] + [self.apply_quick("beta")]
        failing = self.d.write_plan("failing.yaml", FAILING)
        broken, _ = self.d.apply(failing, check=1)
        runs.append(broken)
        newest_first = runs[::-1]

        self.assertEqual(listed(self.d.ctl("runs", check=0)), newest_first)
        self.assertEqual(listed(self.d.ctl("runs", "--all", check=0)), newest_first)
        self.assertEqual(listed(self.d.ctl("runs", "--plan", "alpha", check=0)), runs[2::-1])
        self.assertEqual(listed(self.d.ctl("runs", "--state", "failed", check=0)), [broken])
        self.assertEqual(listed(self.d.ctl("runs", "--since", "1h", check=0)), newest_first)
        out = json.loads(self.d.ctl("runs", "--plan", "beta", "--json", check=0).stdout)
        self.assertEqual([r["id"] for r in out], [runs[3]])
        self.assertEqual(out[0]["applied_by"], who())

        # --limit shows the newest and says, on stderr, the command for the next ones; followed
        # page by page, they are every run, once each, in order.
        seen, args = [], ["runs", "--limit", "2"]
        for _ in range(5):
            cp = self.d.ctl(*args, check=0)
            seen += listed(cp)
            if not cp.stderr:
                break
            m = re.fullmatch(r"deployctl: more runs match; the next 2: `deployctl (runs --limit 2 "
                             r"--before \d+)`, all of them: `deployctl runs --all`\n", cp.stderr)
            self.assertIsNotNone(m, cp.stderr)
            args = m.group(1).split()
        self.assertEqual(seen, newest_first)
        cp = self.d.ctl("runs", "--plan", "alpha", "--limit", "1", "--json", check=0)
        self.assertEqual([r["id"] for r in json.loads(cp.stdout)], [runs[2]])
        self.assertIn("`deployctl runs --plan alpha --limit 1 --before %s`"
                      % runs[2].rsplit("-", 1)[1], cp.stderr)

    def test_bad_values_are_refused_by_deployctl_and_by_deployd(self):
        for args, message in (
                (("--state", "runing"), "--state: no run is 'runing' (did you mean 'running'?)"),
                (("--state", "bogus"), "--state: no run is 'bogus' (a run is pending, running, "
                                       "paused, waiting, succeeded, failed or cancelled)"),
                (("--since", "yesterday"),
                 "--since: invalid duration 'yesterday' (expected e.g. 2h, 7d)"),
                (("--limit", "0"), "--limit must be a whole number from 1, not '0' (without it, "
                                   "every run that matches)"),
                (("--limit", "-3"), "--limit must be a whole number from 1, not '-3' (without "
                                    "it, every run that matches)"),
                (("--before", "x"), "--before must be a whole number from 1, not 'x' (a run's "
                                    "number: demo-41 is 41)"),
                (("--limit", "2", "--all"),
                 "--limit and --all do not go together (--all: every run that matches)")):
            cp = self.d.ctl("runs", *args, check=2)
            self.assertEqual((cp.stdout, cp.stderr), ("", "deployctl: error: %s\n" % message))
        # deployd refuses them too, whoever asks.
        with self.d.raw_connect() as s:
            rest = b""
            for request, error in (
                    ({"state": "runing"}, 'bad request: "state" must be a run state (pending, '
                                          'running, paused, waiting, succeeded, failed or '
                                          'cancelled), not "runing"'),
                    ({"limit": -1}, 'bad request: "limit" must be a whole number from 1'),
                    ({"since_ms": "2h"}, 'bad request: "since_ms" must be a whole number from 0')):
                s.sendall(json.dumps(dict(request, v=1, op="runs")).encode() + b"\n")
                line, rest = read_line(s, rest)
                self.assertEqual(json.loads(line), {"ok": False, "error": error})


class ShowTest(DaemonTestCase):
    def test_show_the_record_and_the_exact_plan_text(self):
        self.d.stop()
        self.d.start(extra_env={"E2E_SHOW_TOKEN": "hf_neverShownAnywhere42"})
        text = """\
version: 1
name: shown   # a comment, kept as written
vars:
  greeting: hello
secrets:
  TOKEN: {env: E2E_SHOW_TOKEN}
steps:
  - id: say
    secrets: [TOKEN]
    run: 'echo "${greeting}"'
"""
        plan = self.d.write_plan("shown.yaml", text)
        run, _ = self.d.apply(plan, "--var", "greeting=bonjour", check=0)

        cp = self.d.ctl("show", run, check=0)
        self.assertRegex(cp.stdout, (
            r"^run:        {run}\nplan:       shown, from {file}\nstate:      succeeded\n"
            r"created:    .+ \(\d+s ago\)\nfinished:   .+, after .+\napplied by: {who}\n"
            r"vars:       greeting=bonjour\n$").format(
                run=run, file=re.escape(plan.path), who=re.escape(who())))

        cp = self.d.ctl("show", run, "--plan", check=0)
        header, _, rest = cp.stdout.partition("\n\n")
        self.assertIn("applied by: " + who(), header)
        self.assertEqual(rest, "# the plan as applied (secrets are never stored: only where "
                               "each is read from)\n" + text)
        out = json.loads(self.d.ctl("show", run, "--plan", "--json", check=0).stdout)
        self.assertEqual(out["plan_text"], text)
        self.assertEqual(out["vars"], {"greeting": "bonjour"})
        self.assertEqual(out["applied_by"], who())
        self.assertNotIn("steps", out)
        self.assertNotIn("hf_neverShownAnywhere42", cp.stdout + json.dumps(out))

        cp = self.d.ctl("show", "nope-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run 'nope-1'\n")


class DeletePruneTest(DaemonTestCase):
    def rows(self, run):
        conn = sqlite3.connect("file:%s?mode=ro" % self.d.db, uri=True, timeout=5)
        try:
            return [conn.execute("SELECT count(*) FROM %s WHERE %s = ?" % (table, column),
                                 (run,)).fetchone()[0]
                    for table, column in (("runs", "id"), ("steps", "run_id"),
                                          ("events", "run_id"))]
        finally:
            conn.close()

    def blocked_run(self):
        plan = self.d.write_plan("blocked.yaml", BLOCKED)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "first", ("running",))
        return plan, run

    def test_delete_a_finished_run_and_refuse_one_going_on(self):
        plan = self.d.write_plan("quick.yaml", QUICK % ("quick", "hi"))
        done, _ = self.d.apply(plan, check=0)
        gate, going = self.blocked_run()
        logs = os.path.join(self.d.state_dir, "logs", done)
        self.assertTrue(os.path.exists(os.path.join(logs, "only.log")))

        cp = self.d.ctl("delete", going, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: run %s is running; only a finished run "
                                    "(succeeded, failed or cancelled) can be deleted: "
                                    "`deployctl cancel %s` first\n" % (going, going))
        self.d.ctl("pause", going, check=0)
        cp = self.d.ctl("delete", going, check=2)
        self.assertIn("run %s is paused; only a finished run" % going, cp.stderr)

        cp = self.d.ctl("delete", done, check=0)
        self.assertEqual(cp.stdout, "deleted run %s: its record, events and logs\n" % done)
        self.assertEqual(self.rows(done), [0, 0, 0])
        self.assertFalse(os.path.exists(logs))
        cp = self.d.ctl("delete", done, "--json", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run '%s'\n" % done)
        self.assertEqual(self.d.ctl("status", done, check=2).stderr,
                         "deployctl: error: no run '%s'\n" % done)

        self.d.ctl("cancel", going, check=0)
        self.d.wait_run(going)
        cp = self.d.ctl("delete", going, "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), {"op": "delete", "deleted": [going], "count": 1})
        self.assertIn("%s: forgotten (deleted by %s)" % (going, who()), self.d.log())
        # A forgotten run's id is not given again, even the newest's.
        again, _ = self.d.apply(plan, check=0)
        self.assertEqual(int(again.rsplit("-", 1)[1]), int(going.rsplit("-", 1)[1]) + 1)

    def test_prune_the_runs_that_finished_longer_ago(self):
        plan = self.d.write_plan("quick.yaml", QUICK % ("quick", "hi"))
        old = [self.d.apply(plan, check=0)[0] for _ in range(2)]
        _, going = self.blocked_run()

        cp = self.d.ctl("prune", "--older-than", "1h", check=0)
        self.assertEqual(cp.stdout, "no run finished more than 1h ago; nothing was deleted\n")
        cp = self.d.ctl("prune", "--older-than", "forever", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --older-than: invalid duration 'forever' "
                                    "(expected e.g. 2h, 7d)\n")
        cp = self.d.ctl("prune", check=2)
        self.assertTrue(cp.stderr.startswith("deployctl: error: --older-than is required"),
                        cp.stderr)

        cp = self.d.ctl("prune", "--older-than", "0s", check=0)
        self.assertEqual(cp.stdout, "deleted 2 runs that finished more than 0s ago (record, "
                                    "events and logs): %s, %s\n" % tuple(old))
        for run in old:
            self.assertEqual(self.rows(run), [0, 0, 0])
            self.assertFalse(os.path.exists(os.path.join(self.d.state_dir, "logs", run)))
        self.assertEqual(self.d.status_json(going)["state"], "running")
        self.assertEqual(self.rows(going)[0], 1)
        cp = self.d.ctl("prune", "--older-than", "0s", "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), {"op": "prune", "older_than": "0s",
                                                 "deleted": [], "count": 0})


class AuditTest(DaemonTestCase):
    def run_events(self, run):
        return [e["detail"] for e in self.d.events(run) if e["kind"] == "run.state"]

    def test_who_asked_is_in_the_events(self):
        me = who()
        plan = self.d.write_plan("blocked.yaml", BLOCKED)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.assertEqual(self.d.events(run)[0]["detail"],
                         "plan blocked from %s, applied by %s" % (plan.path, me))
        self.d.wait_step(run, "first", ("running",))
        self.d.ctl("pause", run, check=0)
        self.d.ctl("resume", run, check=0)
        self.d.ctl("cancel", run, check=0)
        status = self.d.wait_run(run)
        self.assertEqual(self.run_events(run), [
            "", "paused by %s; step first finishes first" % me, "resumed by " + me,
            "cancelled by " + me])
        self.assertEqual(status["reason"], "cancelled by " + me)
        self.assertEqual(self.d.step(run, "first", status)["reason"], "cancelled by " + me)
        # The follow stream carries them: what watch and apply --wait show.
        lines = [json.loads(l) for l in self.d.ctl("watch", run, "--json", check=1).stdout
                 .splitlines()]
        details = [l["detail"] for l in lines if l.get("type") == "event"]
        self.assertIn("resumed by " + me, details)
        self.assertIn("plan blocked from %s, applied by %s" % (plan.path, me), details)

        failing = self.d.write_plan("failing.yaml", FAILING)
        broken, _ = self.d.apply(failing, check=1)
        self.d.ctl("retry", broken, "--wait", check=1)
        self.d.ctl("retry", broken, "broken", "--wait", check=1)
        # why's timeline of the failed run says who retried it.
        self.assertIn("retried from broken by " + me, self.d.ctl("why", broken, check=1).stdout)
        self.d.ctl("skip", broken, "broken", "--wait", check=0)
        events = self.run_events(broken)
        for said in ("retried by " + me, "retried from broken by " + me,
                     "skipped broken by " + me):
            self.assertIn(said, events)
        self.assertEqual(self.d.step(broken, "broken")["reason"], "skipped by " + me)


if __name__ == "__main__":
    unittest.main()
