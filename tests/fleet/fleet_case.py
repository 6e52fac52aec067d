"""The frame of a fleet test module: one Fleet (fleet_hosts.py) made for the module's tests and
torn down after them, also when one fails; skipped, with the reason, where it cannot be made.

    import fleet_case
    FLEET = fleet_case.module_fleet(hosts=2)      # the module's setUpModule/tearDownModule
    class T(fleet_case.FleetTestCase): …           # self.fleet, self.hosts
    if __name__ == "__main__": fleet_case.main()   # exit 77 (CTest's skip) when all skipped
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.dont_write_bytecode = True

import fleet_hosts  # noqa: E402
import harness  # noqa: E402


class _ModuleFleet:
    def __init__(self, hosts):
        self.count = hosts
        self.fleet = None
        self.skip = None

    def set_up(self):
        try:
            fleet = fleet_hosts.Fleet(self.count)
        except fleet_hosts.Unavailable as e:
            self.skip = str(e)
            raise unittest.SkipTest(self.skip)
        unittest.addModuleCleanup(fleet.down)
        self.fleet = fleet.up()


def module_fleet(hosts):
    """Makes the calling module's setUpModule build a fleet of `hosts` hosts (torn down by a
    module cleanup, which runs even when setUpModule fails halfway)."""
    shared = _ModuleFleet(hosts)
    module = sys.modules[sys._getframe(1).f_globals["__name__"]]
    module.setUpModule = shared.set_up
    return shared


class FleetTestCase(unittest.TestCase):
    """self.fleet and self.hosts: the module's fleet. Each test kills what it left running on
    the hosts (processes of its steps) in its cleanup."""

    maxDiff = None
    FLEET = None  # the module's _ModuleFleet, set by the module

    def setUp(self):
        for binary in (harness.DEPLOYD_BIN, harness.DEPLOYCTL_BIN):
            if not os.access(binary, os.X_OK):
                self.fail("binary not found or not executable: %s" % binary)
        self.fleet = self.FLEET.fleet
        self.hosts = self.fleet.hosts

    def write(self, name, text):
        path = os.path.join(self.fleet.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path


def main():
    """Runs the module's tests; exits 77 (CTest's skip) when every test was skipped."""
    harness.main_skipping_with_77()
