"""The state database's files under the real deployd: deleted or replaced while it runs, it
stops with exit status 1 and says what it found and where the runs are — nothing is committed
into a deleted file — and a missing or empty database beside the logs of earlier runs is
refused unless the operator says --new-state, after which no run id and no log is used twice."""

import glob
import os
import shutil
import sqlite3
import unittest

from harness import STOP_TIMEOUT, DaemonTestCase, wait_until

PLAN = """\
version: 1
name: files
steps:
  - id: only
    run: 'echo "output of $DEPLOYD_ATTEMPT"'
"""


class StateFilesTest(DaemonTestCase):
    def finished_run(self):
        plan = self.d.write_plan("files.yaml", PLAN)
        run, _ = self.d.apply(plan, check=0)
        return plan, run

    def wait_exit(self):
        wait_until(lambda: not self.d.running(), timeout=STOP_TIMEOUT,
                   message="deployd to stop")
        code = self.d.proc.returncode
        self.d._close_log()
        return code

    def test_the_write_ahead_log_deleted_under_deployd_stops_it_and_keeps_the_runs(self):
        _, run = self.finished_run()
        wal = self.d.db + "-wal"
        self.assertTrue(os.path.getsize(wal) > 0, "the runs are in the write-ahead log")
        os.remove(wal)
        self.assertEqual(self.wait_exit(), 1, self.d.log())
        self.assertIn("deployd: error: %s was deleted while deployd was running; nothing more "
                      "is written to the state database: everything committed until now was "
                      "written into %s; start deployd again to go on" % (wal, self.d.db),
                      self.d.log())
        self.d.start()
        self.assertEqual(self.d.status_json(run)["state"], "succeeded")
        self.assert_events_consistent(run)

    def test_the_database_replaced_under_deployd_stops_it_and_saves_the_runs(self):
        _, run = self.finished_run()
        other = self.d.path("other.db")
        sqlite3.connect(other).close()
        os.rename(other, self.d.db)
        self.assertEqual(self.wait_exit(), 1, self.d.log())
        saved = glob.glob(self.d.db + ".saved-*")
        self.assertEqual(len(saved), 1, os.listdir(self.d.state_dir))
        self.assertIn("deployd: error: %s was replaced by another file while deployd was running; "
                      "nothing more is written to the state database: the runs it held were saved "
                      "to %s: put that file back as %s and start deployd again"
                      % (self.d.db, saved[0], self.d.db), self.d.log())
        for suffix in ("-wal", "-shm"):
            if os.path.exists(self.d.db + suffix):
                os.remove(self.d.db + suffix)
        os.replace(saved[0], self.d.db)
        self.d.start()
        self.assertEqual(self.d.status_json(run)["state"], "succeeded")
        self.assert_events_consistent(run)

    def test_an_empty_or_missing_database_beside_old_logs_is_refused_unless_new_state(self):
        plan, run = self.finished_run()
        self.assertEqual(run, "files-1")
        old_log = os.path.join(self.d.state_dir, "logs", run, "only.log")
        with open(old_log) as f:
            old_output = f.read()
        self.d.stop()
        for how in ("empty", "missing"):
            with self.subTest(how=how):
                for suffix in ("-wal", "-shm"):
                    if os.path.exists(self.d.db + suffix):
                        os.remove(self.d.db + suffix)
                if how == "empty":
                    open(self.d.db, "w").close()
                elif os.path.exists(self.d.db):
                    os.remove(self.d.db)
                with self.assertRaises(AssertionError):
                    self.d.start()
                found = "is empty (0 bytes)" if how == "empty" else "is missing"
                self.assertIn(
                    "deployd: error: %s %s, but %s/logs holds the logs of 1 earlier run (files-1): "
                    "the state database was lost, and a new one would give new runs their ids "
                    "and write into their logs. Restore %s from a backup, or start deployd once "
                    "with --new-state to begin a new state database (new runs are then numbered "
                    "after theirs)" % (self.d.db, found, self.d.state_dir, self.d.db),
                    self.d.log())
                self.assertEqual(self.d.proc.returncode, 1)
                self.d._close_log()
        self.d.extra_args = ["--new-state"]
        self.d.start()
        new_run, _ = self.d.apply(plan, check=0)
        self.assertEqual(new_run, "files-2")
        with open(old_log) as f:
            self.assertEqual(f.read(), old_output, "the old run's log was written to")
        # Once the new database holds runs, no flag is needed any more.
        self.d.extra_args = []
        self.d.restart()
        self.assertEqual(self.d.status_json(new_run)["state"], "succeeded")


if __name__ == "__main__":
    unittest.main()
