"""The daemon itself: graceful SIGTERM, SIGHUP reloading the configuration, its socket's mode
across restarts, refusing peers that may not control it, refusing a second daemon on the same
socket, and journal-style logging only when stderr is the stream JOURNAL_STREAM names."""

import os
import re
import signal
import time
import shutil
import socket
import stat
import subprocess
import unittest

from harness import DEPLOYCTL_BIN, DEPLOYD_BIN, DaemonTestCase, wait_until


def socket_mode(path):
    st = os.stat(path)
    return stat.S_ISSOCK(st.st_mode), stat.S_IMODE(st.st_mode)


class LifecycleTest(DaemonTestCase):
    def test_sigterm_is_graceful(self):
        self.assertTrue(os.path.exists(self.d.socket))
        self.assertEqual(self.d.stop(), 0, self.d.log())
        self.assertFalse(os.path.exists(self.d.socket), "the socket was left behind")
        self.assertIn("SIGTERM: stopping", self.d.log())
        # The state survives: a new start answers from the same database.
        self.assertTrue(os.path.exists(self.d.db))
        self.d.start()
        self.d.ctl("runs", check=0)

    def test_socket_mode_is_0660_and_kept_across_restarts(self):
        self.assertEqual(socket_mode(self.d.socket), (True, 0o660))
        os.chmod(self.d.socket, 0o666)
        self.d.restart()  # SIGTERM, then a new start on the same socket and state
        self.assertEqual(self.d.proc.returncode, None)
        self.assertEqual(socket_mode(self.d.socket), (True, 0o660))
        # After a crash the stale socket file is replaced, with the same mode.
        os.chmod(self.d.socket, 0o666)
        self.d.kill9()
        self.assertTrue(os.path.exists(self.d.socket), "a killed daemon leaves its socket file")
        self.d.start()
        self.assertEqual(socket_mode(self.d.socket), (True, 0o660))
        self.d.ctl("runs", check=0)

    def test_second_daemon_on_the_same_socket_is_refused(self):
        cp = subprocess.run([DEPLOYD_BIN, "--socket", self.d.socket,
                             "--state-dir", self.d.path("state2")],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("deployd: error: another deployd is already listening on %s\n"
                      % self.d.socket, cp.stderr)
        # The first one still serves.
        self.d.ctl("runs", check=0)


class ConfigTest(DaemonTestCase):
    def test_finished_runs_older_than_retention_are_forgotten(self):
        plan = self.d.write_plan("quick.yaml", """\
version: 1
name: quick
steps:
  - id: only
    run: 'echo hi'
""")
        first, _ = self.d.apply(plan, check=0)
        self.assertTrue(os.path.isdir(os.path.join(self.d.state_dir, "logs", first)))
        config = self.d.write_file("deployd.yaml", "retention: 1s\n")
        self.d.stop()
        time.sleep(1.2)  # let the first run age past the retention
        self.d.extra_args = ["--config", config]
        self.d.start()
        # Forgotten when deployd started: record, events and logs.
        cp = self.d.ctl("status", first, check=2)
        self.assertEqual(cp.stderr, "deployctl: error: no run '%s'\n" % first)
        self.assertFalse(os.path.exists(os.path.join(self.d.state_dir, "logs", first)))
        self.assertEqual(self.d.events(first), [])
        # A run that has just finished is kept.
        second, _ = self.d.apply(plan, check=0)
        self.assertEqual(self.d.status_json(second)["state"], "succeeded")

    def test_a_bad_configuration_stops_deployd_with_its_position(self):
        config = self.d.write_file("bad.yaml", "socket: /tmp/x.sock\nretention: forever\n")
        cp = subprocess.run([DEPLOYD_BIN, "--config", config, "--socket", self.d.path("b.sock"),
                             "--state-dir", self.d.path("state-b")],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(cp.returncode, 2)
        self.assertEqual(cp.stderr, "%s:2:12: error: invalid duration 'forever' (expected e.g. "
                                    "30d, 12h)\nretention: forever\n           ^\n" % config)


class SighupTest(DaemonTestCase):
    start_daemon = False

    def sighup(self, expect):
        """SIGHUP, then waits for `expect` in the log (after what was there); returns the log."""
        before = len(self.d.log())
        self.d.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: expect in self.d.log()[before:], timeout=30,
                   message="%r in deployd's log" % expect)
        self.assertTrue(self.d.running(), "SIGHUP ended deployd:\n" + self.d.log())
        return self.d.log()[before:]

    def test_sighup_reloads_the_configuration_and_deployd_keeps_running(self):
        config = self.d.write_file("deployd.yaml", "log_max_size: 64MiB\n")
        self.d.extra_args = ["--config", config]
        self.d.start()
        pid = self.d.proc.pid
        self.sighup("SIGHUP: reloaded %s" % config)

        # log_max_size applies to what starts from now on; the socket's group would need a
        # restart (and --socket, given, wins over the file's socket: no change).
        self.d.write_file("deployd.yaml", "log_max_size: 1KiB\ngroup: e2e-nogroup\nsocket: %s\n"
                          % self.d.path("other.sock"))
        log = self.sighup("SIGHUP: reloaded %s" % config)
        self.assertIn("SIGHUP: group changed to 'e2e-nogroup': it takes effect when deployd "
                      "restarts", log)
        self.assertNotIn("socket changed", log)
        plan = self.d.write_plan("chatty.yaml", """\
version: 1
name: chatty
steps:
  - id: chatty
    run: [sh, -c, 'for i in $(seq 200); do echo line $i of a chatty step; done']
""")
        run, _ = self.d.apply(plan, check=0)
        logs = os.path.join(self.d.state_dir, "logs", run)
        self.assertTrue(os.path.exists(os.path.join(logs, "chatty.log.1")), os.listdir(logs))
        self.assertLessEqual(os.path.getsize(os.path.join(logs, "chatty.log")), 1024)

        # A file with an error changes nothing.
        self.d.write_file("deployd.yaml", "retention: forever\n")
        log = self.sighup("the configuration in use is unchanged")
        self.assertIn("SIGHUP: %s:1:12: invalid duration 'forever' (expected e.g. 30d, 12h); the "
                      "configuration in use is unchanged" % config, log)
        self.assertNotIn("SIGHUP: reloaded", log)
        self.assertEqual(self.d.proc.pid, pid)
        self.d.ctl("runs", check=0)
        self.assertEqual(self.d.stop(), 0, self.d.log())


class JournalDetectionTest(DaemonTestCase):
    start_daemon = False
    PLAIN = re.compile(r"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} info: deployd .* listening on ")

    def test_journal_stream_naming_another_stream_is_not_the_journal(self):
        # Inherited from a parent whose stderr was the journal: deployd's stderr is a file.
        self.d.start(extra_env={"JOURNAL_STREAM": "8:1234567", "INVOCATION_ID": "0" * 32})
        self.assertRegex(self.d.log(), self.PLAIN)
        self.assertNotIn("<6>", self.d.log())

    def test_journal_stream_naming_stderr_is_the_journal(self):
        # JOURNAL_STREAM is stderr's device:inode, as systemd sets it: syslog priorities and no
        # timestamps (the journal adds its own).
        self.d.log_path = self.d.path("journal.stderr")
        open(self.d.log_path, "w").close()
        st = os.stat(self.d.log_path)
        self.d.start(extra_env={"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)})
        self.assertRegex(self.d.log(), r"(?m)^<6>deployd .* listening on ")
        self.assertNotRegex(self.d.log(), self.PLAIN)


class SystemdNotifyTest(DaemonTestCase):
    start_daemon = False

    def test_readiness_watchdog_and_stopping(self):
        # systemd's side of the readiness protocol: a datagram socket named by NOTIFY_SOCKET.
        path = self.d.path("notify.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind(path)
        sock.settimeout(30)
        self.d.start(extra_env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
        messages = []

        def receive_until(text):
            while not any(text in m for m in messages):
                messages.append(sock.recv(4096).decode())
            return [m for m in messages if text in m]

        ready = receive_until("READY=1")[0]
        self.assertIn("STATUS=listening on %s" % self.d.socket, ready)
        # The watchdog is pinged while the daemon's loop runs: at least twice.
        while sum("WATCHDOG=1" in m for m in messages) < 2:
            messages.append(sock.recv(4096).decode())
        self.assertEqual(self.d.stop(), 0, self.d.log())
        receive_until("STOPPING=1")


class PeerCredentialsTest(DaemonTestCase):
    def test_unauthorized_peer_is_refused(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: runs deployctl as uid/gid 65534 with setpriv")
        setpriv = shutil.which("setpriv")
        if not setpriv:
            self.skipTest("setpriv (util-linux) is not installed")
        # uid 65534 must be able to reach the socket and run deployctl: open the directory and
        # the socket to all; only SO_PEERCRED stands in the way.
        os.chmod(self.d.dir, 0o755)
        os.chmod(self.d.socket, 0o666)
        probe = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                DEPLOYCTL_BIN, "--version"], capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest("uid 65534 cannot run %s: %s" % (DEPLOYCTL_BIN, probe.stderr.strip()))

        # A peer that may not talk to deployd at all exits 3, like one that cannot reach it.
        cp = self.d.ctl("runs", check=3,
                        argv_prefix=(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"))
        self.assertEqual(cp.stdout, "")
        self.assertEqual(cp.stderr,
                         "deployctl: error: permission denied: uid 65534 may not control deployd "
                         "(allowed: root, uid %d and the configured group)\n" % os.getuid())
        self.assertIn("refused a connection from uid 65534", self.d.log())

        # Root is still served.
        self.d.ctl("runs", check=0)


if __name__ == "__main__":
    unittest.main()
