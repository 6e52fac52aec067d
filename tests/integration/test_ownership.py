"""deployd owns every process it starts: a stop (a timeout, a stall, a fail_on line, a cancel)
is recorded only once every process of the attempt is gone — also one that ignores SIGTERM,
one that escaped into a session of its own — so the next attempt, the on_failure steps, the
run's end and "cancelled" never find the last attempt still running; and what an action
leaves running when it exits, or what its supervisor leaves when it is killed, is stopped and
named. Each action writes a ledger of its starts (and checks the ones before it are gone)."""

import json
import os
import signal
import time
import unittest

from harness import DaemonTestCase, pids_with_marker, unique_marker, wait_until

# An attempt that ignores SIGTERM (so only SIGKILL after `grace` ends it), and a grandchild
# that escaped into a session of its own doing the same. Before it starts it checks that no
# process of an earlier attempt is alive, and says so in the ledger.
STUBBORN = r"""
import os, subprocess, sys
ledger, marker = sys.argv[1], sys.argv[2]
alive = []
if os.path.exists(ledger):
    for line in open(ledger):
        pid = int(line.split()[1])
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    alive.append(pid)
        except OSError:
            pass
escaped = subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 0.05; done; : " + marker],
                           start_new_session=True)
with open(ledger, "a") as f:
    f.write("start %d %d alive=%s\n" % (os.getpid(), escaped.pid, ",".join(map(str, alive))))
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


# Each attempt fails once it has written its ledger line (not after a time, which a loaded
# machine could spend starting python3).
FAIL_WHEN_READY = "    watch:\n      fail_on: ['^ready$']\n"


class OwnershipTest(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.marker = unique_marker("owned")
        self.script = self.d.write_file("stubborn.py", STUBBORN)

    def ledger_lines(self, plan):
        with open(plan.file("ledger")) as f:
            return [line.split() for line in f]

    def assert_none_alive(self, plan):
        for fields in self.ledger_lines(plan):
            for pid in (int(fields[1]), int(fields[2])):
                self.assertFalse(os.path.exists("/proc/%d/cmdline" % pid)
                                 and open("/proc/%d/cmdline" % pid, "rb").read(),
                                 "pid %d of an attempt is still alive" % pid)

    def stubborn_step(self, extra):
        return """\
  - id: stubborn
    run: [python3, '%s', '@DIR@/ledger', '%s']
    grace: 300ms
%s""" % (self.script, self.marker, extra)

    def test_next_attempt_starts_only_when_the_last_is_gone(self):
        plan = self.d.write_plan("retry.yaml", """\
version: 1
name: retry
steps:
%s""" % self.stubborn_step("    timeout: 500ms\n    retries: 2\n    retry_delay: 10ms\n"))
        run, _ = self.d.apply(plan, check=1)
        lines = self.ledger_lines(plan)
        self.assertEqual(len(lines), 3)
        for fields in lines:
            self.assertEqual(fields[3], "alive=", "an attempt started beside the last: %s" % fields)
        self.assert_none_alive(plan)
        status = self.d.status_json(run)
        step = self.d.step(run, "stubborn", status)
        self.assertEqual(step["reason"], "timed out after 500ms")
        details = [e["detail"] for e in self.d.events(run) if e["step_id"] == "stubborn"]
        self.assertIn("stopping: timed out after 500ms; SIGTERM to the attempt", details[1])
        self.assertIn("SIGKILL after 300ms", details[1])
        log = self.d.ctl("logs", run, "stubborn", check=0).stdout
        self.assertIn("deployd supervisor: SIGKILL after 300ms to", log)

    def test_on_failure_runs_only_when_the_failed_attempt_is_gone(self):
        plan = self.d.write_plan("onfail.yaml", """\
version: 1
name: onfail
steps:
%son_failure:
  - id: report
    run: [python3, '%s', '@DIR@/ledger', '%s']
    watch:
      fail_on: ['^ready$']
    grace: 100ms
""" % (self.stubborn_step(FAIL_WHEN_READY), self.script, self.marker))
        self.d.apply(plan, check=1)
        lines = self.ledger_lines(plan)
        self.assertEqual(len(lines), 2)
        self.assertEqual(lines[1][3], "alive=", "on_failure ran beside the failed attempt")
        self.assert_none_alive(plan)

    def test_cancel_returns_when_every_process_is_gone(self):
        plan = self.d.write_plan("cancel.yaml", """\
version: 1
name: cancel
steps:
%s""" % self.stubborn_step(""))
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: os.path.exists(plan.file("ledger")), message="the action")
        self.d.wait_step(run, "stubborn", ("running",))
        started = time.monotonic()
        self.d.ctl("cancel", run, check=0)
        self.assertGreaterEqual(time.monotonic() - started, 0.25, "cancel did not wait for SIGKILL")
        self.assert_none_alive(plan)
        status = self.d.status_json(run)
        self.assertEqual(status["state"], "cancelled")
        self.assertEqual(self.d.step(run, "stubborn", status)["state"], "cancelled")
        self.assert_events_consistent(run, status)

    def test_status_and_why_name_the_pid_of_a_running_step_also_after_a_restart(self):
        plan = self.d.write_plan("who.yaml", """\
version: 1
name: who
steps:
%s""" % self.stubborn_step("    timeout: 5m\n"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: os.path.exists(plan.file("ledger")), message="the action")
        action = int(self.ledger_lines(plan)[0][1])
        for restarted in (False, True):
            if restarted:
                self.d.kill9()
                self.d.start()
            wait_until(lambda: self.d.step(run, "stubborn").get("pid") == action,
                       message="status --json to name pid %d" % action)
            status = self.d.ctl("status", run, check=0).stdout
            row = [line for line in status.splitlines() if line.startswith("stubborn")]
            self.assertEqual(len(row), 1, status)
            self.assertIn("running", row[0])
            self.assertIn("pid %d" % action, row[0])
            why = self.d.ctl("why", run, check=0).stdout
            self.assertIn("did not fail: it is running", why)
            self.assertRegex(why, r"running: stubborn, attempt 1, for [0-9.]+\w*, pid %d\n" % action)
            answer = json.loads(self.d.ctl("why", run, "--json", check=0).stdout)
            self.assertEqual([(r["step"], r["pid"]) for r in answer["running"]],
                             [("stubborn", action)])
        self.d.ctl("cancel", run, check=0)
        self.assert_none_alive(plan)

    def test_what_an_action_leaves_running_is_stopped_and_named(self):
        plan = self.d.write_plan("left.yaml", """\
version: 1
name: left
steps:
  - id: daemonize
    run: [sh, -c, 'setsid sh -c "sleep 1000; : %s" & echo started']
""" % self.marker)
        run, _ = self.d.apply(plan, check=0)
        self.assertEqual(pids_with_marker(self.marker), [])
        step = self.d.step(run, "daemonize")
        self.assertEqual(step["state"], "succeeded")
        self.assertIn("left_running", step["evidence"])
        log = self.d.ctl("logs", run, "daemonize", check=0).stdout
        self.assertIn("deployd supervisor: the action ended (exit status 0); stopping what it "
                      "left running: pid", log)

    def test_a_killed_supervisor_leaves_nothing_behind(self):
        plan = self.d.write_plan("killed.yaml", """\
version: 1
name: killed
steps:
%s""" % self.stubborn_step("    timeout: 1m\n"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: os.path.exists(plan.file("ledger")), message="the action")
        action = int(self.ledger_lines(plan)[0][1])
        with open("/proc/%d/stat" % action) as f:
            supervisor = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(supervisor, signal.SIGKILL)
        status = self.d.wait_run(run)
        step = self.d.step(run, "stubborn", status)
        self.assertEqual(step["state"], "failed")
        self.assertIn("without recording how the action ended", step["reason"])
        self.assertIn("stopped what was left of the attempt: pid", step["reason"])
        self.assert_none_alive(plan)
        self.wait_no_step_processes()


class KillProtectionTest(DaemonTestCase):
    def test_kill_spares_the_parents_of_a_deployctl(self):
        from harness import DEPLOYCTL_BIN
        self.spares_the_parents_of(DEPLOYCTL_BIN)

    def test_kill_spares_the_parents_of_an_installed_deployctl(self):
        # As installed: deployd in PREFIX/sbin, deployctl in PREFIX/bin.
        import shutil
        from harness import DEPLOYCTL_BIN, DEPLOYD_BIN
        prefix = os.path.join(self.d.dir, "usr")
        for folder, binary in (("sbin", DEPLOYD_BIN), ("bin", DEPLOYCTL_BIN)):
            os.makedirs(os.path.join(prefix, folder))
            shutil.copy2(binary, os.path.join(prefix, folder))
        self.d.stop()
        # The harness starts DEPLOYD_BIN ARGS…: the launcher drops it for the installed copy.
        self.d.launcher = ["sh", "-c", 'shift; exec "$0" "$@"',
                           os.path.join(prefix, "sbin", "deployd")]
        self.d.start()
        self.spares_the_parents_of(os.path.join(prefix, "bin", "deployctl"))

    def spares_the_parents_of(self, deployctl):
        # An operator's `timeout 600 deployctl watch …` (here a shell) has the pattern in its
        # command line; a process that really matches does not.
        import subprocess
        marker = unique_marker("kill-protect")
        target = subprocess.Popen(["sh", "-c", "sleep 1000; : " + marker], start_new_session=True)
        self.addCleanup(target.kill)
        plan = self.d.write_plan("wait.yaml", """\
version: 1
name: waiting
steps:
  - id: wait
    approval: "just waits"
""")
        waiting, _ = self.d.apply(plan, wait=False, check=0)
        env = dict(os.environ, DEPLOYD_SOCKET=self.d.socket)
        parent = subprocess.Popen(["sh", "-c", "%s watch %s >/dev/null; true; : %s"
                                   % (deployctl, waiting, marker)], env=env,
                                  start_new_session=True)
        self.addCleanup(parent.kill)
        wait_until(lambda: any(b"deployctl" in open("/proc/%d/cmdline" % c, "rb").read()
                               for c in _children(parent.pid)), message="deployctl watch")
        kill = self.d.write_plan("kill.yaml", """\
version: 1
name: kill
steps:
  - id: kill
    kill: {match: '%s', grace: 1s}
""" % marker)
        run, _ = self.d.apply(kill, check=0)
        self.assertIsNotNone(target.wait(10))
        self.assertIsNone(parent.poll(), "the parent of a deployctl was signalled")
        log = self.d.ctl("logs", run, "kill", check=0).stdout
        self.assertIn("not signalling pid %d (sh): is an ancestor of a deployctl" % parent.pid, log)
        self.d.ctl("cancel", waiting, check=0)


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


class LockTest(DaemonTestCase):
    PLAN = """\
version: 1
name: locked
steps:
  - id: work
    run: [sh, -c, 'echo start >> @DIR@/ledger; while [ ! -e @DIR@/go ]; do sleep 0.02; done']
"""

    def test_one_run_of_a_plan_at_a_time_also_across_a_restart(self):
        plan = self.d.write_plan("locked.yaml", self.PLAN)
        first, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(first, "work", ("running",))
        for restart in (False, True):
            if restart:
                self.d.kill9()
                self.d.start()
            cp = self.d.ctl("apply", plan.path, check=2)
            self.assertEqual(cp.stderr.strip(),
                             "deployctl: error: lock 'locked' is held by run %s (running): one run at "
                             "a time; `deployctl watch %s`, or apply with --wait-lock to start once "
                             "it has finished" % (first, first))
        second, _ = self.d.apply(plan, "--wait-lock", wait=False, check=0)
        status = self.d.status_json(second)
        self.assertEqual(status["state"], "pending")
        self.assertEqual(status["reason"], "waiting for lock 'locked' (held by run %s)" % first)
        with open(plan.file("ledger")) as f:
            self.assertEqual(f.read(), "start\n", "the second run started beside the first")
        with open(plan.file("go"), "w"):
            pass
        self.assertEqual(self.d.wait_run(first)["state"], "succeeded")
        self.assertEqual(self.d.wait_run(second)["state"], "succeeded")
        with open(plan.file("ledger")) as f:
            self.assertEqual(f.read(), "start\nstart\n")

    def test_a_shared_lock_serializes_plans(self):
        a = self.d.write_plan("a.yaml", self.PLAN.replace("name: locked", "name: a\nlock: gpus"))
        b = self.d.write_plan("b.yaml", self.PLAN.replace("name: locked", "name: b\nlock: gpus"))
        run, _ = self.d.apply(a, wait=False, check=0)
        self.d.wait_step(run, "work", ("running",))
        cp = self.d.ctl("apply", b.path, check=2)
        self.assertIn("lock 'gpus' is held by run %s" % run, cp.stderr)
        self.d.ctl("cancel", run, check=0)


class RetryDelayTest(DaemonTestCase):
    def test_a_retry_delay_is_waited_out_across_a_restart(self):
        plan = self.d.write_plan("retry.yaml", """\
version: 1
name: retry-delay
steps:
  - id: flaky
    run: [sh, -c, 'date +%s.%N >> @DIR@/ledger; [ -e @DIR@/second ] || { touch @DIR@/second; exit 1; }']
    retries: 1
    retry_delay: 3s
""")
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: os.path.exists(plan.file("second")), message="the first attempt")
        self.d.wait_step(run, "flaky", ("pending",))
        self.d.kill9()
        self.d.start()
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        with open(plan.file("ledger")) as f:
            times = [float(line) for line in f]
        self.assertEqual(len(times), 2)
        self.assertGreaterEqual(times[1] - times[0], 2.9, "the retry delay was forgotten")


if __name__ == "__main__":
    unittest.main()
