"""The `remove` action through the real deployd: it deletes only under the `allowed_roots` of
deployd's configuration, and nothing at all while none are configured (the default)."""

import os
import unittest

from harness import DaemonTestCase

PLAN = """\
version: 1
name: remove-e2e
steps:
  - id: tidy
    remove: '@DIR@/models/old'
"""


def make_tree(root):
    os.makedirs(os.path.join(root, "sub"))
    for name in ("a.gguf", "sub/b.gguf"):
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"w" * 4096)


class RemoveWithoutRootsTest(DaemonTestCase):
    def test_nothing_is_removed_until_allowed_roots_are_configured(self):
        plan = self.d.write_plan("remove.yaml", PLAN)
        old = plan.file("models", "old")
        make_tree(old)
        run, _ = self.d.apply(plan, check=1)
        step = self.d.step(run, "tidy")
        self.assertEqual(step["state"], "failed")
        self.assertEqual(step["reason"],
                         "refusing to remove %s: no allowed_roots configured; nothing may be "
                         "deleted until deployd's configuration sets them "
                         "(e.g. allowed_roots: [/shared])" % old)
        self.assertTrue(os.path.exists(os.path.join(old, "sub", "b.gguf")))


class RemoveWithinRootsTest(DaemonTestCase):
    start_daemon = False

    def test_removes_under_an_allowed_root_and_refuses_outside(self):
        plan = self.d.write_plan("remove.yaml", PLAN)
        config = self.d.write_file("deployd.yaml",
                                   "allowed_roots: [%s]\n" % plan.file("models"))
        self.d.extra_args = ["--config", config]
        self.d.start()
        old = plan.file("models", "old")
        make_tree(old)
        run, _ = self.d.apply(plan, check=0)
        self.assertEqual(self.d.step(run, "tidy")["state"], "succeeded")
        self.assertFalse(os.path.exists(old))
        self.assertIn("removed %s: 2 files, 2 directories" % old,
                      self.d.ctl("logs", run, "tidy", check=0).stdout)

        outside = self.d.write_plan("outside.yaml", PLAN.replace("@DIR@/models/old", "@DIR@/data"))
        make_tree(outside.file("data"))
        run, _ = self.d.apply(outside, check=1)
        self.assertEqual(self.d.step(run, "tidy")["reason"],
                         "refusing to remove %s: outside the allowed roots (%s)"
                         % (outside.file("data"), plan.file("models")))
        self.assertTrue(os.path.exists(outside.file("data", "a.gguf")))


if __name__ == "__main__":
    unittest.main()
