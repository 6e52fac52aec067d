"""Secrets (DESIGN.md §2): a plan names where a value is read at fire time (a file not readable
by others, or deployd's environment), and checked by the preflight before any step runs; the value reaches only the child's environment, is never
stored in the database, the run's copy of the plan or any log, and is redacted when a child
prints it. Through the real binaries."""

import os
import unittest

from harness import DaemonTestCase

TOKEN = "hf_e2eSecretValue4242"


def files_containing(root, needle):
    found = []
    for base, _, names in os.walk(root):
        for name in names:
            path = os.path.join(base, name)
            try:
                with open(path, "rb") as f:
                    if needle.encode() in f.read():
                        found.append(path)
            except OSError:
                pass
    return found


class SecretsTest(DaemonTestCase):
    def plan(self, secret_source, name="secrets", first="true"):
        return self.d.write_plan(name + ".yaml", """\
version: 1
name: %s
secrets:
  HF_TOKEN: %s
steps:
  - id: first
    run: '%s'
  - id: use
    secrets: [HF_TOKEN]
    run: 'printf "%%s" "$HF_TOKEN" > @DIR@/seen; echo "token is $HF_TOKEN"'
    verify:
      - file: @DIR@/seen
""" % (name, secret_source, first))

    def test_a_file_secret_reaches_the_child_only_and_is_redacted(self):
        secret_file = self.d.write_file("hf-token", TOKEN + "\n", mode=0o600)
        plan = self.plan("{file: %s}" % secret_file)
        run, cp = self.d.apply(plan)
        self.assertEqual(cp.returncode, 0, cp.stdout + cp.stderr)
        with open(plan.file("seen")) as f:
            self.assertEqual(f.read(), TOKEN)  # the child had the value (trailing newline cut)
        logs = self.d.ctl("logs", run, "use", check=0).stdout
        self.assertIn("token is ***", logs)
        # Nowhere in deployd's state: database, WAL, logs.
        self.assertEqual(files_containing(self.d.state_dir, TOKEN), [])
        self.assertNotIn(TOKEN, self.d.log())

    def test_an_env_secret_comes_from_deployds_environment(self):
        self.d.stop()
        self.d.start(extra_env={"DEPLOYD_E2E_HF": TOKEN})
        plan = self.plan("{env: DEPLOYD_E2E_HF}", name="env-secret")
        run, cp = self.d.apply(plan)
        self.assertEqual(cp.returncode, 0, cp.stdout + cp.stderr)
        with open(plan.file("seen")) as f:
            self.assertEqual(f.read(), TOKEN)
        self.assertEqual(files_containing(self.d.state_dir, TOKEN), [])

    def test_a_secret_file_readable_by_others_fails_the_preflight_before_anything_runs(self):
        secret_file = self.d.write_file("hf-token", TOKEN + "\n", mode=0o644)
        plan = self.plan("{file: %s}" % secret_file, name="open-secret",
                         first="touch @DIR@/first-ran")
        run, cp = self.d.apply(plan)
        self.assertEqual(cp.returncode, 1)
        status = self.d.status_json(run)
        self.assertEqual(status["reason"],
                         "preflight failed: secret HF_TOKEN: %s is readable by others "
                         "(mode 0644); chmod 600 it" % secret_file)
        self.assertEqual([s["state"] for s in status["steps"]], ["pending", "pending"])
        self.assertFalse(os.path.exists(plan.file("first-ran")))
        self.assertFalse(os.path.exists(plan.file("seen")))

    def test_a_secret_spoiled_after_the_preflight_fails_its_step_before_it_runs(self):
        secret_file = self.d.write_file("hf-token", TOKEN + "\n", mode=0o600)
        plan = self.plan("{file: %s}" % secret_file, name="spoiled-secret",
                         first="chmod 644 %s" % secret_file)
        run, cp = self.d.apply(plan)
        self.assertEqual(cp.returncode, 1)
        step = self.d.step(run, "use")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "secret HF_TOKEN: %s is readable by others (mode 0644); chmod 600 it"
                         % secret_file)
        self.assertFalse(os.path.exists(plan.file("seen")))

    def test_a_missing_environment_secret_is_named(self):
        plan = self.plan("{env: DEPLOYD_E2E_UNSET_SECRET}", name="unset-secret")
        run, cp = self.d.apply(plan)
        self.assertEqual(cp.returncode, 1)
        self.assertEqual(self.d.status_json(run)["reason"],
                         "preflight failed: secret HF_TOKEN: environment variable "
                         "DEPLOYD_E2E_UNSET_SECRET is not set in deployd's environment")
        self.assertEqual(self.d.step(run, "use")["state"], "pending")

if __name__ == "__main__":
    unittest.main()
