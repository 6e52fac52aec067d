"""The shell completions of completions/ against the real deployctl and a real deployd: bash
(scripted: COMP_WORDS and COMP_CWORD set, _deployctl called, COMPREPLY read), fish
(`complete -C`) and zsh (an interactive zsh on a pseudo-terminal, TAB pressed, the matches
captured from compadd). Each completes the commands, their flags, plan files, the run ids of
`runs --json` and the step ids of `status RUN --json`, and completes ids to nothing, silently,
when deployd cannot be reached."""

import os
import pty
import re
import select
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import DEPLOYCTL_BIN, SOURCE_DIR, DaemonTestCase

COMPLETIONS = os.path.join(SOURCE_DIR, "completions")
VERBS = ["validate", "apply", "plan", "runs", "status", "show", "watch", "logs", "why", "cancel",
         "retry", "skip", "pause", "resume", "approve", "delete", "prune", "dial-stdio", "rollout",
         "rollout-batch", "history", "metrics", "version"]
RUNS_FLAGS = ["--plan", "--state", "--since", "--limit", "--before", "--all", "--json", "--help"]

PLAN = """\
version: 1
name: comp
steps:
  - id: first-step
    run: 'true'
  - id: second_step
    run: [/bin/true]
"""

BASH_DRIVER = r"""
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_deployctl deployctl
printf '%s\n' "${COMPREPLY[@]}"
"""

ZSH_INIT = r"""
fpath=(%(dir)s $fpath)
autoload -Uz compinit
compinit -u -D
PROMPT='%%%% '
unsetopt beep
# Every match a completion adds is also written to the hits file.
compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
    builtin compadd "$@"
    return
  fi
  local -a __hits
  builtin compadd -O __hits "$@"
  (( $#__hits )) && print -rl -- $__hits >> %(hits)s
  builtin compadd "$@"
}
"""


class ShellCompletion:
    """Completes a command line in one shell; returns (matches, stderr)."""

    def __init__(self, env, cwd):
        self.env = env
        self.cwd = cwd

    def bash(self, line):
        words = line.split(" ")
        cp = subprocess.run(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                             os.path.join(COMPLETIONS, "deployctl.bash")] + words,
                            env=self.env, cwd=self.cwd, capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise AssertionError("bash completion of %r: exit %d\n%s" % (line, cp.returncode,
                                                                         cp.stderr))
        return [m for m in cp.stdout.split("\n") if m], cp.stderr

    def fish(self, line):
        script = "source %s; complete -C %s" % (
            os.path.join(COMPLETIONS, "deployctl.fish"), shell_quote(line))
        cp = subprocess.run(["fish", "--no-config", "-c", script], env=self.env, cwd=self.cwd,
                            capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise AssertionError("fish completion of %r: exit %d\n%s" % (line, cp.returncode,
                                                                         cp.stderr))
        return [m.split("\t")[0] for m in cp.stdout.split("\n") if m], cp.stderr

    def zsh(self, line, timeout=30):
        tmp = tempfile.mkdtemp(prefix="deployctl-zsh-")
        try:
            hits = os.path.join(tmp, "hits")
            init = os.path.join(tmp, "init.zsh")
            with open(init, "w") as f:
                f.write(ZSH_INIT % {"dir": COMPLETIONS, "hits": hits})
            master, slave = pty.openpty()
            proc = subprocess.Popen(["zsh", "-f", "-i"], stdin=slave, stdout=slave,
                                    stderr=slave, env=self.env, cwd=self.cwd,
                                    start_new_session=True)
            os.close(slave)
            out = bytearray()
            deadline = time.monotonic() + timeout

            def read_until(pattern):
                while not re.search(pattern, out):
                    if time.monotonic() > deadline:
                        raise AssertionError("zsh completion of %r: no %r in\n%s"
                                             % (line, pattern, out.decode(errors="replace")))
                    ready, _, _ = select.select([master], [], [], 0.1)
                    if ready:
                        try:
                            out.extend(os.read(master, 65536))
                        except OSError:
                            pass
            try:
                os.write(master, b"source %s; print INIT-DONE\n" % init.encode())
                read_until(rb"INIT-DONE[^%]*% ")
                del out[:]
                os.write(master, line.encode() + b"\t")
                time.sleep(1.0)
                os.write(master, b"\x15print COMPLETION-DONE\n")  # ^U drops the line
                read_until(rb"(?<!print )COMPLETION-DONE\r?\n")
                os.write(master, b"exit\n")
                proc.wait(10)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
            text = out.decode(errors="replace")
            if os.path.exists(hits):
                with open(hits) as f:
                    matches = [m for m in f.read().split("\n") if m]
            else:
                matches = []
            # What the completion printed besides the line editor's redraws: errors.
            errors = [l for l in text.splitlines() if "deployctl:" in l or "error" in l.lower()]
            return matches, "\n".join(errors)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def shell_quote(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


class CompletionTest(DaemonTestCase):
    shell = None  # "bash", "fish" or "zsh"

    def setUp(self):
        if self.shell is None:
            self.skipTest("the base class")
        if shutil.which(self.shell) is None:
            self.skipTest("%s is not installed (.ci/packages lists it)" % self.shell)
        super().setUp()
        self.work = tempfile.mkdtemp(prefix="deployctl-comp-")
        self.addCleanup(shutil.rmtree, self.work, True)
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(os.path.abspath(DEPLOYCTL_BIN)) + os.pathsep + env["PATH"]
        env["DEPLOYD_SOCKET"] = self.d.socket
        env["HOME"] = self.work
        env["TERM"] = "xterm"
        env.pop("XDG_CONFIG_HOME", None)
        env["XDG_CONFIG_HOME"] = os.path.join(self.work, "config")
        env["XDG_DATA_HOME"] = os.path.join(self.work, "data")
        self.env = env
        self.shells = ShellCompletion(env, self.work)

    def complete(self, line, env=None):
        if env:
            self.shells.env = dict(self.env, **env)
        try:
            return getattr(self.shells, self.shell)(line)
        finally:
            self.shells.env = self.env

    def assert_completes(self, line, expected, exact=True):
        matches, errors = self.complete(line)
        self.assertEqual(errors, "", "%s completion of %r printed errors" % (self.shell, line))
        if exact:
            self.assertEqual(sorted(set(matches)), sorted(expected),
                             "%s completion of %r" % (self.shell, line))
        else:
            for m in expected:
                self.assertIn(m, matches, "%s completion of %r" % (self.shell, line))
        return matches

    def test_commands_and_flags(self):
        self.assert_completes("deployctl ", VERBS)
        self.assert_completes("deployctl st", ["status"])
        self.assert_completes("deployctl re", ["retry", "resume"])
        self.assert_completes("deployctl --", ["--socket", "--host", "--config", "--help",
                                               "--version"],
                              exact=False)
        self.assert_completes("deployctl logs --", ["--follow", "--timestamps", "--json",
                                                    "--help"])
        self.assert_completes("deployctl apply --", ["--var", "--wait", "--wait-lock", "--json",
                                                     "--help"])
        self.assert_completes("deployctl retry --", ["--wait", "--json", "--help"])
        self.assert_completes("deployctl version --", ["--json", "--help"])
        # Global options may come after the command: the socket there is the one asked.
        self.assert_completes("deployctl runs --socket %s --" % self.d.socket, RUNS_FLAGS)
        self.assert_completes("deployctl show --", ["--plan", "--json", "--help"])
        self.assert_completes("deployctl delete --", ["--json", "--help"])
        self.assert_completes("deployctl prune --", ["--older-than", "--json", "--help"])
        self.assert_completes("deployctl runs --state f", ["failed"])
        self.assert_completes("deployctl history --", ["--limit", "--json", "--help"])
        self.assert_completes("deployctl metrics --", ["--json", "--help"])

    def test_plan_files(self):
        for name in ("a.yaml", "b.yml", "notes.txt"):
            with open(os.path.join(self.work, name), "w") as f:
                f.write(PLAN)
        os.mkdir(os.path.join(self.work, "plans"))
        matches = self.assert_completes("deployctl apply ", ["a.yaml", "b.yml"], exact=False)
        self.assertNotIn("notes.txt", matches)
        self.assertTrue(any(m.rstrip("/") == "plans" for m in matches), matches)
        self.assert_completes("deployctl validate a.yaml b", ["b.yml"])

    def test_run_and_step_ids_from_the_daemon(self):
        plan = self.d.write_plan("comp.yaml", PLAN)
        first, _ = self.d.apply(plan, check=0)
        second, _ = self.d.apply(plan, check=0)
        self.assert_completes("deployctl status ", [first, second])
        self.assert_completes("deployctl why %s" % first[:-1], [first, second])
        self.assert_completes("deployctl logs %s " % first, ["first-step", "second_step"])
        self.assert_completes("deployctl retry --wait %s s" % second, ["second_step"])
        self.assert_completes("deployctl approve %s f" % first, ["first-step"])
        self.assert_completes("deployctl show ", [first, second])
        self.assert_completes("deployctl delete --json ", [first, second])
        # runs --plan takes a plan's name; show --plan is a flag, RUN comes after it.
        self.assert_completes("deployctl runs --plan ", ["comp"])
        self.assert_completes("deployctl show --plan ", [first, second])
        # The socket named on the command line is the one asked, before the command or after.
        self.assert_completes("deployctl --socket %s status " % self.d.socket, [first, second])
        for line in ("deployctl --socket %s status " % self.d.socket,
                     "deployctl status --socket %s " % self.d.socket):
            matches, errors = self.complete(line, env={"DEPLOYD_SOCKET": "/nonexistent.sock"})
            self.assertEqual((sorted(set(matches)), errors), (sorted([first, second]), ""), line)
        # history takes a plan's name: those of the runs deployd knows, once each.
        self.assert_completes("deployctl history ", ["comp"])
        self.assert_completes("deployctl history --limit 5 co", ["comp"])

    def test_daemon_down_completes_nothing_silently(self):
        self.assert_completes("deployctl --socket %s/none.sock status " % self.work, [])
        self.d.stop()
        self.assert_completes("deployctl status ", [])
        self.assert_completes("deployctl logs comp-1 ", [])


class BashCompletionTest(CompletionTest):
    shell = "bash"

    def test_registered_for_deployctl(self):
        cp = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                             "source %s; complete -p deployctl"
                             % os.path.join(COMPLETIONS, "deployctl.bash")],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout.strip(), "complete -F _deployctl deployctl")
        self.assertEqual(cp.stderr, "")


class FishCompletionTest(CompletionTest):
    shell = "fish"


class ZshCompletionTest(CompletionTest):
    shell = "zsh"


del CompletionTest

if __name__ == "__main__":
    unittest.main()
