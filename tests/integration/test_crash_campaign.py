"""Crash injection: deployd is killed with SIGKILL at random moments while a 20-step plan runs
(foreground steps that are not safe to repeat, idempotent ones, background ones and retrying
ones), restarted each time, until every run has ended. Every action writes a ledger line when
it starts and when it ends, so the test sees what really ran, whatever deployd recorded:
- no step that is not idempotent ever started twice in a run (a retrying step: once per
  attempt deployd recorded);
- no two copies of a step ever ran at once (each start is followed by its end before the next
  start of that step);
- every run is terminal after the restarts, and one that succeeded ran every step to its end;
- the event log has no gaps and agrees with the steps' states; no process is left behind.

The campaign is bounded here (CRASH_POINTS, default 30); tests/bench/crash_campaign.sh runs
the long one (e.g. 500 points) on demand. DEPLOYD_CRASH_SEED replays a campaign."""

import collections
import os
import random
import time
import unittest

from harness import DaemonTestCase

POINTS = int(os.environ.get("CRASH_POINTS", "30"))
SEED = int(os.environ.get("DEPLOYD_CRASH_SEED", str(int(time.time() * 1000) % 1000000)))

# One action: a start line, some work, an end line. $$ is the action's shell; the attempt's
# start line is written before anything else, its end line after everything else.
LEDGER = "echo start {step} $$ >> {dir}/ledger; {work}; echo end {step} $$ >> {dir}/ledger"


def step_yaml(index, kind, work_dir):
    step = "s%02d" % index
    work = "sleep 0.%d" % (1 + index % 3)
    if kind == "retrying":
        # The first attempt fails; the second succeeds.
        work += "; if [ ! -e {d}/tried-{s} ]; then touch {d}/tried-{s}; echo end {s} $$ >> " \
                "{d}/ledger; exit 1; fi".format(d=work_dir, s=step)
    run = LEDGER.format(step=step, dir=work_dir, work=work)
    lines = ["  - id: %s" % step, "    run: '%s'" % run]
    if kind == "idempotent":
        lines.append("    idempotent: true")
    elif kind == "background":
        lines += ["    background: true",
                  "    verify:",
                  "      - run: 'grep -q \"^end %s \" %s/ledger'" % (step, work_dir),
                  "        every: 50ms",
                  "        within: 30s"]
    elif kind == "retrying":
        lines += ["    retries: 2", "    retry_delay: 100ms"]
    return step, "\n".join(lines)


KINDS = ("foreground", "idempotent", "background", "retrying")


class CrashCampaignTest(DaemonTestCase):
    def write_campaign_plan(self, rng, number):
        work_dir = self.d.path("run%d" % number)
        os.makedirs(work_dir)
        kinds = {}
        steps = []
        for index in range(20):
            kind = KINDS[index % len(KINDS)] if index < 8 else rng.choice(KINDS)
            step, text = step_yaml(index, kind, work_dir)
            kinds[step] = kind
            steps.append(text)
        plan = self.d.write_plan("campaign%d.yaml" % number,
                                 "version: 1\nname: campaign%d\nsteps:\n%s\n"
                                 % (number, "\n".join(steps)))
        return plan, work_dir, kinds

    def ledger(self, work_dir):
        try:
            with open(os.path.join(work_dir, "ledger")) as f:
                return [line.split() for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def check_ledger(self, run, work_dir, kinds, status):
        starts = collections.Counter()
        open_attempt = {}
        for event, step, pid in self.ledger(work_dir):
            if event == "start":
                self.assertNotIn(step, open_attempt,
                                 "%s: step %s started again while its attempt %s still ran"
                                 % (run, step, open_attempt.get(step)))
                open_attempt[step] = pid
                starts[step] += 1
            else:
                self.assertEqual(open_attempt.pop(step, None), pid,
                                 "%s: step %s ended an attempt that did not start" % (run, step))
        self.assertEqual(open_attempt, {}, "%s: attempts that never ended" % run)
        for s in status["steps"]:
            step = s["id"]
            if kinds[step] == "idempotent":
                continue
            limit = s["attempts"] if kinds[step] == "retrying" else 1
            self.assertLessEqual(starts[step], limit,
                                 "%s: step %s (%s) started %d times, %d attempts recorded"
                                 % (run, step, kinds[step], starts[step], s["attempts"]))
            if status["state"] == "succeeded":
                self.assertGreaterEqual(starts[step], 1, "%s: %s succeeded unrun" % (run, step))

    def test_random_kill9_points(self):
        rng = random.Random(SEED)
        print("crash campaign: %d points, DEPLOYD_CRASH_SEED=%d" % (POINTS, SEED))
        runs = []
        kills = 0
        while kills < POINTS:
            plan, work_dir, kinds = self.write_campaign_plan(rng, len(runs))
            run, _ = self.d.apply(plan, wait=False, check=0)
            runs.append((run, work_dir, kinds))
            while kills < POINTS:
                time.sleep(rng.uniform(0.0, 0.4))
                if self.d.status_json(run)["state"] in ("succeeded", "failed", "cancelled"):
                    break
                self.d.kill9()
                kills += 1
                self.d.start()
        outcomes = collections.Counter()
        for run, work_dir, kinds in runs:
            status = self.d.wait_run(run)
            outcomes[status["state"]] += 1
            if status["state"] != "succeeded":
                print("crash campaign: %s %s: %s" % (run, status["state"], status["reason"]))
            self.assert_events_consistent(run)
            self.check_ledger(run, work_dir, kinds, status)
        print("crash campaign: %d kills over %d runs: %s"
              % (kills, len(runs), dict(outcomes)))
        self.wait_no_step_processes()


if __name__ == "__main__":
    unittest.main()
