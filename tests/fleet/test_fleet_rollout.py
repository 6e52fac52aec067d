"""deployctl rollout over six namespace hosts with real sshd: batches in Ansible's list form,
max-fail stopping the rollout with later hosts untouched, why and retry, the coordinator killed
with SIGKILL mid-rollout, and Ansible inventories (INI and YAML, groups, children, vars).

Every step of the plans appends to one ledger file (the hosts share this machine's file
system), so the test sees what really ran, in what order; the hosts' own databases say how many
runs each got."""

import json
import os
import re
import signal
import subprocess
import threading
import time

import fleet_case
import harness

FLEET = fleet_case.module_fleet(hosts=6)

PLAN = """
version: 1
name: NAME
vars:
  ledger: ""
  inventory_hostname: ""
  model_dir: none
  gate: ""
  fail_unless: ""
steps:
  - id: start
    run: 'echo "START ${inventory_hostname} ${model_dir}" >> ${ledger}'
  - id: work
    run: |
      [ -z "${gate}" ] || while [ ! -e "${gate}" ]; do sleep 0.05; done
      if [ -n "${fail_unless}" ] && [ ! -e "${fail_unless}" ]; then
        echo "the model is not there" >&2; exit 4
      fi
      echo "END ${inventory_hostname}" >> ${ledger}
"""


class RolloutTestCase(fleet_case.FleetTestCase):
    FLEET = FLEET

    def setUp(self):
        super().setUp()
        self.coordinator = self.fleet.coordinator()
        self.addCleanup(self.coordinator.cleanup)
        self.coordinator.start()
        self.name = "p%d" % (time.monotonic_ns() % 10 ** 9)
        self.ledger = self.write(self.name + ".ledger", "")
        self.plan = self.write(self.name + ".yaml", PLAN.replace("NAME", self.name))

    def ctl(self, *args, check=None, timeout=harness.CTL_TIMEOUT):
        return self.fleet.ctl(*args, check=check, timeout=timeout,
                              env={"DEPLOYD_SOCKET": self.coordinator.socket})

    def ini(self, extra_host_vars=None, extra=""):
        extra_host_vars = extra_host_vars or {}
        lines = ["[gpus]"]
        for h in self.hosts:
            lines.append("%s ansible_host=%s ansible_user=root %s" % (
                h.name, h.address, extra_host_vars.get(h.name, "")))
        lines += ["", "[gpus:vars]", "ledger=" + self.ledger, "model_dir=/srv/default", ""]
        return self.write(self.name + ".ini", "\n".join(lines) + extra)

    def ledger_lines(self):
        with open(self.ledger) as f:
            return [l.split() for l in f.read().splitlines()]

    def runs_of(self, host):
        return host.runs(self.name)

    def rollout(self, *args, check=0):
        cp = self.ctl("rollout", self.plan, *args, check=check, timeout=240)
        return cp.stdout.split()[0], cp

    def wait_rollout(self, rollout, states=("succeeded", "failed", "cancelled")):
        return self.coordinator.wait_run(rollout, states, timeout=180)


class Batches(RolloutTestCase):

    def test_serial_list_runs_the_batches_in_order(self):
        # canary is a child of gpus: deeper, so its variables win over gpus's.
        inventory = self.ini(extra="[canary]\nh1\n[canary:vars]\nmodel_dir=/srv/canary\n"
                                   "[gpus:children]\ncanary\n")
        rollout, cp = self.rollout("-i", inventory, "--serial", "1", "--serial", "50%", "--wait")
        self.assertIn("over 6 hosts of %s, --max-fail 0: h1 | h2 h3 h4 | h5 h6" % inventory,
                      cp.stdout)
        self.assertIn("rollout %s succeeded" % rollout, cp.stdout)
        lines = self.ledger_lines()
        self.assertEqual(len(lines), 12, lines)
        position = {(l[0], l[1]): i for i, l in enumerate(lines)}
        batches = [["h1"], ["h2", "h3", "h4"], ["h5", "h6"]]
        for earlier, later in zip(batches, batches[1:]):
            last_end = max(position[("END", h)] for h in earlier)
            first_start = min(position[("START", h)] for h in later)
            self.assertLess(last_end, first_start, "a batch began before the one before ended: "
                            "%s" % lines)
        # Group variables reach the plan; the deeper group wins.
        model = {l[1]: l[2] for l in lines if l[0] == "START"}
        self.assertEqual(model, {"h1": "/srv/canary", "h2": "/srv/default", "h3": "/srv/default",
                                 "h4": "/srv/default", "h5": "/srv/default",
                                 "h6": "/srv/default"})
        for h in self.hosts:
            self.assertEqual([s for _, s in self.runs_of(h)], ["succeeded"], h.name)
        # The rollout's own record: one step per batch and the verdict.
        status = self.coordinator.status_json(rollout)
        self.assertEqual([s["id"] for s in status["steps"]],
                         ["batch-1", "batch-2", "batch-3", "verdict"])
        cp = self.ctl("watch", rollout, check=0)
        self.assertRegex(cp.stdout, r"\nh3 +2 +succeeded +%s-\d+ " % self.name)
        cp = self.ctl("logs", rollout, "batch-2", check=0)
        self.assertIn("batch 2 of 3: h2, h3, h4 (--max-fail 0)", cp.stdout)
        self.assertRegex(cp.stdout, r"h3: started run %s-\d+\n" % self.name)
        self.assertIn("batch 2: all 3 hosts succeeded", cp.stdout)
        cp = self.ctl("retry", rollout, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: rollout %s is succeeded; only a failed or "
                                    "cancelled rollout can be retried\n" % rollout)

    def test_yaml_inventory_groups_children_and_limit(self):
        hosts = "\n".join("            %s: {ansible_host: %s}" % (h.name, h.address)
                          for h in self.hosts[:4])
        inventory = self.write(self.name + ".yml", """
all:
  vars:
    ledger: %s
    ansible_user: root
  children:
    serving:
      vars: {model_dir: /srv/serving}
      children:
        kimi:
          hosts:
%s
          vars: {model_dir: /srv/kimi}
        glm:
          hosts:
            %s: {ansible_host: %s, model_dir: /srv/glm-own}
""" % (self.ledger, hosts, self.hosts[4].name, self.hosts[4].address))
        rollout, cp = self.rollout("-i", inventory, "--limit", "serving:!h2", "--wait")
        self.assertIn("over 4 hosts of %s, --max-fail 0: h1 h3 h4 h5" % inventory, cp.stdout)
        model = {l[1]: l[2] for l in self.ledger_lines() if l[0] == "START"}
        self.assertEqual(model, {"h1": "/srv/kimi", "h3": "/srv/kimi", "h4": "/srv/kimi",
                                 "h5": "/srv/glm-own"})
        self.assertEqual(self.runs_of(self.hosts[1]), [])

    def test_bad_input_is_refused_before_anything_starts(self):
        inventory = self.ini()
        cp = self.ctl("rollout", self.plan, "-i", inventory, "--serial", "0", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --serial must be at least 1 (or 1%), "
                                    "not '0'\n")
        cp = self.ctl("rollout", self.plan, "-i", inventory, "--max-fail", "x", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --max-fail expects a number of hosts or "
                                    "a percentage (e.g. 2 or 25%), not 'x'\n")
        cp = self.ctl("rollout", self.plan, "-i", inventory, "--unreachable-after", "soon",
                      check=2)
        self.assertEqual(cp.stderr, "deployctl: error: --unreachable-after expects a duration "
                                    "(e.g. 90s, 10m), not 'soon'\n")
        bad = self.write(self.name + "-bad.ini", "[gpus\nh1\n")
        cp = self.ctl("rollout", self.plan, "-i", bad, check=2)
        self.assertEqual(cp.stderr, "%s:1: error: invalid section header '[gpus' (expected "
                                    "[GROUP], [GROUP:vars] or [GROUP:children])\n"
                                    "deployctl: error: invalid inventory %s\n" % (bad, bad))
        needs = self.write(self.name + "-needs.yaml", PLAN.replace("NAME", self.name).replace(
            "model_dir: none", "model_dir:"))
        only_h1 = self.write(self.name + "-vars.ini",
                             "h1 model_dir=/x ledger=/tmp/l\nh2 ledger=/tmp/l\n")
        cp = self.ctl("rollout", needs, "-i", only_h1, check=2)
        self.assertIn("error: variable 'model_dir' has no value (pass --var model_dir=VALUE)\n",
                      cp.stderr)
        self.assertIn("  (with the variables of h2)\n", cp.stderr)
        self.assertTrue(cp.stderr.endswith("deployctl: error: nothing was started\n"), cp.stderr)
        self.assertEqual(json.loads(self.ctl("runs", "--json", check=0).stdout), [])


class Failures(RolloutTestCase):

    def test_max_fail_stops_the_rollout_then_why_and_retry(self):
        fixed = os.path.join(self.fleet.dir, self.name + ".fixed")
        inventory = self.ini({"h3": "fail_unless=" + fixed})
        rollout, cp = self.rollout("-i", inventory, "--serial", "2", "--wait", check=1)
        self.assertIn("rollout %s failed: step batch-2 failed: exit status 1" % rollout, cp.stdout)
        self.assertRegex(cp.stdout, r"\nh5 +3 +untouched +not started")
        for h in self.hosts[4:]:
            self.assertEqual(self.runs_of(h), [], "%s was touched" % h.name)
        cp = self.ctl("logs", rollout, "batch-2", check=0)
        self.assertIn("batch 2 failed: 1 of 2 hosts failed (h3), --max-fail 0 allows 0; the "
                      "rollout stops\nnot started, untouched: h5, h6\n", cp.stdout)
        cp = self.ctl("why", rollout, check=0)
        self.assertIn("== h3 (ssh://root@%s, batch 2): run %s" % (self.hosts[2].address,
                                                                self.name), cp.stdout)
        self.assertIn("failing step: work, attempt 1", cp.stdout)
        self.assertIn("the model is not there", cp.stdout)
        self.assertIn("untouched (their batch never began): h5, h6", cp.stdout)
        why = json.loads(self.ctl("why", rollout, "--json", check=0).stdout)
        states = {h["name"]: h["state"] for h in why["hosts"]}
        self.assertEqual(states, {"h1": "succeeded", "h2": "succeeded", "h3": "failed",
                                  "h4": "succeeded", "h5": "untouched", "h6": "untouched"})
        self.assertEqual(why["hosts"][2]["why"]["failing_step"]["id"], "work")

        with open(fixed, "w"):
            pass
        cp = self.ctl("retry", rollout, "--wait", check=0, timeout=240)
        self.assertRegex(cp.stdout, r"h3: run %s-\d+ retried from its failed step" % self.name)
        self.assertIn("rollout %s succeeded" % rollout, cp.stdout)
        # The failed host's run was taken on, not replaced; nobody ran twice.
        for h in self.hosts:
            self.assertEqual([s for _, s in self.runs_of(h)], ["succeeded"], h.name)
        starts = [l[1] for l in self.ledger_lines() if l[0] == "START"]
        self.assertEqual(sorted(starts), ["h1", "h2", "h3", "h4", "h5", "h6"])

    def test_max_fail_allows_some_and_the_verdict_names_them(self):
        never = os.path.join(self.fleet.dir, self.name + ".never")
        inventory = self.ini({"h2": "fail_unless=" + never})
        rollout, cp = self.rollout("-i", inventory, "--serial", "3", "--max-fail", "34%",
                                   "--wait", check=1)
        self.assertIn("rollout %s failed: step verdict failed: exit status 1" % rollout,
                      cp.stdout)
        cp = self.ctl("logs", rollout, "batch-1", check=0)
        self.assertIn("batch 1: 1 of 3 hosts failed (h2), within --max-fail 34%; going on",
                      cp.stdout)
        cp = self.ctl("logs", rollout, "verdict", check=0)
        self.assertIn("rollout failed on 1 of 6 hosts: h2", cp.stdout)
        for h in self.hosts[3:]:
            self.assertEqual([s for _, s in self.runs_of(h)], ["succeeded"], h.name)

    def test_a_host_that_refuses_fails_at_once(self):
        gate = os.path.join(self.fleet.dir, self.name + ".held")
        h1 = self.hosts[0]
        self.addCleanup(lambda: open(gate, "w").close())
        # Another run of the plan holds its lock on h1: the host refuses the rollout's apply.
        holder = self.fleet.ctl("--host", h1.url(), "apply", self.plan, "--var",
                                "ledger=" + self.ledger, "--var", "gate=" + gate,
                                check=0).stdout.split()[0]
        rollout, _ = self.rollout("-i", self.ini(), "--limit", "h1:h2", "--wait", check=1)
        cp = self.ctl("logs", rollout, "batch-1", check=0)
        # h1 and h2 run side by side: either may report first, so the [k/2] counter is free.
        self.assertRegex(cp.stdout, r"\[[12]/2\] h1: failed: apply refused: lock '%s' is held "
                         r"by run %s \(running\): one run at a time"
                         % (re.escape(self.name), re.escape(holder)))
        self.assertEqual([s for _, s in self.runs_of(self.hosts[1])], ["succeeded"])
        self.assertEqual([r for r, _ in self.runs_of(h1)], [holder])

    def test_a_host_unreachable_too_long_fails(self):
        inventory = self.write(self.name + "-gone.ini",
                               "h1 ansible_host=%s ansible_user=root ansible_port=2222 "
                               "ledger=%s\n" % (self.hosts[0].address, self.ledger))
        rollout, _ = self.rollout("-i", inventory, "--unreachable-after", "3s", "--wait",
                                  check=1)
        cp = self.ctl("logs", rollout, "batch-1", check=0)
        self.assertIn("h1: unreachable (ssh could not connect to ssh://root@%s:2222: ssh: "
                      "connect to host %s port 2222: Connection refused); next try in 1.0s"
                      % ((self.hosts[0].address,) * 2), cp.stdout)
        self.assertRegex(cp.stdout, r"h1: failed: unreachable for 3\.\ds: ssh could not connect")


class Crash(RolloutTestCase):

    def test_coordinator_killed_mid_rollout_applies_no_host_twice(self):
        gate = os.path.join(self.fleet.dir, self.name + ".gate")
        inventory = self.ini(extra="[gpus:vars]\ngate=%s\n" % gate)
        rollout, _ = self.rollout("-i", inventory, "--serial", "3")
        # Batch 1's hosts wait at the gate: the coordinator dies with their runs going.
        harness.wait_until(lambda: all(self.runs_of(h) for h in self.hosts[:3]), timeout=120,
                           message="batch 1's runs")
        self.coordinator.kill9()
        # The batch's driver outlives the coordinator under its supervisor; kill both, so that
        # the restarted coordinator cannot know how the step ended and fires it again (it is
        # idempotent): the hosts' keys must find the runs already there.
        drivers = [p for p in harness.pids_with_marker(self.coordinator.socket)
                   if b"rollout-batch" in harness._proc_read(p, "cmdline")]
        self.assertTrue(drivers, "no rollout-batch process")
        for pid in drivers:
            stat = harness._proc_read(pid, "stat")
            supervisor = int(stat[stat.rfind(b")") + 2:].split()[1])
            os.kill(supervisor, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
        self.coordinator.start()
        with open(gate, "w"):
            pass
        status = self.wait_rollout(rollout)
        self.assertEqual(status["state"], "succeeded", json.dumps(status))
        for h in self.hosts:
            self.assertEqual(len(self.runs_of(h)), 1, "%s: %s" % (h.name, self.runs_of(h)))
        starts = [l[1] for l in self.ledger_lines() if l[0] == "START"]
        self.assertEqual(sorted(starts), ["h1", "h2", "h3", "h4", "h5", "h6"])
        cp = self.ctl("logs", rollout, "batch-1", check=0)
        self.assertRegex(cp.stdout, r"h1: found run %s-\d+, which this rollout started before"
                         % self.name)


class Unreachable(RolloutTestCase):

    def test_a_cut_link_restored_is_reattached_not_applied_again(self):
        gate = os.path.join(self.fleet.dir, self.name + ".gate")
        inventory = self.ini(extra="[gpus:vars]\ngate=%s\n" % gate)
        h2 = self.hosts[1]
        rollout, _ = self.rollout("-i", inventory, "--limit", "h1:h2", "--unreachable-after",
                                  "5m")
        watch = subprocess.Popen(
            [harness.DEPLOYCTL_BIN, "watch", rollout], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            env=dict(self.fleet.env(), DEPLOYD_SOCKET=self.coordinator.socket))
        self.addCleanup(lambda: watch.poll() is None and watch.kill())
        watched = []
        reader = threading.Thread(target=lambda: watched.extend(watch.stdout), daemon=True)
        reader.start()
        # Both the rollout and the watch are following h2's run when its link goes.
        harness.wait_until(lambda: [s for _, s in self.runs_of(h2)] == ["running"]
                           and any(l.startswith("h2: following run") for l in watched),
                           timeout=120, message="h2's run, followed by watch")
        h2.link(False)
        self.addCleanup(h2.link, True)
        log = lambda: self.ctl("logs", rollout, "batch-1", check=0).stdout  # noqa: E731
        harness.wait_until(lambda: "h2: unreachable" in log(), timeout=120,
                           message="the rollout to find h2 unreachable")
        # The watch has an ssh connection of its own, whose keepalives find the cut up to one
        # interval later: the link must stay down until it has said so too.
        harness.wait_until(lambda: any(l.startswith("h2: unreachable") for l in watched),
                           timeout=60, message="watch to find h2 unreachable")
        # The host's deployd goes on by itself while nobody can reach it.
        with open(gate, "w"):
            pass
        harness.wait_until(lambda: [s for _, s in self.runs_of(h2)] == ["succeeded"],
                           timeout=60, message="h2's run to succeed, unreachable")
        h2.link(True)
        status = self.wait_rollout(rollout)
        self.assertEqual(status["state"], "succeeded", json.dumps(status))
        self.assertEqual(len(self.runs_of(h2)), 1, self.runs_of(h2))
        text = log()
        self.assertRegex(text, r"h2: unreachable \(lost the connection to deployd on "
                               r"ssh://root@%s \(ssh\)" % h2.address.replace(".", r"\."))
        self.assertRegex(text, r"h2: reachable again after \S+\nh2: following run %s-\d+ again"
                         % self.name)
        self.assertEqual([l[1] for l in self.ledger_lines() if l[0] == "START"].count("h2"), 1)
        watch.wait(60)
        reader.join(10)
        out = "".join(watched)
        self.assertIn("h2: unreachable", out)
        self.assertIn("rollout %s succeeded" % rollout, out)


if __name__ == "__main__":
    fleet_case.main()
