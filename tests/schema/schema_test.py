#!/usr/bin/env python3
"""plans/plan-v1.schema.json against the parser: every plan of a corpus goes through both the
schema (python3-jsonschema) and the real `deployctl validate`, and they must agree.

  tests/schema/accept/*.yaml   valid plans: the schema accepts them, deployctl exits 0
  tests/schema/reject/*.yaml   each with one mistake a schema can see (an unknown key, a wrong
                               type, a missing key, two kinds in a check, ...): the schema rejects
                               it, and only under the path its `# at:` line names; deployctl
                               exits 2 with exactly one error, the one its `# expect:` line quotes
  tests/schema/beyond/*.yaml   mistakes only the parser can see (an undefined variable, a regex
                               that does not compile, a duplicate step id, timing rules): the
                               schema accepts them, deployctl exits 2 with the `# expect:` error
  plans/*.yaml                 the shipped plans: accepted by both
  man/deployd-plan.5.scd       the plan of its EXAMPLE section: accepted by both

Header lines of a corpus file: `# vars: K=V ...` (passed as --var), `# expect: TEXT`, `# at: a/0/b`.
The YAML is read as yaml-language-server reads it, YAML 1.2's core schema (`yes` is a string, not
a boolean; `10:30` is not a number), with keys kept as written, as deployd's parser sees them.

Usage: schema_test.py SOURCE_DIR DEPLOYCTL   (CTest: schema.plan_v1). Exits 0 when all agree.
"""

import atexit
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
    import yaml
except ImportError as e:
    sys.exit("schema.plan_v1: %s (Debian packages python3-jsonschema and python3-yaml, "
             "listed in .ci/packages)" % e)


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader with YAML 1.2 core-schema scalars instead of YAML 1.1's."""


Yaml12Loader.yaml_implicit_resolvers = {}
for tag, pattern, first in [
        ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", list("~nN") + [""]),
        ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
        ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$",
         list("-+0123456789")),
        ("tag:yaml.org,2002:float",
         r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", list("-+.0123456789")),
]:
    Yaml12Loader.add_implicit_resolver(tag, re.compile(pattern), first)


def _int12(loader, node):
    text = node.value
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text)


def _mapping_as_written(loader, node, deep=False):
    # deployd reads every scalar key as its text (`1: x` is the key "1"); a later duplicate
    # is the parser's error to report, and does not matter here.
    loader.flatten_mapping(node)
    mapping = {}
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            key = key_node.value
        else:
            key = json.dumps(loader.construct_object(key_node, deep=True), default=str)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _int12)
Yaml12Loader.add_constructor("tag:yaml.org,2002:map", _mapping_as_written)


def _jsonschema_version():
    try:
        from importlib import metadata
        return metadata.version("jsonschema")
    except Exception:  # noqa: BLE001 - only for the summary line
        return "?"


def headers(text):
    found = {"vars": [], "expect": None, "at": None}
    for line in text.splitlines():
        m = re.match(r"#\s*(vars|expect|at):\s?(.*)$", line)
        if not m:
            continue
        if m.group(1) == "vars":
            found["vars"] += m.group(2).split()
        else:
            found[m.group(1)] = m.group(2).strip()
    return found


def under(error, at):
    """Whether the schema's error is about what lies under the path `at`: its own path is, or
    it is an anyOf/oneOf above it (a short form or a map, say) and one of the alternatives
    failed under it."""
    where = [str(p) for p in error.absolute_path]
    if where[:len(at)] == at:
        return True
    return (where == at[:len(where)] and error.validator in ("anyOf", "oneOf")
            and any(under(sub, at) for sub in error.context))


def path_text(path):
    return "/".join(str(p) for p in path)


class Checker:
    def __init__(self, source_dir, deployctl):
        self.source_dir = source_dir
        self.deployctl = deployctl
        with open(os.path.join(source_dir, "plans", "plan-v1.schema.json")) as f:
            schema = json.load(f)
        jsonschema.Draft7Validator.check_schema(schema)
        self.validator = jsonschema.Draft7Validator(schema)
        self.problems = []
        self.counts = {}

    def fail(self, path, message):
        self.problems.append("%s: %s" % (os.path.relpath(path, self.source_dir), message))

    def schema_errors(self, path, text):
        try:
            instance = yaml.load(text, Loader=Yaml12Loader)
        except yaml.YAMLError as e:
            self.fail(path, "not YAML: %s" % e)
            return None
        return list(self.validator.iter_errors(instance))

    def parser(self, path, vars_):
        argv = [self.deployctl, "validate", path]
        for pair in vars_:
            argv += ["--var", pair]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def check(self, kind, path):
        with open(path) as f:
            text = f.read()
        h = headers(text)
        errors = self.schema_errors(path, text)
        if errors is None:
            return
        cp = self.parser(path, h["vars"])
        diagnostics = [line for line in cp.stderr.splitlines() if ": error: " in line]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind == "accept":
            for e in errors:
                self.fail(path, "the schema rejects a valid plan at %s: %s"
                          % (path_text(e.absolute_path) or "(top)", e.message[:300]))
            if cp.returncode != 0:
                self.fail(path, "deployctl validate exits %d:\n%s" % (cp.returncode, cp.stderr))
            return
        if cp.returncode != 2:
            self.fail(path, "deployctl validate exits %d, expected 2:\n%s%s"
                      % (cp.returncode, cp.stdout, cp.stderr))
        if not h["expect"]:
            self.fail(path, "no '# expect:' line")
        elif len(diagnostics) != 1 or h["expect"] not in diagnostics[0]:
            self.fail(path, "expected exactly one error containing %r, deployctl said:\n%s"
                      % (h["expect"], cp.stderr))
        if kind == "beyond":
            for e in errors:
                self.fail(path, "the schema now rejects this at %s (%s): move it to reject/ "
                          "with an '# at:' line" % (path_text(e.absolute_path), e.message[:200]))
            return
        if not errors:
            self.fail(path, "the schema accepts it (deployctl: %s)" % h["expect"])
        if h["at"] is None:
            self.fail(path, "no '# at:' line")
            return
        at = [] if h["at"] in ("", "/") else h["at"].split("/")
        for e in errors:
            if not under(e, at):
                self.fail(path, "the schema rejects it at %s (%s), not under %s"
                          % (path_text(e.absolute_path) or "(top)", e.message[:200], h["at"]))


def man_example(source_dir):
    """The plan of deployd-plan(5)'s EXAMPLE section, written to a temporary file."""
    with open(os.path.join(source_dir, "man", "deployd-plan.5.scd")) as f:
        page = f.read()
    m = re.search(r"\n# EXAMPLE\n\n```\n(.*?)\n```\n", page, re.S)
    if not m:
        return None
    fd, path = tempfile.mkstemp(prefix="deployd-plan-example-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(m.group(1).replace("@SCHEMAFILE@", "/usr/share/deployd/plan-v1.schema.json")
                + "\n")
    atexit.register(os.unlink, path)
    return path


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    source_dir, deployctl = os.path.abspath(argv[1]), argv[2]
    checker = Checker(source_dir, deployctl)
    here = os.path.join(source_dir, "tests", "schema")
    for path in sorted(glob.glob(os.path.join(source_dir, "plans", "*.yaml"))):
        checker.check("accept", path)
    example = man_example(source_dir)
    if example:
        checker.check("accept", example)
    else:
        checker.fail(os.path.join(source_dir, "man", "deployd-plan.5.scd"),
                     "no plan under '# EXAMPLE'")
    for kind in ("accept", "reject", "beyond"):
        paths = sorted(glob.glob(os.path.join(here, kind, "*.yaml")))
        if not paths:
            checker.fail(os.path.join(here, kind), "no plans")
        for path in paths:
            checker.check(kind, path)
    for problem in checker.problems:
        print(problem)
    print("schema.plan_v1: %s; %d problems (jsonschema %s)"
          % (", ".join("%d %s" % (n, k) for k, n in checker.counts.items()),
             len(checker.problems), _jsonschema_version()))
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
