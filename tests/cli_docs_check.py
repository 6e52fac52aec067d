#!/usr/bin/env python3
"""The man pages and the shell completions know every command and flag the binaries have.

Reads `deployctl --help`, `deployctl VERB --help` and `deployd --help` of the built binaries
(CLI11's help) and checks that
  - man/deployctl.1.scd has an entry for every command, naming each of its flags, and names
    the global options; man/deployd.8.scd names every option of deployd
  - the bash completion offers exactly the flags of each command (a scripted completion of
    `deployctl VERB -`), and the commands; the fish completion the same (`complete -C`)
  - the zsh completion names each flag in the command's branch of _deployctl
so that a new command or flag is documented and completed, or this test says where not.

Usage: cli_docs_check.py SOURCE_DIR DEPLOYD DEPLOYCTL   (CTest: docs.cli_documented)
"""

import os
import re
import shutil
import subprocess
import sys

BASH_DRIVER = r"""
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_deployctl deployctl
printf '%s\n' "${COMPREPLY[@]}"
"""


def help_of(argv):
    cp = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    return cp.stdout


def section(text, title):
    """The lines of a CLI11 help section ('Options:', 'Subcommands:'): up to the blank line
    that ends it (the footer's examples and exit codes follow)."""
    lines, inside = [], False
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            inside = line == title
            continue
        if inside and not line.strip() and lines:
            inside = False
        if inside and line.strip():
            lines.append(line)
    return lines


def flags(text):
    """Every flag of a help text: ['-h', '--help', '--var', ...]."""
    found = []
    for line in section(text, "Options:"):
        m = re.match(r"^\s+(-[^\s]+)", line)
        if m:
            found += m.group(1).split(",")
    return found


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    source, deployd, deployctl = argv[1:]
    problems = []
    top = help_of([deployctl])
    verbs = [re.match(r"^\s+(\S+)", l).group(1) for l in section(top, "Subcommands:")]
    if not verbs:
        problems.append("deployctl --help lists no commands:\n" + top)
    verb_flags = {v: flags(help_of([deployctl, v])) for v in verbs}
    global_flags = flags(top)

    man = open(os.path.join(source, "man", "deployctl.1.scd")).read()
    commands = man.split("\n# COMMANDS\n", 1)[-1].split("\n# ", 1)[0]
    entries = {}
    for block in re.split(r"\n(?=\*\w)", commands):
        m = re.match(r"\*([\w-]+)\*", block)
        if m:
            entries[m.group(1)] = block
    for verb in verbs:
        if verb not in entries:
            problems.append("man/deployctl.1.scd: no entry for '%s' under COMMANDS" % verb)
            continue
        for flag in verb_flags[verb]:
            if flag in ("-h", "--help"):
                continue
            if "*%s*" % flag not in entries[verb]:
                problems.append("man/deployctl.1.scd: '%s' does not name its flag %s"
                                % (verb, flag))
    for flag in global_flags:
        if "*%s*" % flag not in man:
            problems.append("man/deployctl.1.scd does not name the global option %s" % flag)
    man8 = open(os.path.join(source, "man", "deployd.8.scd")).read()
    for flag in flags(help_of([deployd])):
        if "*%s*" % flag not in man8:
            problems.append("man/deployd.8.scd does not name deployd's option %s" % flag)

    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(deployctl)) + os.pathsep
               + os.environ.get("PATH", ""), DEPLOYD_SOCKET="/nonexistent/deployd.sock")

    def bash(*words):
        cp = subprocess.run(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                             os.path.join(source, "completions", "deployctl.bash")]
                            + list(words), capture_output=True, text=True, env=env, timeout=30)
        return set(l for l in cp.stdout.splitlines() if l)

    def fish(line):
        script = "source %s; complete -C '%s'" % (
            os.path.join(source, "completions", "deployctl.fish"), line)
        cp = subprocess.run(["fish", "--no-config", "-c", script], capture_output=True,
                            text=True, env=env, timeout=30)
        return set(l.split("\t")[0] for l in cp.stdout.splitlines() if l)

    if bash("deployctl", "") != set(verbs):
        problems.append("bash completes the commands as %s, deployctl has %s"
                        % (sorted(bash("deployctl", "")), sorted(verbs)))
    have_fish = shutil.which("fish") is not None
    if have_fish and not set(verbs) <= fish("deployctl "):
        problems.append("fish completes the commands as %s, deployctl has %s"
                        % (sorted(fish("deployctl ")), sorted(verbs)))
    zsh = open(os.path.join(source, "completions", "_deployctl")).read()
    for verb in verbs:
        want = set(verb_flags[verb])
        got = bash("deployctl", verb, "-")
        if got != want:
            problems.append("bash completes 'deployctl %s -' as %s, its flags are %s"
                            % (verb, sorted(got), sorted(want)))
        if have_fish:
            got = set(f for f in fish("deployctl %s -" % verb) if f.startswith("--"))
            if got != set(f for f in want if f.startswith("--")):
                problems.append("fish completes 'deployctl %s --' as %s, its flags are %s"
                                % (verb, sorted(got), sorted(want)))
        m = re.search(r"\n\s+(?:[\w|\s]+\|\s*)?%s(?:\s*\|[\w|\s]+)?\)\n(.*?);;" % verb, zsh, re.S)
        if not m:
            problems.append("completions/_deployctl has no branch for '%s'" % verb)
            continue
        branch = m.group(1)
        if "$help" not in branch:
            problems.append("completions/_deployctl: '%s' does not offer --help" % verb)
        for flag in want - {"-h", "--help"}:
            if not re.search(r"[\s'{,(*)]%s[\[,}]" % re.escape(flag), branch):
                problems.append("completions/_deployctl: '%s' does not offer %s" % (verb, flag))

    for p in problems:
        print(p)
    print("docs.cli_documented: %d commands, %d flags; %d problems%s"
          % (len(verbs), sum(len(f) for f in verb_flags.values()), len(problems),
             "" if have_fish else " (fish not installed: its completion not checked)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
