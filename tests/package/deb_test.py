#!/usr/bin/env python3
"""The .deb, built, installed into a fresh Debian 12 root running real systemd, started by the
administrator, then removed and purged.

Builds the package with the build tree's CPack (`cpack -G DEB`), and boots an overlay of the
cached root of tests/systemd/systemd_host.py (a minimal Debian 12 made with debootstrap, with
systemd 252; the overlay keeps the cache read-only and shows exactly what changed) with
`systemd-nspawn -b`. Inside it, it checks:

  - `dpkg -i` installs it with no --force: the root has every library its Depends names
  - `deployd --version` and `deployctl --version` answer
  - the unit is /usr/lib/systemd/system/deployd.service with ExecStart=/usr/sbin/deployd,
    `systemd-analyze verify` passes on it, and every man page its Documentation= names is
    there; systemd knows it (postinst's daemon-reload) and it is neither enabled nor started
  - the four man pages are installed (gzip) and render without warnings (`man --warnings`),
    naming /usr paths; the completions, the schema, the docs and sysusers.d/deployd.conf are
    there; the `deploy` group exists; /etc/deployd/deployd.yaml is a conffile
  - the administrator's `systemctl enable --now deployd` starts it (Type=notify: ready), and
    `deployctl` reaches it on the default socket and carries out a plan
  - `dpkg -r` stops the service and removes every file but the conffile; `dpkg -P` then leaves
    nothing but the dpkg database, its log, the group, and the file the administrator made in
    /etc/deployd

Usage: deb_test.py BUILD_DIR CPACK   (CTest: package.deb_installs). Exits 77 (skipped) with
the reason when the root cannot be made or booted here (not root, no systemd-nspawn or
debootstrap, no Debian mirror, no overlayfs), as the systemd tests do.
"""

import gzip
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "systemd"))
import systemd_host  # noqa: E402

SKIP = 77
MAN_PAGES = ["man1/deployctl.1.gz", "man8/deployd.8.gz", "man5/deployd.yaml.5.gz",
             "man5/deployd-plan.5.gz"]
INSTALLED = ["usr/sbin/deployd", "usr/bin/deployctl", "usr/libexec/deployd/deployd-supervise",
             "usr/lib/systemd/system/deployd.service",
             "usr/lib/sysusers.d/deployd.conf", "etc/deployd/deployd.yaml",
             "usr/share/deployd/plan-v1.schema.json", "usr/share/doc/deployd/README.md",
             "usr/share/doc/deployd/examples/demo.yaml",
             "usr/share/bash-completion/completions/deployctl",
             "usr/share/zsh/vendor-completions/_deployctl",
             "usr/share/fish/vendor_completions.d/deployctl.fish"] + [
                 "usr/share/man/" + page for page in MAN_PAGES]
# What may differ, once the package is purged, from the root as it was booted: dpkg's own
# database and log, the `deploy` group (system groups stay), and what the administrator made.
ALLOWED_AFTER_PURGE = [r"var/lib/dpkg(/.*)?", r"var/log/(dpkg|alternatives)\.log",
                       r"etc/(group|gshadow)-?", r"etc/\.pwd\.lock", r"etc/deployd",
                       r"etc/deployd/hf-token"]
BOOT_TIMEOUT = 60.0
PLAN = """\
version: 1
name: hello
steps:
  - id: hello
    run: [sh, -c, 'echo hello from $(cat /proc/1/comm) under $(readlink /proc/$PPID/exe)']
"""


class Failure(Exception):
    pass


class Root:
    """An overlay of the cached root (lower: the cache, never written; upper: what changed),
    booted with systemd-nspawn; commands run in it with nsenter, as systemd_host does."""

    def __init__(self, cached, work):
        self.lower = cached
        self.upper = os.path.join(work, "upper")
        self.merged = os.path.join(work, "merged")
        self.package_dir = os.path.join(work, "deb")
        self.console = os.path.join(work, "console.log")
        scratch = os.path.join(work, "overlay-work")
        for d in (self.upper, self.merged, scratch, self.package_dir):
            os.makedirs(d)
        cp = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                             "lowerdir=%s,upperdir=%s,workdir=%s" % (cached, self.upper, scratch),
                             self.merged], capture_output=True, text=True)
        if cp.returncode != 0:
            raise systemd_host.Unavailable("cannot mount an overlay of %s: %s"
                                           % (cached, cp.stderr.strip()))
        self.mounted = True
        self.state = None

    def boot(self):
        # /mnt (the .deb) is a directory the root has, so the bind leaves nothing behind.
        argv = ["systemd-nspawn", "--register=no", "--keep-unit", "--console=pipe", "--quiet",
                "-b", "-D", self.merged, "--machine=deployd-deb-%d" % os.getpid(),
                "--resolv-conf=off", "--timezone=off", "--link-journal=no",
                "--bind-ro=%s:/mnt" % self.package_dir]
        with open(self.console, "wb") as console:
            leader = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        self.state = {"leader_pid": leader.pid}
        deadline = time.monotonic() + BOOT_TIMEOUT
        last = ""
        while time.monotonic() < deadline and leader.poll() is None:
            inits = systemd_host._children(leader.pid)
            if inits:
                self.state["init_pid"] = inits[0]
                code, out, _ = self.run("systemctl is-system-running", check=False)
                last = out.strip()
                if last in ("running", "degraded"):
                    return
            time.sleep(0.1)
        raise systemd_host.Unavailable("the root did not boot to 'running' within %.0fs (%s):\n%s"
                                       % (BOOT_TIMEOUT, last or "no init",
                                          read(self.console)[-600:]))

    def close(self):
        if self.state:
            systemd_host.power_off(self.state)
        if self.mounted:
            subprocess.run(["umount", self.merged], capture_output=True)

    def path(self, relative):
        return os.path.join(self.merged, relative)

    def run(self, script, check=True):
        """Runs a shell script inside the booted root; returns (exit status, stdout, stderr)."""
        cp = subprocess.run(["nsenter", "-t", str(self.state["init_pid"]), "-a", "/bin/sh", "-c",
                             script], capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL,
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"})
        if check and cp.returncode != 0:
            raise Failure("in the root: %s\nexit %d\n%s%s" % (script, cp.returncode, cp.stdout,
                                                               cp.stderr))
        return cp.returncode, cp.stdout, cp.stderr

    def changed(self):
        """What differs from the cached root: relative path -> what it is."""
        found = {}
        for top, dirs, files in os.walk(self.upper):
            for name in dirs + files:
                full = os.path.join(top, name)
                rel = os.path.relpath(full, self.upper)
                st = os.lstat(full)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    found[rel] = "deleted"
                elif stat.S_ISDIR(st.st_mode):
                    # A directory copied up because something under it changed is not new.
                    if not os.path.lexists(os.path.join(self.lower, rel)):
                        found[rel] = "new directory"
                else:
                    found[rel] = "file"
        return found


def build_package(build_dir, cpack, out):
    cp = subprocess.run([cpack, "-G", "DEB", "-B", out, "--config",
                         os.path.join(build_dir, "CPackConfig.cmake")],
                        capture_output=True, text=True, timeout=600)
    if cp.returncode != 0:
        raise Failure("cpack -G DEB failed (exit %d):\n%s%s" % (cp.returncode, cp.stdout,
                                                                 cp.stderr))
    debs = [f for f in os.listdir(out) if re.match(r"deployd_.*\.deb$", f)]
    if len(debs) != 1:
        raise Failure("cpack made %s in %s, expected one deployd_*.deb" % (debs, out))
    return debs[0]


def check(condition, message):
    if not condition:
        raise Failure(message)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def test(root, deb, version):
    print("package: %s" % deb)
    fields = subprocess.run(["dpkg-deb", "-f", os.path.join(root.package_dir, deb)],
                            capture_output=True, text=True, check=True).stdout
    print(fields.strip())
    check(re.search(r"^Depends: .*libc6", fields, re.M), "no Depends: computed:\n" + fields)
    check(re.search(r"^Section: admin$", fields, re.M), "Section is not admin")
    before = root.changed()  # what booting changed: not the package's

    # Install: no --force, so every Depends is met by the root's packages.
    _, out, err = root.run("dpkg -i /mnt/%s" % deb)
    print(out.strip().splitlines()[-1])
    for rel in INSTALLED:
        check(os.path.isfile(root.path(rel)), "not installed: /" + rel)
    check(os.access(root.path("usr/sbin/deployd"), os.X_OK), "/usr/sbin/deployd not executable")
    _, out, _ = root.run("deployd --version && deployctl --version")
    check(out.split() == ["deployd", version, "deployctl", version], "versions: %r" % out)
    _, out, _ = root.run("getent group deploy")
    check(out.startswith("deploy:"), "no group deploy (sysusers.d): %r" % out)
    _, out, _ = root.run("dpkg-query -W -f='${Conffiles}' deployd")
    check("/etc/deployd/deployd.yaml" in out, "deployd.yaml is not a conffile: %r" % out)

    # The unit: ExecStart from the package's prefix, and systemd-analyze verify is silent.
    # (The root has no man-db, so --man=no; the pages Documentation= names are looked for
    # here instead.)
    unit = read(root.path("usr/lib/systemd/system/deployd.service"))
    check(re.search(r"^ExecStart=/usr/sbin/deployd$", unit, re.M), "ExecStart:\n" + unit)
    for name, section in re.findall(r"man:([\w.-]+)\((\d)\)", unit):
        page = "usr/share/man/man%s/%s.%s.gz" % (section, name, section)
        check(os.path.isfile(root.path(page)), "Documentation=man:%s(%s): no /%s"
              % (name, section, page))
    for doc in re.findall(r"file://(/\S+)", unit):
        check(os.path.isfile(root.path(doc.lstrip("/"))), "Documentation=file://%s: missing" % doc)
    code, out, err = root.run("systemd-analyze verify --man=no deployd.service", check=False)
    noise = [l for l in (out + err).splitlines() if l.strip()]
    check(code == 0 and not noise, "systemd-analyze verify deployd.service:\n%s" % "\n".join(noise))
    _, out, _ = root.run("systemctl show -P FragmentPath deployd.service; "
                         "systemctl is-enabled deployd.service || true; "
                         "systemctl is-active deployd.service || true")
    # (Debian 12's /lib is /usr/lib, and systemd names it by its first search path.)
    check(out.split() in (["/usr/lib/systemd/system/deployd.service", "disabled", "inactive"],
                          ["/lib/systemd/system/deployd.service", "disabled", "inactive"]),
          "after dpkg -i, systemd says (unit, enabled, active): %r" % out)
    print("unit: ExecStart=/usr/sbin/deployd, systemd-analyze verify: ok; disabled, inactive")

    # Man pages render without warnings and name the package's paths.
    for page in MAN_PAGES:
        path = root.path("usr/share/man/" + page)
        text = gzip.open(path, "rt").read()
        for placeholder in ("@PROJECT_VERSION@", "@SCHEMAFILE@", "@DOCDIR@", "@SYSUSERSDIR@"):
            check(placeholder not in text, "%s: %s was left unfilled" % (page, placeholder))
        check("/usr/local" not in text, "%s names /usr/local" % page)
        if shutil.which("man"):
            cp = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", path],
                                capture_output=True, text=True,
                                env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
            check(cp.returncode == 0 and not cp.stderr.strip(),
                  "man --warnings %s:\n%s" % (page, cp.stderr))
    check("/usr/share/deployd/plan-v1.schema.json"
          in gzip.open(root.path("usr/share/man/man5/deployd-plan.5.gz"), "rt").read(),
          "deployd-plan(5) does not name the installed schema")
    print("man pages: %s" % ", ".join(MAN_PAGES))

    # The administrator starts it; deployctl finds it on the default socket, as root.
    root.run("systemctl enable --now deployd.service")
    _, out, _ = root.run("systemctl is-active deployd.service; systemctl is-enabled "
                         "deployd.service; readlink /proc/$(systemctl show -P MainPID "
                         "deployd.service)/exe")
    check(out.split() == ["active", "enabled", "/usr/sbin/deployd"],
          "after systemctl enable --now (active, enabled, binary): %r" % out)
    # (The booted root's /tmp is its own tmpfs: the plan is written from inside.)
    _, out, _ = root.run("cat > /tmp/hello.yaml <<'EOF'\n%sEOF\n"
                         "deployctl apply /tmp/hello.yaml --wait && deployctl logs hello-1 hello"
                         % PLAN)
    check("run hello-1 succeeded" in out and
          "hello from systemd under /usr/libexec/deployd/deployd-supervise" in out,
          "a run through the packaged service:\n" + out)
    check(os.path.isfile(root.path("var/lib/deployd/deployd.db")), "no /var/lib/deployd/deployd.db")
    print("systemctl enable --now deployd: active; a plan ran through it")
    # Something of the administrator's own, which no removal may take.
    with open(root.path("etc/deployd/hf-token"), "w") as f:
        f.write("secret\n")

    root.run("dpkg -r deployd")
    _, out, _ = root.run("systemctl is-active deployd.service || true; "
                         "systemctl show -P LoadState deployd.service")
    check(out.split() == ["inactive", "not-found"],
          "after dpkg -r, systemd says (active, loaded): %r" % out)
    for rel in INSTALLED:
        if rel == "etc/deployd/deployd.yaml":
            check(os.path.isfile(root.path(rel)), "dpkg -r removed the conffile")
        else:
            check(not os.path.lexists(root.path(rel)), "dpkg -r left /" + rel)
    root.run("dpkg -P deployd")
    _, out, _ = root.run("dpkg-query -W -f='${Status}' deployd 2>&1 || true")
    check("installed" not in out or "not-installed" in out, "still known to dpkg: %r" % out)
    left = [(rel, what) for rel, what in sorted(root.changed().items())
            if before.get(rel) != what
            and not any(re.fullmatch(p, rel) for p in ALLOWED_AFTER_PURGE)]
    check(not left, "after dpkg -P, changed from the fresh root:\n"
          + "\n".join("  /%s (%s)" % item for item in left))
    check(os.path.isfile(root.path("etc/deployd/hf-token")), "the purge took the admin's file")
    print("dpkg -r: stopped and removed; dpkg -P: clean (only dpkg's database, the group and "
          "the admin's file remain)")


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    build_dir, cpack = argv[1], argv[2]
    version = re.search(r'CPACK_PACKAGE_VERSION "([^"]+)"',
                        read(os.path.join(build_dir, "CPackConfig.cmake"))).group(1)
    try:
        cached = systemd_host.ensure_root()
    except (systemd_host.Unavailable, OSError) as e:
        print("package test skipped: the Debian 12 root cannot be made here: %s" % e)
        return SKIP
    work = tempfile.mkdtemp(prefix="deployd-deb-")
    root = None
    try:
        root = Root(cached, work)
        deb = build_package(build_dir, cpack, root.package_dir)
        root.boot()
        test(root, deb, version)
    except systemd_host.Unavailable as e:
        print("package test skipped: %s" % e)
        return SKIP
    except Failure as e:
        print("FAILED: %s" % e)
        return 1
    finally:
        if root:
            root.close()
        shutil.rmtree(work, ignore_errors=True)
    print("package.deb_installs: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
