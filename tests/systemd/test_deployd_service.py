"""deployd.service under real systemd 252 (PID 1 in the test container): the readiness
protocol as systemd sees it, a run carried out by the service, and a clean stop."""

import sys
import unittest

from systemd_case import SystemdTestCase, main

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


if __name__ == "__main__":
    main()
