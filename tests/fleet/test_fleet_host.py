"""deployctl --host ssh://…: every verb reaches the deployd of another host through real OpenSSH
(`ssh HOST deployctl dial-stdio`), and each way of failing names its layer."""

import json
import os
import re
import time

import fleet_case
import harness

FLEET = fleet_case.module_fleet(hosts=2)


class HostVerbs(fleet_case.FleetTestCase):
    FLEET = FLEET

    def on(self, host, *args, check=None, env=None):
        return self.fleet.ctl("--host", host.url(), *args, check=check, env=env)

    def state(self, host, run):
        return json.loads(self.on(host, "status", run, "--json").stdout)["state"]

    def wait_state(self, host, run, states):
        return harness.wait_until(lambda: self.state(host, run) in states and True,
                                  message="run %s on %s to be %s" % (run, host.name, states))

    def test_every_verb_over_ssh(self):
        h = self.hosts[0]
        gate = os.path.join(h.dir, "gate-%d" % time.monotonic_ns())
        plan = self.write("hello.yaml", """
version: 1
name: hello
vars: {gate: ""}
steps:
  - id: where
    run: hostname -I; echo "as $(id -un)"
  - id: wait-for-gate
    run: 'while [ ! -e ${gate} ]; do sleep 0.05; done; echo gate open'
  - id: confirm
    approval: check the gate
""")
        # apply sends the plan text: the file is on this side only.
        cp = self.on(h, "apply", plan, "--var", "gate=" + gate, check=0)
        run = cp.stdout.split()[0]
        self.wait_state(h, run, ("running",))
        self.on(h, "pause", run, check=0)
        self.assertEqual(self.state(h, run), "paused")
        self.on(h, "resume", run, check=0)
        self.assertEqual([r for r, _ in h.runs("hello")], [run])
        cp = self.on(h, "runs", check=0)
        self.assertIn(run, cp.stdout)
        runs = json.loads(self.on(h, "runs", "--json", check=0).stdout)
        self.assertEqual([r["id"] for r in runs if r["plan"] == "hello"], [run])
        with open(gate, "w"):
            pass
        self.wait_state(h, run, ("waiting",))
        self.on(h, "approve", run, "confirm", check=0)
        cp = self.on(h, "watch", run, check=0)  # not a terminal: the plain lines
        self.assertIn("run %s succeeded" % run, cp.stdout)
        cp = self.on(h, "logs", run, "where", check=0)
        self.assertIn(h.address, cp.stdout)
        self.assertIn("as root", cp.stdout)
        cp = self.on(h, "status", run, check=0)
        self.assertIn("succeeded", cp.stdout)
        cp = self.on(h, "plan", plan, "--var", "gate=" + gate, check=0)
        self.assertIn("plan hello (%s): 3 steps" % plan, cp.stdout)
        # DEPLOYD_HOST stands for --host.
        cp = self.fleet.ctl("status", run, "--json", env={"DEPLOYD_HOST": h.url()}, check=0)
        self.assertEqual(json.loads(cp.stdout)["id"], run)
        # The reads of the host as a whole: the plan's history there, its metrics, its daemon.
        history = json.loads(self.on(h, "history", "hello", "--json", check=0).stdout)
        self.assertIn((run, "succeeded"), [(r["run"], r["state"]) for r in history["runs"]])
        self.assertRegex(self.on(h, "metrics", check=0).stdout,
                         r'(?m)^deployd_runs_finished_total\{plan="hello",state="succeeded"\} '
                         r'[1-9]')
        version = json.loads(self.on(h, "version", "--json", check=0).stdout)
        self.assertEqual(version["daemon"]["version"], version["client"]["version"])
        self.assertIn(h.address, version["daemon"]["socket"])

    def test_failure_verbs_over_ssh(self):
        h = self.hosts[0]
        flag = os.path.join(h.dir, "fixed-%d" % time.monotonic_ns())
        plan = self.write("flaky.yaml", """
version: 1
name: flaky
vars: {flag: ""}
steps:
  - id: check
    run: 'echo checking; [ -e ${flag} ] || { echo "not fixed yet" >&2; exit 3; }'
  - id: after
    run: 'for i in 1 2 3; do echo line $i; sleep 0.1; done'
  - id: never
    run: 'exit 9'
""")
        cp = self.on(h, "apply", plan, "--var", "flag=" + flag, "--wait", check=1)
        run = cp.stdout.split()[0]
        cp = self.on(h, "why", run, check=1)
        self.assertIn("failing step: check, attempt 1", cp.stdout)
        self.assertIn("not fixed yet", cp.stdout)
        why = json.loads(self.on(h, "why", run, "--json", check=1).stdout)
        self.assertEqual(why["run"], run)
        with open(flag, "w"):
            pass
        self.on(h, "skip", run, "never", check=0)
        cp = self.on(h, "retry", run, "--wait", check=0)
        self.assertIn("run %s succeeded" % run, cp.stdout)
        cp = self.on(h, "logs", run, "after", "-f", check=0)
        self.assertEqual(cp.stdout, "line 1\nline 2\nline 3\n")

    def test_cancel_over_ssh(self):
        h = self.hosts[1]
        plan = self.write("long.yaml", """
version: 1
name: long
steps:
  - id: sleep
    run: [sleep, "300"]
""")
        run = self.on(h, "apply", plan, check=0).stdout.split()[0]
        self.wait_state(h, run, ("running",))
        cp = self.on(h, "cancel", run, check=0)
        self.assertEqual(cp.stdout, "run %s cancelled\n" % run)
        self.assertEqual(self.state(h, run), "cancelled")


class HostErrors(fleet_case.FleetTestCase):
    """Each layer that can refuse says so, with the host, and deployctl exits 3."""

    FLEET = FLEET

    def error(self, url, *args):
        cp = self.fleet.ctl("--host", url, *(args or ("runs",)))
        self.assertEqual(cp.returncode, 3, cp.stderr)
        self.assertEqual(cp.stdout, "")
        return cp.stderr

    def test_ssh_cannot_connect(self):
        h = self.hosts[1]
        url = h.url(port=2222)
        self.assertEqual(
            self.error(url),
            "deployctl: error: ssh could not connect to %s: ssh: connect to host %s port 2222: "
            "Connection refused\n" % (url, h.address))

    def test_no_deployctl_on_the_host(self):
        h = self.hosts[1]
        h.start_sshd(2201, None)  # its sessions' PATH has no deployctl
        url = h.url(port=2201)
        self.assertRegex(
            self.error(url),
            r"^deployctl: error: no deployctl on %s: \S+: .*deployctl: (command )?not found "
            r"\(install deployd there: its deployctl must be on the PATH of ssh sessions\)\n$"
            % re.escape(url))

    def test_daemon_not_running_there(self):
        h = self.hosts[1]
        h.daemon.stop()
        try:
            err = self.error(h.url())
        finally:
            h.daemon.start()
        self.assertRegex(
            err, r"^deployctl: error: deployd is not running on %s: cannot reach deployd at %s: "
                 r"(No such file or directory|Connection refused) \(is it running\? "
                 r"`systemctl start deployd`\)\n$" % (re.escape(h.url()),
                                                      re.escape(h.daemon.socket)))

    def test_permission_denied_there(self):
        h = self.hosts[1]
        user = self.fleet.add_user()
        # The socket (0660, root's) refuses the ssh user before deployd sees it…
        self.assertEqual(
            self.error(h.url(user)),
            "deployctl: error: permission denied on %s: %s may not use %s: Permission denied "
            "(the ssh user must be root or in deployd's group there)\n"
            % (h.url(user), user, h.daemon.socket))
        # … and where the file would let it through, deployd's SO_PEERCRED rule does.
        os.chmod(h.daemon.socket, 0o666)
        try:
            err = self.error(h.url(user))
        finally:
            os.chmod(h.daemon.socket, 0o660)
        import pwd
        self.assertEqual(
            err, "deployctl: error: permission denied on %s: uid %d may not control deployd "
                 "(allowed: root, uid 0 and the configured group) (the ssh user must be root or "
                 "in deployd's group there)\n" % (h.url(user), pwd.getpwnam(user).pw_uid))

    def test_not_an_ssh_address(self):
        cp = self.fleet.ctl("--host", "gpu1:22", "runs", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --host: 'gpu1:22' is not an ssh address "
                                    "(it must start with ssh://; expected "
                                    "ssh://[USER@]HOST[:PORT])\n")
        cp = self.fleet.ctl("runs", env={"DEPLOYD_HOST": "ssh://root@h:99999"}, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: $DEPLOYD_HOST: 'ssh://root@h:99999' is "
                                    "not an ssh address (the port must be a number from 1 to "
                                    "65535; expected ssh://[USER@]HOST[:PORT])\n")


if __name__ == "__main__":
    fleet_case.main()
