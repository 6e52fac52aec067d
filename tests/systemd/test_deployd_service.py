"""deployd.service under real systemd 252 (PID 1 in the test container): the readiness
protocol as systemd sees it, a run carried out by the service, and a clean stop; `systemctl
reload` (SIGHUP) re-reading the configuration and deployd's lines reaching the journal with
their priorities; a hung deployd killed by the watchdog and restarted, its run going on;
`systemctl restart` and `stop` leaving a background server and a chatty foreground step
running, both reattached by the next start."""

import os
import sys
import unittest
import urllib.request

from systemd_case import SystemdTestCase, harness, main

PLAN = """\
version: 1
name: hello
steps:
  - id: hello
    run: [sh, -c, 'echo hello from $(cat /proc/1/comm)']
    verify:
      - run: [true]
"""


class DeploydServiceTest(SystemdTestCase):
    def test_ready_status_run_and_stop(self):
        self.d.install()
        # Type=notify: `systemctl start` returned, so systemd got READY=1.
        props = self.d.show("deployd.service", "ActiveState", "SubState", "StatusText",
                            "WatchdogUSec", "NotifyAccess", "Type")
        self.assertEqual(props["ActiveState"], "active")
        self.assertEqual(props["SubState"], "running")
        self.assertEqual(props["Type"], "notify")
        self.assertEqual(props["WatchdogUSec"], "30s")
        self.assertTrue(props["StatusText"], "deployd sent no STATUS=")

        plan = self.d.write_plan("hello.yaml", PLAN)
        run, cp = self.d.apply(plan, check=0)
        self.assertIn("succeeded", cp.stdout)
        # The step ran under the container's systemd, not on the host.
        log = self.d.ctl("logs", run, "hello", check=0).stdout
        self.assertIn("hello from systemd", log)

        self.d.stop()
        props = self.d.show("deployd.service", "ActiveState", "Result", "ExecMainStatus")
        self.assertEqual(props["ActiveState"], "inactive")
        self.assertEqual(props["Result"], "success")
        self.assertEqual(props["ExecMainStatus"], "0")

    def test_starts_after_the_network_is_online(self):
        # Runs resumed at boot download weights at once: network.target is not enough.
        self.d.install()
        props = self.d.show("deployd.service", "After", "Wants")
        self.assertIn("network-online.target", props["After"].split())
        self.assertIn("network-online.target", props["Wants"].split())

    def test_children_get_nothing_systemd_gave_deployd_alone(self):
        # NOTIFY_SOCKET in a child would let it speak for deployd (READY=1, STOPPING=1);
        # JOURNAL_STREAM would name deployd's stderr, not the child's.
        self.d.install()
        plan = self.d.write_plan("env.yaml", """\
version: 1
name: env
steps:
  - id: env
    run: [env]
  - id: env-background
    run: [env]
    background: true
""")
        run, cp = self.d.apply(plan, check=0)
        for step in ("env", "env-background"):
            env = self.d.ctl("logs", run, step, check=0).stdout
            self.assertIn("PATH=", env)
            for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM",
                        "INVOCATION_ID"):
                self.assertNotRegex(env, r"(?m)^%s=" % var, step)


class ReloadTest(SystemdTestCase):
    def test_reload_rereads_the_configuration_and_deployd_keeps_running(self):
        unit = "e2e-reloaded.service"
        self.addCleanup(self.remove_runtime_unit, unit)
        self.d.install(config="unit_dir: /etc/systemd/system\n")
        pid = self.d.main_pid()
        self.d.write_file("deployd.yaml", "unit_dir: /run/systemd/system\ngroup: e2e-nogroup\n")
        self.d.systemctl("reload", "deployd.service")
        harness.wait_until(lambda: "SIGHUP: reloaded" in self.d.log(), timeout=30,
                           message="the reload in deployd's journal")
        props = self.d.show("deployd.service", "ActiveState", "SubState", "MainPID", "NRestarts")
        self.assertEqual(props, {"ActiveState": "active", "SubState": "running",
                                 "MainPID": str(pid), "NRestarts": "0"})

        # Journal detection: stderr is the journal stream, so each line carries its priority
        # and no "<N>" prefix or timestamp of deployd's own.
        entries = {e["MESSAGE"]: e for e in self.d.journal_entries("deployd.service")
                   if isinstance(e.get("MESSAGE"), str) and "SIGHUP" in e["MESSAGE"]}
        warning = ("SIGHUP: group changed to 'e2e-nogroup': it takes effect when deployd "
                   "restarts")
        self.assertEqual(entries[warning]["PRIORITY"], "4", entries)
        self.assertEqual(entries["SIGHUP: reloaded %s/deployd.yaml" % self.d.inside]["PRIORITY"],
                         "6", entries)

        # The reloaded unit_dir applies to the next service step.
        plan = self.d.write_plan("launch.yaml", """\
version: 1
name: launch
steps:
  - id: launch
    service: {unit: %s, state: started, exec: [sleep, infinity]}
""" % unit)
        run, cp = self.d.apply(plan, check=0)
        self.assertEqual(self.d.show(unit, "FragmentPath", "ActiveState"),
                         {"FragmentPath": "/run/systemd/system/" + unit, "ActiveState": "active"})

    def remove_runtime_unit(self, unit):
        self.d.systemctl("stop", unit, check=False)
        self.d.sh("rm", "-f", "/run/systemd/system/" + unit, check=False)
        self.d.systemctl("daemon-reload", check=False)


WAIT_FOR_GO = """\
version: 1
name: wait
steps:
  - id: wait
    run: [sh, -c, 'echo waiting; while [ ! -e @DIR@/go ]; do sleep 0.1; done; echo went']
"""


class WatchdogTest(SystemdTestCase):
    def test_a_hung_deployd_is_killed_by_the_watchdog_restarted_and_its_run_goes_on(self):
        self.d.install(service=["WatchdogSec=5s"])
        plan = self.d.write_plan("wait.yaml", WAIT_FOR_GO)
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "wait", ("running",))
        # While its loop runs, systemd records each WATCHDOG=1 deployd sends (every 2.5 s here).
        def last_ping():
            return self.d.show("deployd.service", "WatchdogTimestampMonotonic")[
                "WatchdogTimestampMonotonic"]
        first = last_ping()
        harness.wait_until(lambda: last_ping() not in ("", "0", first), timeout=20,
                           message="systemd to record a WATCHDOG=1 after %s" % first)
        hung = self.d.main_pid()
        self.d.sh("kill", "-STOP", str(hung))  # the main loop stops: no more WATCHDOG=1

        def restarted():
            props = self.d.show("deployd.service", "MainPID", "ActiveState", "NRestarts")
            return props if props["MainPID"] not in ("0", str(hung)) and \
                props["ActiveState"] == "active" else None
        props = harness.wait_until(restarted, timeout=60, message="systemd to restart deployd")
        self.assertEqual(props["NRestarts"], "1")
        log = self.d.log()
        self.assertIn("deployd.service: Watchdog timeout (limit 5s)!", log)
        self.assertFalse(self.d.alive(hung), "the hung deployd is still there")

        # The new deployd reattached the step: it ends when the step does.
        open(os.path.join(plan.work, "go"), "w").close()
        status = self.d.wait_run(run, timeout=60)
        self.assertEqual(status["state"], "succeeded", status)
        self.assertIn("went", self.d.ctl("logs", run, "wait", check=0).stdout)


class RestartTest(SystemdTestCase):
    def test_restart_and_stop_leave_a_server_and_a_chatty_step_running(self):
        port = harness.free_port()
        self.d.install()
        plan = self.d.write_plan("two.yaml", """\
version: 1
name: two
steps:
  - id: server
    run: [python3, -m, http.server, '%d', --bind, 127.0.0.1, --directory, /]
    background: true
    verify:
      - http: {url: 'http://127.0.0.1:%d/', status: 200}
        every: 100ms
        within: 30s
  - id: chatty
    run: [sh, -c, 'i=0; while [ ! -e @DIR@/go ]; do i=$((i+1)); echo chatty $i; sleep 0.02; done; echo chatty done']
""" % (port, port))
        run, _ = self.d.apply(plan, wait=False, check=0)
        self.d.wait_step(run, "chatty", ("running",))
        # "running" is committed before the supervisor reports the action's pid.
        status = harness.wait_until(
            lambda: (lambda s: s if self.d.step(run, "chatty", s).get("pid") else None)(
                self.d.status_json(run)), message="the chatty step's pid")
        server = self.d.step(run, "server", status)["pid"]
        chatty = self.d.step(run, "chatty", status)["pid"]
        self.assertTrue(server and chatty, status)
        log = os.path.join(self.d.state_dir, "logs", run, "chatty.log")

        def grows():
            size = os.path.getsize(log)
            harness.wait_until(lambda: os.path.getsize(log) > size, timeout=10,
                               message="the chatty step's log to grow")

        def both_alive():
            self.assertTrue(self.d.alive(server), "the server is gone")
            self.assertTrue(self.d.alive(chatty), "the chatty step is gone")
            with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10) as r:
                self.assertEqual(r.status, 200)
            grows()

        old = self.d.main_pid()
        self.d.restart()
        self.assertNotEqual(self.d.main_pid(), old)
        both_alive()
        self.assertIn(self.d.step(run, "chatty")["state"], ("running",))

        self.d.stop()
        self.assertEqual(self.d.show("deployd.service", "ActiveState")["ActiveState"], "inactive")
        both_alive()  # the output still reaches the log through the step's supervisor

        self.d.start()
        open(os.path.join(plan.work, "go"), "w").close()
        status = self.d.wait_run(run, timeout=60)
        self.assertEqual(status["state"], "succeeded", status)
        self.assertEqual(self.d.step(run, "server", status)["pid"], server)
        self.assertTrue(self.d.alive(server), "the server did not outlive its run")
        text = self.d.ctl("logs", run, "chatty", check=0).stdout
        self.assertIn("chatty done", text)
        numbers = [int(line.split()[1]) for line in text.splitlines()
                   if line.startswith("chatty ") and line.split()[1].isdigit()]
        self.assertEqual(numbers, list(range(1, len(numbers) + 1)), "lines were lost")


if __name__ == "__main__":
    main()
