"""The `service` action against real systemd 252: a unit written from `exec:`, started and
proven serving, then stopped and disabled with no process left in its cgroup — read from the
hierarchy this host really has (hybrid here: cgroup2 under /sys/fs/cgroup/unified)."""

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
        procs = self.d.sh("cat", "/sys/fs/cgroup/unified/system.slice/%s/cgroup.procs" % UNIT,
                          check=False).stdout
        self.assertEqual(procs.strip(), "")


if __name__ == "__main__":
    main()
