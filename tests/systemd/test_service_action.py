"""The `service` action against real systemd 252: a unit written from `exec:`, started and
proven serving, then stopped and disabled with no process left in its cgroup — read from the
hierarchy this host really has (hybrid here: cgroup2 under /sys/fs/cgroup/unified); a unit
with KillMode=process whose stop leaves a worker behind is a failure that names it."""

import os
import re
import sys
import unittest

from systemd_case import SystemdTestCase, harness, main

UNIT = "e2e-model.service"


class ServiceActionTest(SystemdTestCase):
    def test_start_verify_stop_disable(self):
        self.unit_cleanup(UNIT)
        self.d.install()
        port = harness.free_port()
        launch = self.d.write_plan("launch.yaml", """\
version: 1
name: launch
steps:
  - id: launch
    service:
      unit: %s
      state: started
      enabled: true
      exec: [python3, -m, http.server, '%d', --bind, 127.0.0.1, --directory, /]
    verify:
      - http: {url: 'http://127.0.0.1:%d/', status: 200}
        every: 100ms
        within: 30s
""" % (UNIT, port, port))
        run, cp = self.d.apply(launch, check=0)
        props = self.d.show(UNIT, "ActiveState", "UnitFileState", "Type", "KillMode",
                            "MainPID", "ControlGroup")
        self.assertEqual(props["ActiveState"], "active")
        self.assertEqual(props["UnitFileState"], "enabled")
        self.assertEqual(props["Type"], "exec")
        self.assertEqual(props["KillMode"], "mixed")
        self.assertEqual(props["ControlGroup"], "/system.slice/" + UNIT)
        self.assertNotEqual(props["MainPID"], "0")

        stop = self.d.write_plan("stop.yaml", """\
version: 1
name: stop
steps:
  - id: stop
    service: {unit: %s, state: stopped, enabled: false}
""" % UNIT)
        run, cp = self.d.apply(stop, check=0)
        log = self.d.ctl("logs", run, "stop", check=0).stdout
        self.assertIn("no process left in its cgroup", log)
        props = self.d.show(UNIT, "ActiveState", "UnitFileState", "MainPID")
        self.assertEqual(props["ActiveState"], "inactive")
        self.assertEqual(props["UnitFileState"], "disabled")
        # Once stopped, the unit's cgroup is empty or gone.
        procs = self.d.sh("cat", self.d.cgroup_procs("/system.slice/" + UNIT), check=False).stdout
        self.assertEqual(procs.strip(), "")

    def test_a_process_left_by_killmode_process_fails_the_stop_and_is_named(self):
        # vLLM's workers outliving a unit with KillMode=process: systemd calls the unit
        # stopped and lists the worker in its cgroup.
        unit = "e2e-leftover.service"
        self.unit_cleanup(unit)
        self.d.install()
        self.d.sh("tee", "/etc/systemd/system/" + unit, input="""\
[Service]
Type=exec
KillMode=process
ExecStart=/bin/bash -c '(exec -a VLLM::Worker_TP7 sleep 1000) & exec sleep 1000'
""")
        self.d.systemctl("daemon-reload")
        self.d.systemctl("start", unit)
        cgroup = self.d.show(unit, "ControlGroup")["ControlGroup"]
        procs = self.d.cgroup_procs(cgroup)

        def worker():
            pids = self.d.sh("cat", procs).stdout.split()
            main = self.d.show(unit, "MainPID")["MainPID"]
            return [p for p in pids if p != main]
        harness.wait_until(lambda: worker(), timeout=10, message="the worker in " + procs)
        (leftover,) = worker()
        self.addCleanup(self.d.sh, "kill", "-9", leftover, check=False)

        stop = self.d.write_plan("stop.yaml", """\
version: 1
name: stop
steps:
  - id: stop
    service: {unit: %s, state: stopped}
""" % unit)
        run, cp = self.d.apply(stop, check=1)
        step = self.d.step(run, "stop")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"], "1 process left in %s's cgroup after stop: pid %s "
                         "(VLLM::Worker_TP7)" % (unit, leftover))
        self.assertEqual(self.d.show(unit, "ActiveState")["ActiveState"], "inactive")
        # systemd agrees: the unit is stopped and the worker is still in its cgroup.
        self.assertIn(leftover, self.d.sh("cat", procs).stdout.split())


class ServiceLifecycleTest(SystemdTestCase):
    """What a deployment meets: a changed unit file, a server that dies at start, a program
    that cannot be executed, and a restart of deployd while the step verifies."""

    def launch(self, unit, exec_, verify="service: UNIT", name="launch"):
        return self.d.write_plan(name + ".yaml", """\
version: 1
name: %s
steps:
  - id: launch
    service: {unit: %s, state: started, exec: %s}
    verify:
      - %s
        every: 100ms
        within: 60s
""" % (name, unit, exec_, verify.replace("UNIT", unit)))

    def test_a_changed_unit_file_restarts_the_running_unit(self):
        unit = "e2e-changed.service"
        self.unit_cleanup(unit)
        self.d.install()
        self.d.apply(self.launch(unit, "[sleep, '1001']", name="first"), check=0)
        first = self.d.show(unit, "MainPID", "InvocationID")
        run, cp = self.d.apply(self.launch(unit, "[sleep, '1002']", name="second"), check=0)
        log = self.d.ctl("logs", run, "launch", check=0).stdout
        self.assertIn("the unit file changed while %s was running: restarting it\n"
                      "systemctl restart %s\n" % (unit, unit), log)
        after = self.d.show(unit, "MainPID", "InvocationID", "NeedDaemonReload")
        self.assertNotEqual(after["MainPID"], first["MainPID"])
        self.assertNotEqual(after["InvocationID"], first["InvocationID"])
        self.assertEqual(after["NeedDaemonReload"], "no")
        self.assertEqual(self.d.sh("cat", "/proc/%s/cmdline" % after["MainPID"]).stdout,
                         "/usr/bin/sleep\x001002\x00")
        # Unchanged, it is left alone.
        run, cp = self.d.apply(self.launch(unit, "[sleep, '1002']", name="second"), check=0)
        self.assertEqual(self.d.show(unit, "MainPID")["MainPID"], after["MainPID"])

    def test_a_server_dying_at_start_fails_the_step_with_its_exit_and_last_lines(self):
        unit = "e2e-dies.service"
        self.unit_cleanup(unit)
        self.d.install()
        run, cp = self.d.apply(self.launch(
            unit, "[sh, -c, 'echo vllm serve: error: argument --port: invalid int; exit 3']"),
            check=1)
        step = self.d.step(run, "launch")
        # Real systemd fails the start job itself when the process exits before the job is
        # done (Type=exec), or reports it started and the 2 s settle sees it die.
        self.assertRegex(step["reason"], r"^(systemctl start %s failed: Job for %s failed because "
                         r"the control process exited with error code\.; |%s is not running "
                         r"\(activating/auto-restart\): )main process exited with status 3 "
                         r"\(ExecMainStatus=3\)$" % ((re.escape(unit),) * 3))
        log = self.d.ctl("logs", run, "launch", check=0).stdout
        self.assertIn("last journal lines of %s:\n" % unit, log)
        self.assertIn("  vllm serve: error: argument --port: invalid int\n", log)
        self.assertIn("  %s: Main process exited, code=exited, status=3/NOTIMPLEMENTED\n" % unit,
                      log)

    def test_a_program_that_cannot_be_executed_is_203_exec(self):
        unit = "e2e-noexec.service"
        self.unit_cleanup(unit)
        self.d.install()
        run, cp = self.d.apply(self.launch(unit, "[/opt/nowhere/vllm, serve]"), check=1)
        step = self.d.step(run, "launch")
        self.assertEqual(step["reason"], "systemctl start %s failed: Job for %s failed because "
                         "the control process exited with error code.; main process exited with "
                         "status 203 (EXEC: the program could not be executed) "
                         "(ExecMainStatus=203)" % (unit, unit))
        log = self.d.ctl("logs", run, "launch", check=0).stdout
        self.assertIn("  %s: Main process exited, code=exited, status=203/EXEC\n" % unit, log)

    def test_a_step_verifying_when_deployd_restarts_is_verified_again_not_restarted(self):
        unit = "e2e-reverify.service"
        self.unit_cleanup(unit)
        self.d.install()
        port = harness.free_port()
        go = self.d.inside + "/go"
        plan = self.launch(unit, "[sh, -c, 'while [ ! -e %s ]; do sleep 0.1; done; exec python3 "
                           "-m http.server %d --bind 127.0.0.1 --directory /']" % (go, port),
                           verify="http: {url: 'http://127.0.0.1:%d/', status: 200}" % port)
        run, cp = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "launch", ("verifying",))
        main = self.d.show(unit, "MainPID")["MainPID"]
        self.d.restart()
        open(os.path.join(self.d.dir, "go"), "w").close()
        status = self.d.wait_run(run, timeout=60)
        step = self.d.step(run, "launch", status)
        self.assertEqual((status["state"], step["attempts"]), ("succeeded", 1), status)
        self.assertEqual(self.d.show(unit, "MainPID", "NRestarts"),
                         {"MainPID": main, "NRestarts": "0"})


OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"


class FailOnTest(SystemdTestCase):
    """fail_on meets the lines of the unit's invocations since the step fired, wherever they
    fall. With Type=exec real systemd often journals a server's first lines before its
    "Started" line: a fatal line printed at once fails the step every time, whether the server
    keeps running (the API server of a vLLM whose worker died) or exits. Not the old server's
    last words during a restart, not an older start's lines in the journal's tail; and
    everything said while deployd itself was down."""

    def plan(self, name, unit, script, state="started", verify="service: UNIT"):
        return self.d.write_plan(name + ".yaml", """\
version: 1
name: %s
steps:
  - id: launch
    service:
      unit: %s
      state: %s
      exec: [sh, -c, '%s', '%s']
    watch:
      fail_on: vllm
    verify:
      - %s
        every: 200ms
        within: 30s
""" % (name, unit, state, script, OOM_LINE, verify.replace("UNIT", unit)))

    def assert_every_start_fails_on_the_line(self, unit, then, starts):
        self.unit_cleanup(unit)
        plan = self.plan("launch", unit, 'echo "$0"; ' + then, state="restarted",
                         verify="tcp: 127.0.0.1:9")
        reasons = []
        for _ in range(starts):
            # The unit deployd writes allows 3 starts in 30 minutes (StartLimitBurst=).
            self.d.systemctl("reset-failed", unit, check=False)
            run, cp = self.d.apply(plan, check=1)
            reasons.append(self.d.step(run, "launch")["reason"])
        missed = [r for r in reasons if OOM_LINE not in r or "CUDA out of memory: " not in r]
        self.assertEqual(missed, [], "%d of %d starts missed the line" % (len(missed), starts))

    def test_a_fatal_first_line_of_a_server_that_keeps_running_fails_every_start(self):
        self.d.install()
        self.assert_every_start_fails_on_the_line("e2e-oom-runs.service", "exec sleep 1000", 10)

    def test_a_fatal_first_line_of_a_server_that_exits_fails_every_start(self):
        self.d.install()
        self.assert_every_start_fails_on_the_line("e2e-oom-exits.service", "exit 1", 3)

    def test_a_fatal_line_while_the_step_verifies_fails_it_at_once(self):
        # Not when the readiness check runs out: the engine died, the journal said so.
        unit = "e2e-engine-dies.service"
        self.unit_cleanup(unit)
        self.d.install()
        go = self.d.inside + "/go"
        script = ('echo "Loading safetensors checkpoint shards:   0%% Completed | 0/4"; '
                  'while [ ! -e %s ]; do sleep 0.1; done; echo "RuntimeError: Engine core '
                  'initialization failed. See root cause above."; exit 1' % go)
        plan = self.plan("launch", unit, script, verify="tcp: 127.0.0.1:9")
        run, cp = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "launch", ("verifying",))
        open(os.path.join(self.d.dir, "go"), "w").close()
        status = self.d.wait_run(run, timeout=20)
        step = self.d.step(run, "launch", status)
        self.assertEqual(step["state"], "failed", status)
        # journald may file systemd's line about the exit before the server's own last line.
        self.assertIn(step["reason"], (
            "the engine died: the root cause is in the lines before (`deployctl logs`): "
            "RuntimeError: Engine core initialization failed. See root cause above.",
            "the server's main process died (the lines before say why): %s: Main process "
            "exited, code=exited, status=1/FAILURE" % unit))
        self.assertIn("Loading safetensors checkpoint shards",
                      self.d.ctl("logs", run, "launch", check=0).stdout)

    def test_the_old_servers_last_words_during_a_restart_are_not_the_new_ones(self):
        unit = "e2e-last-words.service"
        self.unit_cleanup(unit)
        self.d.install()
        # A server that prints a fatal-looking line when it is stopped, many times: the more of
        # them journald reads after the restart has begun, the likelier it stamps some with the
        # new invocation.
        script = ('trap "for i in \\$(seq 50); do echo \\"\\$0\\"; done; exit 0" TERM; echo serving; '
                  'while :; do sleep 0.1; done')
        run, cp = self.d.apply(self.plan("start", unit, script), check=0)
        shown = self.d.show(unit, "InvocationID", "MainPID")
        old, old_pid = shown["InvocationID"], shown["MainPID"]
        run, cp = self.d.apply(self.plan("restart", unit, script, state="restarted"), check=0)
        self.assertEqual(self.d.step(run, "launch")["state"], "succeeded")
        self.assertNotEqual(self.d.show(unit, "InvocationID")["InvocationID"], old)
        # The old server did say it. journald stamps a line with the invocation the unit's
        # cgroup names when it reads the line: once the restart has begun, often the new one's
        # (seen in 1 run of 6), so deployd tells it by the old main process that wrote it.
        said = [e for e in self.d.journal_entries(unit) if e.get("MESSAGE") == OOM_LINE]
        self.assertEqual([e["_PID"] for e in said], [old_pid] * 50)
        sys.stderr.write("last words stamped with the new invocation: %d of 50\n"
                         % sum(e["_SYSTEMD_INVOCATION_ID"] != old for e in said))
        self.assertNotIn(OOM_LINE, self.d.ctl("logs", run, "launch", check=0).stdout)

    def test_an_older_starts_fatal_line_is_not_the_reason_a_start_fails(self):
        unit = "e2e-bad-flag.service"
        self.unit_cleanup(unit)
        self.d.install()
        bad = self.d.inside + "/bad-flag"
        script = ('if [ -e %s ]; then echo "serve: error: unrecognized arguments: --bogus"; '
                  'exit 2; fi; echo "$0"; exec sleep 1000' % bad)
        plan = self.plan("launch", unit, script, state="restarted")
        run, cp = self.d.apply(plan, check=1)
        self.assertIn(OOM_LINE, self.d.step(run, "launch")["reason"])
        open(os.path.join(self.d.dir, "bad-flag"), "w").close()
        self.d.systemctl("reset-failed", unit, check=False)
        run, cp = self.d.apply(plan, check=1)
        step = self.d.step(run, "launch")
        self.assertNotIn("CUDA out of memory", step["reason"])
        # The action's own finding, or systemd's line about this start's exit (fail_on's
        # `vllm` set), whichever comes first.
        self.assertRegex(step["reason"], r"main process exited with status 2 |Main process "
                         r"exited, code=exited, status=2/INVALIDARGUMENT$")
        self.assertNotIn(OOM_LINE, self.d.ctl("logs", run, "launch", check=0).stdout)

    def test_a_fatal_line_said_while_deployd_was_down_fails_the_step_after_its_restart(self):
        unit = "e2e-while-down.service"
        self.unit_cleanup(unit)
        self.d.install()
        go = self.d.inside + "/go"
        script = ('echo loading; while [ ! -e %s ]; do sleep 0.1; done; echo "$0"; exec sleep 1000'
                  % go)
        plan = self.plan("launch", unit, script, verify="tcp: 127.0.0.1:9")
        run, cp = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "launch", ("verifying",))
        self.d.stop()
        open(os.path.join(self.d.dir, "go"), "w").close()
        harness.wait_until(lambda: OOM_LINE in self.d.journal(unit), timeout=30,
                           message="the line in the journal")
        self.d.start()
        status = self.d.wait_run(run, timeout=60)
        step = self.d.step(run, "launch", status)
        self.assertEqual(step["state"], "failed", status)
        self.assertIn(OOM_LINE, step["reason"])
        # Read again from the fire, what the log had already is not written twice.
        log = self.d.ctl("logs", run, "launch", check=0).stdout
        self.assertEqual((log.count("\nloading\n"), log.count(OOM_LINE + "\n")), (1, 1), log)


if __name__ == "__main__":
    main()
