"""A real full disk under the real deployd: the state directory is a small tmpfs (root only;
skipped with the reason otherwise), filled while a run is going. deployd cannot record, says so
in status, why and its log, keeps what happens meanwhile, and goes on once space is freed: the
run finishes with gapless events, no step is called interrupted, and the step whose output the
disk could not take says so in its record."""

import errno
import os
import socket
import subprocess
import threading
import unittest

import test_metrics
from harness import DaemonTestCase, wait_until

TMPFS_SIZE = "24m"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def fill(directory):
    """Writes a file in `directory` until the file system is full; returns its path."""
    path = os.path.join(directory, "fill")
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            block = b"\0" * size
            while True:
                try:
                    f.write(block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return path


class FullDiskTest(DaemonTestCase):
    start_daemon = False

    PLAN = """\
version: 1
name: full
steps:
  - id: work
    run: 'echo before; read line < @DIR@/gate; for i in $(seq 1 2000); do echo "output line $i"; done'
  - id: after
    run: 'echo after'
"""

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("mounting a small tmpfs for the state directory needs root")
        os.makedirs(self.d.state_dir)
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + TMPFS_SIZE, "tmpfs",
                                self.d.state_dir], capture_output=True, text=True)
        if mount.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + (mount.stderr.strip() or "exit %d"
                                                        % mount.returncode))
        self.addCleanup(self.unmount)
        # systemd's side of STATUS=: a datagram socket named by NOTIFY_SOCKET (not on the tmpfs).
        self.notices = []
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(self.d.path("notify.sock"))
        self.addCleanup(notify.close)
        threading.Thread(target=self.collect, args=(notify,), daemon=True).start()
        self.d.start(extra_env={"NOTIFY_SOCKET": self.d.path("notify.sock")})

    def collect(self, notify):
        while True:
            try:
                self.notices.append(notify.recv(65536).decode(errors="replace"))
            except OSError:
                return

    def status_notices(self, text):
        return [m for m in list(self.notices) if "STATUS=" + text in m]

    def unmount(self):
        # The daemon and what it started go first: they hold files on the mount.
        self.d.cleanup()
        subprocess.run(["umount", "-l", self.d.state_dir], capture_output=True)

    def run_until_the_disk_is_full(self):
        """Starts the plan, fills the disk while its first step waits, lets the step print and
        exit, and waits until deployd reports that it cannot record. Returns (plan, run, fill
        file)."""
        plan = self.d.write_plan("full.yaml", self.PLAN)
        os.mkfifo(plan.file("gate"))
        run, _ = self.d.apply(plan, wait=False, check=0)
        # The action runs (its supervisor has written its records) once its first line is in
        # the log; the disk is filled after that.
        log = os.path.join(self.d.state_dir, "logs", run, "work.log")
        wait_until(lambda: "before" in read(log), message="the action to print its first line")
        filled = fill(self.d.state_dir)
        with open(plan.file("gate"), "w") as gate:
            gate.write("go\n")
        status = wait_until(lambda: (lambda s: s if s.get("storage_fault") else None)(
            self.d.status_json(run)), message="status to report the storage fault")
        return plan, run, filled, status

    def test_a_full_disk_is_reported_and_the_run_goes_on_once_space_is_freed(self):
        plan, run, filled, status = self.run_until_the_disk_is_full()
        self.assertIn("cannot record: ", status["storage_fault"])
        self.assertIn("database or disk is full", status["storage_fault"])
        # What was recorded before stays what status shows: nothing is made up meanwhile.
        self.assertEqual(status["state"], "running")
        self.assertEqual(self.d.step(run, "work", status)["state"], "running")
        text = self.d.ctl("status", run, check=0).stdout
        self.assertIn("storage: deployd cannot record: ", text)
        why = self.d.ctl("why", run, check=0).stdout
        self.assertTrue(why.startswith("deployd cannot record: "), why)
        self.assertIn("run %s did not fail: it is running" % run, why)
        refused = self.d.ctl("pause", run, check=2)
        self.assertIn("nothing new is accepted until it can record again", refused.stderr)
        self.assertIn("database or disk is full", self.d.log())
        wait_until(lambda: self.status_notices("cannot record: "), message="STATUS=cannot record")

        os.remove(filled)
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        self.assertNotIn("storage_fault", status)
        self.assert_events_consistent(run, status)
        for step in status["steps"]:
            self.assertNotIn("interrupted", step["reason"], step)
        work = self.d.step(run, "work", status)
        self.assertIn("the log is incomplete: ", work["reason"])
        self.assertIn("No space left on device", work["evidence"]["log_incomplete"])
        self.assertIn("recording again after", self.d.log())
        wait_until(lambda: self.status_notices("recording again after "),
                   message="STATUS=recording again")

    def test_the_metrics_say_so_meanwhile_and_count_it_after(self):
        python = test_metrics.parser_python()

        def scrape():
            return test_metrics.Scrape(self, self.d.ctl("metrics", check=0).stdout, python)
        plan, run, filled, status = self.run_until_the_disk_is_full()
        # Reads still work while the writes wait; the fault is there, with what waits.
        during = scrape()
        self.assertEqual(during.value("deployd_storage_fault_active"), 1)
        self.assertEqual(during.value("deployd_storage_faults_total"), 1)
        self.assertGreaterEqual(during.value("deployd_storage_failed_writes_total"), 1)
        self.assertGreaterEqual(during.value("deployd_storage_waiting_transitions"), 1)
        self.assertEqual(during.value("deployd_active_runs", plan="full", state="running"), 1)
        self.assertEqual(during.value("deployd_runs_finished_total", plan="full",
                                      state="succeeded"), 0)
        os.remove(filled)
        self.d.wait_run(run)
        after = scrape()
        self.assertEqual(after.value("deployd_storage_fault_active"), 0)
        self.assertEqual(after.value("deployd_storage_faults_total"), 1)
        self.assertEqual(after.value("deployd_storage_waiting_transitions"), 0)
        self.assertGreater(after.value("deployd_storage_fault_seconds_total"), 0)
        self.assertEqual(after.value("deployd_runs_finished_total", plan="full",
                                     state="succeeded"), 1)

    def test_a_restart_while_the_disk_is_full_does_not_call_the_finished_step_interrupted(self):
        plan, run, filled, status = self.run_until_the_disk_is_full()
        self.assertEqual(self.d.step(run, "work", status)["state"], "running")
        # What waited in memory is gone with the daemon; the supervisor's record is not.
        self.d.stop()
        os.remove(filled)
        self.d.start()
        status = self.d.wait_run(run)
        self.assertEqual(status["state"], "succeeded", status)
        self.assert_events_consistent(run, status)
        work = self.d.step(run, "work", status)
        self.assertNotIn("interrupted", work["reason"])
        self.assertIn("the log is incomplete: ", work["reason"])
        events = [e for e in self.d.events(run) if e["step_id"] == "work"]
        self.assertIn("it ended while deployd was down", events[-1]["detail"] + work["reason"])


if __name__ == "__main__":
    unittest.main()
