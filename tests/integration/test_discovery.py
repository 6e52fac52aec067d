"""Where deployctl finds deployd, through the real binaries: --socket, $DEPLOYD_SOCKET, the
`socket:` of deployd's configuration (--config, /etc/deployd/deployd.yaml), the system socket for
a member of deployd's group, the per-user socket; and the per-user socket under /tmp used only
while its directory is the user's own, by deployd and deployctl alike.

The system socket and /etc/deployd are fixed paths: those tests run in a mount namespace of
their own (unshare), with a copy of /etc that has a test user and group, and /run/deployd bound
to a directory of the test, so that nothing outside the test sees them."""

import grp
import json
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import unittest

from harness import (DEPLOYCTL_BIN, DEPLOYD_BIN, SYSTEMD_VARS, Daemon, DaemonTestCase,
                     main_skipping_with_77, wait_until)

SYSTEM_SOCKET = "/run/deployd/deployd.sock"


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEPLOYD_SOCKET", "DEPLOYD_HOST", "XDG_RUNTIME_DIR") + SYSTEMD_VARS}
    env.update(extra)
    return env


def free_id(taken):
    """A uid/gid number that names nothing here, nor a /tmp/deployd-N."""
    while True:
        n = random.randint(42000, 58000)
        if n not in taken and not os.path.exists("/tmp/deployd-%d" % n):
            return n


def needs_root_and(*tools):
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root: runs deployd and deployctl as other users")
    for tool in tools:
        if not shutil.which(tool):
            raise unittest.SkipTest("%s (util-linux) is not installed" % tool)


class ExplicitChoicesTest(DaemonTestCase):
    """--socket over $DEPLOYD_SOCKET over --config's socket:, each as the only way in."""

    def run_ctl(self, *args, env=None, check=None):
        cp = subprocess.run([DEPLOYCTL_BIN] + list(args), env=env or clean_env(),
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if check is not None:
            self.assertEqual(cp.returncode, check, cp.stderr)
        return cp

    def test_order_of_the_explicit_choices(self):
        config = self.d.write_file("deployd.yaml", "socket: %s\n" % self.d.socket)
        nowhere = self.d.path("nowhere.sock")
        # The configuration's socket: is found.
        cp = self.run_ctl("--config", config, "runs", "--json", check=0)
        self.assertEqual(json.loads(cp.stdout), [])
        # $DEPLOYD_SOCKET comes before it, --socket before both.
        cp = self.run_ctl("--config", config, "runs", env=clean_env(DEPLOYD_SOCKET=nowhere),
                          check=3)
        self.assertTrue(cp.stderr.startswith("deployctl: error: cannot reach deployd at %s: "
                                             % nowhere), cp.stderr)
        cp = self.run_ctl("runs", "--config", config, "--socket", nowhere, check=3)
        self.assertTrue(cp.stderr.startswith("deployctl: error: cannot reach deployd at %s: "
                                             % nowhere), cp.stderr)
        cp = self.run_ctl("--socket", self.d.socket, "runs", "--json", check=0,
                          env=clean_env(DEPLOYD_SOCKET=nowhere))
        # A configuration whose socket nobody listens on says where it came from.
        other = self.d.write_file("other.yaml", "socket: %s\n" % nowhere)
        cp = self.run_ctl("--config", other, "runs", check=3)
        self.assertEqual(cp.stderr, "deployctl: error: cannot reach deployd at %s: No such file "
                                    "or directory (the socket of %s; is deployd running? "
                                    "`systemctl start deployd` starts it)\n" % (nowhere, other))

    def test_bad_configuration_files(self):
        missing = self.d.path("missing.yaml")
        cp = self.run_ctl("--config", missing, "runs", check=2)
        self.assertEqual(cp.stderr, "deployctl: error: cannot read deployd's configuration %s: "
                                    "No such file or directory\n" % missing)
        bad = self.d.write_file("bad.yaml", "socket: /x.sock\nsockett: /y.sock\n")
        cp = self.run_ctl("--config", bad, "runs", check=2)
        self.assertTrue(cp.stderr.startswith("%s:2:1: error: unknown key 'sockett'" % bad),
                        cp.stderr)
        self.assertTrue(cp.stderr.endswith(
            "deployctl: error: deployd's configuration %s is invalid, so its socket is not known "
            "(--socket names one)\n" % bad), cp.stderr)
        # A socket given outright needs no configuration.
        self.run_ctl("--config", bad, "--socket", self.d.socket, "runs", check=0)
        # validate needs no deployd, nor its configuration.
        plan = self.d.write_plan("p.yaml", "version: 1\nname: p\nsteps:\n  - id: a\n"
                                           "    run: 'true'\n")
        self.run_ctl("--config", bad, "validate", plan.path, check=0)


class NamespaceTestCase(unittest.TestCase):
    """A mount namespace held by a sleeping process: a private copy of /etc (with the test's
    user and group in it) and /run/deployd bound to a directory of the test. `inside()` is the
    argv prefix that runs a command there."""

    def setUp(self):
        needs_root_and("unshare", "nsenter", "setpriv")
        self.dir = tempfile.mkdtemp(prefix="deployd-discovery-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o755)
        etc = os.path.join(self.dir, "etc")
        subprocess.run(["cp", "-a", "/etc", etc], check=True)
        taken = {p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()}
        self.uid = free_id(taken)
        self.gid = free_id(taken | {self.uid})
        self.user = "dtest%d" % self.uid
        self.group = "dgroup%d" % self.gid
        with open(os.path.join(etc, "passwd"), "a") as f:
            f.write("%s:x:%d:%d::%s:/bin/sh\n" % (self.user, self.uid, self.uid, self.dir))
        with open(os.path.join(etc, "group"), "a") as f:
            f.write("%s:x:%d:\n%s:x:%d:%s\n" % (self.user, self.uid, self.group, self.gid,
                                               self.user))
        os.makedirs(os.path.join(etc, "deployd"), exist_ok=True)
        self.run_dir = os.path.join(self.dir, "run-deployd")
        os.mkdir(self.run_dir, 0o755)
        script = ("mount --bind %s /etc && mount -t tmpfs tmpfs /run && mkdir /run/deployd && "
                  "mount --bind %s /run/deployd && echo ready && exec sleep 100000"
                  % (etc, self.run_dir))
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh",
                                        "-c", script], stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.holder.stdout.close)
        self.addCleanup(self.holder.wait)
        self.addCleanup(self.holder.kill)
        if self.holder.stdout.readline().strip() != "ready":
            self.skipTest("cannot make a mount namespace here")
        self.etc = etc

    def inside(self):
        return ["nsenter", "--target", str(self.holder.pid), "--mount", "--"]

    def as_user(self):
        return self.inside() + ["setpriv", "--reuid=%d" % self.uid, "--regid=%d" % self.uid,
                                "--init-groups", "--"]

    def ctl_as_user(self, *args, env=None):
        return subprocess.run(self.as_user() + [DEPLOYCTL_BIN] + list(args),
                              env=env or clean_env(HOME=self.dir), capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)


class SystemSocketTest(NamespaceTestCase):
    def start_system_daemon(self, group):
        d = Daemon()
        self.addCleanup(d.cleanup)
        d.launcher = self.inside()
        # The system daemon's socket: what the namespace has at /run/deployd/deployd.sock.
        d.socket = os.path.join(self.run_dir, "deployd.sock")
        config = d.write_file("deployd.yaml", "group: %s\n" % group if group else "{}\n")
        d.extra_args = ["--config", config]
        d.start()
        return d

    def test_a_member_of_deployds_group_reaches_the_system_daemon(self):
        d = self.start_system_daemon(self.group)
        probe = self.ctl_as_user("--version")
        if probe.returncode != 0:
            self.skipTest("uid %d cannot run %s: %s" % (self.uid, DEPLOYCTL_BIN, probe.stderr))
        # No option, no variable: the system socket, as root's would be.
        cp = self.ctl_as_user("version")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertTrue(cp.stdout.endswith(", at %s\n" % SYSTEM_SOCKET), cp.stdout)
        cp = self.ctl_as_user("runs", "--json")
        self.assertEqual((cp.returncode, json.loads(cp.stdout)), (0, []), cp.stderr)

    def test_a_user_outside_the_group_is_told_why(self):
        self.start_system_daemon(None)
        # The socket is root's group's (0660): this user cannot connect to it at all.
        cp = self.ctl_as_user("runs", env=clean_env(HOME=self.dir,
                                                    XDG_RUNTIME_DIR=self.dir + "/xdg"))
        self.assertEqual(cp.returncode, 3, cp.stderr)
        self.assertEqual(cp.stderr, "deployctl: error: cannot reach deployd at %s/xdg/deployd/"
                                    "deployd.sock: No such file or directory (no deployd of this "
                                    "user's; the system's socket %s is there but may not be used "
                                    "by this user (members of deployd's group may))\n"
                                    % (self.dir, SYSTEM_SOCKET))

    def test_the_socket_of_etc_deployd_deployd_yaml(self):
        d = Daemon()
        self.addCleanup(d.cleanup)
        d.start()
        os.chmod(d.dir, 0o755)
        os.chmod(d.socket, 0o666)
        with open(os.path.join(self.etc, "deployd", "deployd.yaml"), "w") as f:
            f.write("socket: %s\nstate_dir: /nowhere\n" % d.socket)
        cp = subprocess.run(self.inside() + [DEPLOYCTL_BIN, "version"], env=clean_env(),
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertTrue(cp.stdout.endswith(", at %s\n" % d.socket), cp.stdout)
        # A file this user may not read is not theirs to go by: on to the next place.
        os.chmod(os.path.join(self.etc, "deployd", "deployd.yaml"), 0o600)
        cp = self.ctl_as_user("version", env=clean_env(HOME=self.dir,
                                                       XDG_RUNTIME_DIR=self.dir + "/xdg"))
        self.assertEqual(cp.returncode, 3, cp.stderr)
        self.assertIn("daemon: not reachable (cannot reach deployd at %s/xdg/deployd/deployd.sock"
                      % self.dir, cp.stdout)


class TmpSocketDirTest(unittest.TestCase):
    """The per-user socket without XDG_RUNTIME_DIR: /tmp/deployd-UID, for a uid of the test's."""

    def setUp(self):
        needs_root_and("setpriv")
        self.dir = tempfile.mkdtemp(prefix="deployd-tmpdir-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        taken = {p.pw_uid for p in pwd.getpwall()}
        self.uid = free_id(taken)
        os.chmod(self.dir, 0o755)
        os.chown(self.dir, self.uid, self.uid)
        self.socket_dir = "/tmp/deployd-%d" % self.uid
        self.socket = self.socket_dir + "/deployd.sock"
        self.addCleanup(shutil.rmtree, self.socket_dir, True)
        self.env = clean_env(HOME=self.dir, XDG_STATE_HOME=self.dir + "/state")
        self.daemon = None
        self.addCleanup(self.stop_daemon)

    def as_user(self, argv):
        return ["setpriv", "--reuid=%d" % self.uid, "--regid=%d" % self.uid, "--clear-groups",
                "--"] + argv

    def deployd(self):
        return subprocess.Popen(self.as_user([DEPLOYD_BIN]), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL)

    def stop_daemon(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            self.daemon.communicate(timeout=30)

    def ctl(self, *args):
        return subprocess.run(self.as_user([DEPLOYCTL_BIN] + list(args)), env=self.env,
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def test_deployd_makes_it_private_and_deployctl_finds_it(self):
        if self.ctl("--version").returncode != 0:
            self.skipTest("uid %d cannot run %s" % (self.uid, DEPLOYCTL_BIN))
        self.daemon = self.deployd()
        wait_until(lambda: os.path.exists(self.socket) or self.daemon.poll() is not None,
                   message="deployd's socket " + self.socket)
        if self.daemon.poll() is not None:
            self.fail("deployd exited: %s" % self.daemon.stdout.read())
        st = os.lstat(self.socket_dir)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (self.uid, 0o700))
        cp = self.ctl("version")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertTrue(cp.stdout.endswith(", at %s\n" % self.socket), cp.stdout)

    def assert_refused(self, reason):
        message = ("refusing %s: %s %s" % (self.socket, self.socket_dir, reason))
        daemon = self.deployd()
        out, _ = daemon.communicate(timeout=60)
        self.assertEqual(daemon.returncode, 1, out)
        self.assertEqual(out.splitlines()[-1], "deployd: error: " + message)
        cp = self.ctl("runs")
        self.assertEqual((cp.returncode, cp.stdout, cp.stderr), (3, "", "deployctl: error: %s\n"
                                                                % message))

    def test_a_directory_another_user_made_is_refused(self):
        os.mkdir(self.socket_dir)
        os.chmod(self.socket_dir, 0o777)
        self.assert_refused("belongs to uid 0, not to this user (uid %d), and its owner could put "
                            "their own socket there; remove it, or set XDG_RUNTIME_DIR (or "
                            "--socket) to a directory of your own" % self.uid)

    def test_a_directory_open_to_others_is_refused(self):
        os.mkdir(self.socket_dir)
        os.chown(self.socket_dir, self.uid, self.uid)
        os.chmod(self.socket_dir, 0o755)
        self.assert_refused("has mode 0755, not 0700; chmod 700 %s, or set XDG_RUNTIME_DIR (or "
                            "--socket) to a directory of your own" % self.socket_dir)

    def test_a_symbolic_link_is_refused(self):
        target = os.path.join(self.dir, "elsewhere")
        os.mkdir(target, 0o700)
        os.chown(target, self.uid, self.uid)
        os.symlink(target, self.socket_dir)
        self.addCleanup(lambda: os.path.islink(self.socket_dir) and os.unlink(self.socket_dir))
        self.assert_refused("is not a directory (a symbolic link?); remove it, or set "
                            "XDG_RUNTIME_DIR (or --socket) to a directory of your own")


if __name__ == "__main__":
    main_skipping_with_77()
