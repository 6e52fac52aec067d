"""kill -9 (and SIGTERM) of the daemon while a step runs, then a restart (DESIGN.md §1 "Crash
and restart"): the step's processes are deployd's whatever happens to deployd. An action still
running is reattached and awaited — never fired again, never failed — and its real exit status
is recorded, also when it ended while deployd was down; an action that provably never started
is fired; only a step whose fate cannot be known is failed as interrupted (or, idempotent,
fired again). Passing verify checks never stand in for an action that did not run. Nothing
committed is lost: the event log has no gaps and agrees with the steps' states."""

import os
import signal
import time
import unittest

from harness import DaemonTestCase, pids_with_marker, unique_marker, wait_until


def _ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def action_pids(marker):
    """The processes of an action carrying `marker` in its command line, not its supervisor
    (whose command line holds the action's), nor the shell's own short-lived forks (a child
    of the action with the same command line until it execs `sleep`)."""
    found = {}
    for p in pids_with_marker(marker):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                if b"--supervise" not in f.read():
                    found[p] = _ppid(p)
        except (OSError, ValueError, IndexError):
            pass
    return sorted(p for p, parent in found.items() if parent not in found)


def read(path):
    with open(path) as f:
        return f.read()


# A chatty action: a line every 20 ms (it would die of SIGPIPE if its output went through a
# pipe to deployd), until the test creates GO; then it exits with the status in GO.
CHATTY = """[sh, -c, 'echo fired >> @DIR@/fired; while [ ! -e @DIR@/go ]; do echo working; sleep 0.02; done; exit $(cat @DIR@/go); : %s']"""


class CrashRestartTest(DaemonTestCase):
    def wait_action(self, run, step, marker):
        self.d.wait_step(run, step, ("running",))
        return wait_until(lambda: action_pids(marker), message="the action of step %s" % step)

    def step_events(self, run, step, status=None):
        events = self.assert_events_consistent(run, status)
        return [(e["state"], e["detail"]) for e in events
                if e["step_id"] == step and e["kind"] == "step.state"]

    def chatty_plan(self, marker, extra=""):
        return self.d.write_plan("chatty.yaml", """\
version: 1
name: crash-chatty
steps:
  - id: work
    run: %s
%s  - id: after
    run: 'touch @DIR@/after-ran'
""" % (CHATTY % marker, extra))

    def test_a_running_action_survives_kill9_and_is_awaited(self):
        for how in ("kill9", "sigterm"):
            with self.subTest(how=how):
                marker = unique_marker("crash-" + how)
                plan = self.chatty_plan(marker)
                run, _ = self.d.apply(plan, wait=False, check=0)
                pids = self.wait_action(run, "work", marker)
                self.d.kill9() if how == "kill9" else self.d.stop()
                time.sleep(0.3)  # it goes on printing while deployd is away
                self.assertEqual(action_pids(marker), pids, "the action died with deployd")
                self.d.start()
                status = self.d.wait_step(run, "work", ("running",))
                self.assertEqual(self.d.step(run, "work", status).get("pid"), pids[0])
                with open(plan.file("go"), "w") as f:
                    f.write("3")
                status = self.d.wait_run(run)
                work = self.d.step(run, "work", status)
                self.assertEqual(work["state"], "failed")
                self.assertEqual(work["exit_status"], 3)
                self.assertEqual(work["reason"], "exit status 3")
                self.assertEqual(work["attempts"], 1)
                self.assertEqual(read(plan.file("fired")), "fired\n")
                log = self.d.ctl("logs", run, "work", check=0).stdout
                self.assertGreater(log.count("working"), 10)
                self.assertIn(("running", "deployd restarted; reattached to the action (pid %d)"
                               % pids[0]), self.step_events(run, "work", status))
                self.wait_no_step_processes()
                os.remove(plan.file("go"))
                os.remove(plan.file("fired"))

    def test_an_action_that_ended_while_deployd_was_down_is_judged_by_its_exit(self):
        marker = unique_marker("crash-down")
        plan = self.chatty_plan(marker, """    idempotent: true
    verify:
      - file: "@DIR@/go"
""")
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.wait_action(run, "work", marker)
        self.d.kill9()
        with open(plan.file("go"), "w") as f:
            f.write("0")
        wait_until(lambda: not action_pids(marker), message="the action to end")
        self.d.start()
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        work = self.d.step(run, "work", status)
        self.assertEqual(work["attempts"], 1, "an action that had run was fired again")
        self.assertEqual(read(plan.file("fired")), "fired\n")
        self.assertIn(("verifying", "deployd restarted; the action had exited with status 0 "
                       "(it ended while deployd was down)"), self.step_events(run, "work", status))

    def test_an_idempotent_step_is_never_running_twice(self):
        marker = unique_marker("crash-idem")
        plan = self.chatty_plan(marker, "    idempotent: true\n")
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.wait_action(run, "work", marker)
        for _ in range(3):
            self.d.kill9()
            self.d.start()
            self.d.wait_step(run, "work", ("running",))
            self.assertEqual(len(action_pids(marker)), 1, "two copies of the step at once")
        with open(plan.file("go"), "w") as f:
            f.write("0")
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        self.assertEqual(read(plan.file("fired")), "fired\n")
        self.assertEqual(self.d.step(run, "work", status)["attempts"], 1)

    def test_an_action_that_never_started_is_fired_not_verified(self):
        # deployd dies after committing the fire, before starting the action. The verify check
        # already passes (the old version answers), which proves nothing: the action runs.
        marker = unique_marker("crash-never")
        plan = self.d.write_plan("never.yaml", """\
version: 1
name: crash-never
steps:
  - id: upgrade
    run: [sh, -c, 'echo fired >> @DIR@/fired; : %s']
    verify:
      - file: "@DIR@"
""" % marker)
        self.d.stop()
        self.d.start(extra_env={"DEPLOYD_FAULT": "crash-before-start"})
        run, _ = self.d.apply(plan, wait=False, check=0)
        wait_until(lambda: not self.d.running(), message="deployd to crash before the start")
        self.assertFalse(os.path.exists(plan.file("fired")))
        self.d.start()
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        self.assertEqual(read(plan.file("fired")), "fired\n", "the action never ran")
        self.assertIn(("running", "deployd restarted; the action had never started: firing it"),
                      self.step_events(run, "upgrade", status))

    def test_unknown_fate_non_idempotent_is_interrupted_idempotent_is_fired(self):
        # deployd and the attempt's supervisor and action all die (kill -9): nothing says
        # whether the action finished its work.
        for idempotent in (False, True):
            with self.subTest(idempotent=idempotent):
                marker = unique_marker("crash-lost")
                plan = self.chatty_plan(marker, "    idempotent: true\n" if idempotent else "")
                run, _ = self.d.apply(plan, wait=False, check=0)
                self.wait_action(run, "work", marker)
                self.d.kill9()
                # The supervisor first: one that outlived its action would record how it ended.
                supervisors = [p for p in pids_with_marker("--supervise")
                               if p in pids_with_marker(self.d.tag, ("environ",))]
                for pid in supervisors + action_pids(marker):
                    os.kill(pid, signal.SIGKILL)
                wait_until(lambda: not action_pids(marker), message="the action to die")
                if idempotent:
                    with open(plan.file("go"), "w") as f:
                        f.write("0")
                self.d.start()
                status = self.d.wait_run(run)
                work = self.d.step(run, "work", status)
                if idempotent:
                    self.assertEqual(status["state"], "succeeded", status)
                    self.assertEqual(work["attempts"], 2)
                    self.assertEqual(read(plan.file("fired")), "fired\nfired\n")
                else:
                    self.assertEqual(status["state"], "failed", status)
                    self.assertEqual(work["attempts"], 1)
                    self.assertIn("interrupted", work["reason"])
                    self.assertIn("deployctl retry %s work" % run, work["reason"])
                    self.assertEqual(self.d.step(run, "after", status)["state"], "pending")
                for name in ("go", "fired"):
                    if os.path.exists(plan.file(name)):
                        os.remove(plan.file(name))

    def test_finished_runs_survive_a_crash(self):
        plan = self.d.write_plan("done.yaml", """\
version: 1
name: crash-done
steps:
  - id: only
    run: 'echo done'
""")
        run, _ = self.d.apply(plan, check=0)
        before = self.d.status_json(run)
        events_before = self.d.events(run)
        self.d.kill9()
        self.d.start()
        after = self.d.status_json(run)
        self.assertEqual(after, before)
        self.assertEqual(self.d.events(run), events_before, "a finished run was touched on restart")
        self.assertEqual(self.d.ctl("logs", run, "only", check=0).stdout, "done\n")


if __name__ == "__main__":
    unittest.main()
