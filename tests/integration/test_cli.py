"""deployctl's command line through the real binaries, as a new user meets it: deployctl alone,
a mistyped command, global options after the command, --help with examples and exit codes,
`version` with deployd up and down, and --json on the operator's commands."""

import json
import os
import subprocess
import unittest

from harness import DEPLOYCTL_BIN, DaemonTestCase, main_skipping_with_77

VERSION = subprocess.run([DEPLOYCTL_BIN, "--version"], capture_output=True,
                         text=True).stdout.split()[-1]

APPROVAL_PLAN = """\
version: 1
name: gated
steps:
  - id: prepare
    run: 'true'
  - id: confirm
    approval: "look first"
  - id: finish
    run: 'true'
"""


class CommandLineTest(DaemonTestCase):
    def test_bare_deployctl_prints_help_and_exits_2(self):
        for args in ((), ("--socket", self.d.socket)):
            cp = self.d.ctl(*args, check=2)
            self.assertEqual(cp.stdout, "")
            self.assertTrue(cp.stderr.startswith(
                "deployctl: control deployd, the deployment daemon\nUsage: "), cp.stderr)
            self.assertIn("\nSubcommands:\n", cp.stderr)
            self.assertIn("\nExit status:\n  0  success", cp.stderr)
            self.assertIn("  3  deployd cannot be reached", cp.stderr)

    def test_unknown_command_names_the_nearest(self):
        cases = [
            (("stauts", "x-1"), "unknown command 'stauts' (did you mean 'status'?)"),
            (("re",), "unknown command 're' (did you mean 'retry' or 'resume'?)"),
            (("shwo", "x-1"), "unknown command 'shwo' (did you mean 'show'?)"),
            (("delte", "x-1"), "unknown command 'delte' (did you mean 'delete'?)"),
            (("prnue",), "unknown command 'prnue' (did you mean 'prune'?)"),
            (("--socket", "/x.sock", "aply", "p.yaml"),
             "unknown command 'aply' (did you mean 'apply'?)"),
            (("frobnicate",),
             "unknown command 'frobnicate' (`deployctl --help` lists the commands)"),
        ]
        for args, message in cases:
            cp = self.d.ctl(*args, check=2)
            self.assertEqual((cp.stdout, cp.stderr), ("", "deployctl: error: %s\n" % message))

    def test_usage_errors_point_to_the_verb_help(self):
        cp = self.d.ctl("status", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: RUN is required (`deployctl status "
                                    "--help` shows how it is used)\n")
        cp = self.d.ctl("status", "a-1", "b-1", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: The following argument was not "
                                    "expected: b-1 (`deployctl status --help` shows how it is "
                                    "used)\n")
        cp = self.d.ctl("runs", "--frob", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: The following argument was not "
                                    "expected: --frob (`deployctl runs --help` shows how it is "
                                    "used)\n")

    def test_global_options_anywhere(self):
        env = {"DEPLOYD_SOCKET": self.d.path("nothing-here.sock")}
        for args in (("runs", "--json", "--socket", self.d.socket),
                     ("--socket", self.d.socket, "runs", "--json"),
                     ("runs", "--socket=" + self.d.socket, "--json")):
            cp = self.d.ctl(*args, check=0, env=env)
            self.assertEqual(json.loads(cp.stdout), [])
        other = self.d.path("other.sock")
        cp = self.d.ctl("status", "x-1", "--socket", other, check=3)
        self.assertTrue(cp.stderr.startswith("deployctl: error: cannot reach deployd at %s: "
                                             % other), cp.stderr)

    def test_help_has_examples_exit_codes_and_described_arguments(self):
        cp = self.d.ctl("status", "--help", check=0)
        self.assertIn("\nPositionals:\n  RUN TEXT REQUIRED", cp.stdout)
        self.assertIn("the run's id, e.g. demo-3 (`deployctl runs` lists them)", cp.stdout)
        self.assertIn("\nExamples:\n  deployctl status demo-3\n", cp.stdout)
        self.assertIn("Exit status: 0 the run succeeded or is still going, 1 it failed or was "
                      "cancelled,\n2 no such run, 3 deployd cannot be reached.", cp.stdout)
        self.assertIn("Global options (--socket, --host, --config) may come anywhere", cp.stdout)
        top = self.d.ctl("--help", check=0).stdout
        self.assertIn("\nExamples:\n  deployctl validate plans/demo.yaml\n", top)
        self.assertIn("\nExit status:\n", top)
        # Every verb has its examples and exit status.
        verbs = [l.split()[0] for l in top.split("Subcommands:\n", 1)[1].split("\n\n")[0]
                 .splitlines()]
        self.assertIn("version", verbs)
        for verb in verbs:
            text = self.d.ctl(verb, "--help", check=0).stdout
            self.assertIn("\nExamples:\n", text, verb)
            self.assertIn("Exit status: ", text, verb)

    def test_version_with_deployd_up_and_down(self):
        cp = self.d.ctl("version", check=0)
        self.assertEqual(cp.stdout, "client: deployctl %s, protocol 1\n"
                                    "daemon: deployd %s, protocol 1, at %s\n"
                                    % (VERSION, VERSION, self.d.socket))
        self.assertEqual(json.loads(self.d.ctl("version", "--json", check=0).stdout), {
            "client": {"version": VERSION, "protocol": 1},
            "daemon": {"version": VERSION, "protocol": 1, "socket": self.d.socket}})
        self.d.stop()
        cp = self.d.ctl("version", check=3)
        self.assertEqual(cp.stderr, "")
        first, second = cp.stdout.splitlines()
        self.assertEqual(first, "client: deployctl %s, protocol 1" % VERSION)
        self.assertTrue(second.startswith("daemon: not reachable (cannot reach deployd at %s: "
                                          "No such file or directory" % self.d.socket), second)
        out = json.loads(self.d.ctl("version", "--json", check=3).stdout)
        self.assertIsNone(out["daemon"])
        self.assertTrue(out["daemon_error"].startswith("cannot reach deployd at %s: "
                                                       % self.d.socket), out)

    def test_json_of_the_operators_commands(self):
        plan = self.d.write_plan("gated.yaml", APPROVAL_PLAN)
        cp = self.d.ctl("apply", plan.path, "--json", check=0)
        run = json.loads(cp.stdout)["run"]
        self.d.wait_run(run, ("waiting",))
        cp = self.d.ctl("approve", run, "confirm", "--json", check=0)
        self.assertIn(json.loads(cp.stdout)["state"], ("running", "succeeded"))
        self.assertEqual({k: v for k, v in json.loads(cp.stdout).items() if k != "state"},
                         {"op": "approve", "run": run, "step": "confirm"})
        self.d.wait_run(run)

        # Runs that fail: one retried once its cause is gone, one skipped past its step.
        failing = self.d.write_plan("failing.yaml", """\
version: 1
name: failing
vars:
  flag: ok
steps:
  - id: broken
    run: 'test -e @DIR@/${flag}'
  - id: after
    run: 'true'
""")
        cp = self.d.ctl("apply", failing.path, "--json", "--wait", check=1)
        lines = [json.loads(l) for l in cp.stdout.splitlines()]
        run = lines[0]["run"]
        self.assertEqual(lines[1]["type"], "snapshot")
        self.assertEqual(lines[-1]["type"], "end")
        open(failing.file("ok"), "w").close()
        cp = self.d.ctl("retry", run, "--json", "--wait", check=0)
        lines = [json.loads(l) for l in cp.stdout.splitlines()]
        self.assertEqual({k: v for k, v in lines[0].items() if k != "state"},
                         {"op": "retry", "run": run})
        self.assertEqual(lines[-1]["run"]["state"], "succeeded")
        run, _ = self.d.apply(failing, "--var", "flag=missing", check=1)
        cp = self.d.ctl("skip", run, "broken", "--json", "--wait", check=0)
        lines = [json.loads(l) for l in cp.stdout.splitlines()]
        self.assertEqual({k: v for k, v in lines[0].items() if k != "state"},
                         {"op": "skip", "run": run, "step": "broken"})
        self.assertEqual(lines[-1]["run"]["state"], "succeeded")

        blocked = self.d.write_plan("blocked.yaml", """\
version: 1
name: blocked
steps:
  - id: wait
    run: 'read line < @DIR@/gate'
  - id: next
    run: 'true'
""")
        os.mkfifo(blocked.file("gate"))
        run, _ = self.d.apply(blocked, wait=False, check=0)
        self.d.wait_step(run, "wait", ("running",))
        cp = self.d.ctl("pause", run, "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), {"op": "pause", "run": run, "state": "paused"})
        cp = self.d.ctl("resume", run, "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), {"op": "resume", "run": run, "state": "running"})
        cp = self.d.ctl("cancel", run, "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), {"op": "cancel", "run": run,
                                                 "state": "cancelled"})
        # Refusals are the same as without --json.
        cp = self.d.ctl("pause", "nope-1", "--json", check=2)
        self.assertEqual((cp.stdout, cp.stderr), ("", "deployctl: error: no run 'nope-1'\n"))

    def test_validate_json(self):
        good = self.d.write_plan("good.yaml", APPROVAL_PLAN)
        bad = self.d.write_file("bad.yaml", "version: 1\nname: bad\nsteps: []\nfrob: 1\n")
        cp = self.d.ctl("validate", good.path, bad, "--json", check=2)
        out = json.loads(cp.stdout)
        self.assertEqual(out[0], {"file": good.path, "ok": True, "errors": [], "plan": "gated",
                                  "steps": 3})
        self.assertEqual(out[1]["file"], bad)
        self.assertFalse(out[1]["ok"])
        self.assertTrue(out[1]["errors"], out)
        self.assertTrue(all(e.startswith(bad + ":") for e in out[1]["errors"]), out)
        self.assertIn(out[1]["errors"][0], cp.stderr)


if __name__ == "__main__":
    main_skipping_with_77()
