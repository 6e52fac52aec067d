"""The `service` action against real systemd 252: a unit written from `exec:`, started and
proven serving, then stopped and disabled with no process left in its cgroup — read from the
hierarchy this host really has (hybrid here: cgroup2 under /sys/fs/cgroup/unified); a unit
with KillMode=process whose stop leaves a worker behind is a failure that names it."""

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
        procs = "/sys/fs/cgroup/unified%s/cgroup.procs" % cgroup

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


if __name__ == "__main__":
    main()
