"""The daemon itself: graceful SIGTERM, its socket's mode across restarts, refusing peers that
may not control it, and refusing a second daemon on the same socket."""

import os
import time
import shutil
import socket
import stat
import subprocess
import unittest

from harness import DEPLOYCTL_BIN, DEPLOYD_BIN, DaemonTestCase


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
