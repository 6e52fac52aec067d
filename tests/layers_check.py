#!/usr/bin/env python3
"""Checks that every #include of daemon/ follows the layers (README, "Development").

A layer may include its own folder, the layers below it and include/deployd/. Static libraries
linked in layer order already refuse a call that reaches up; this also catches what links
anyway (an inline function, a type, a constant). Prints each offending include as
FILE:LINE: and exits 1 when there is one.

Usage: layers_check.py SOURCE_DIR
"""
import os
import re
import sys

# Lowest first. Each layer may use the ones before it; ctl (deployctl) only what it lists:
# protocol (the wire JSON both ends share) sits just above util so that deployctl can use it.
LAYERS = ["util", "protocol", "plan", "store", "process", "checks", "actions", "engine", "control"]
ALLOWED = {name: set(LAYERS[:i + 1]) for i, name in enumerate(LAYERS)}
ALLOWED["ctl"] = {"util", "protocol", "plan", "ctl"}
# deployd_main.cc, at the top of daemon/, wires everything together.
ALLOWED[""] = set(LAYERS)

# The step machine is pure: state x event -> state + effects. No I/O of any kind, and only the
# shared vocabulary (and its own header) from the project. So is the step update (an event's
# facts -> the step's next record, its event and the effects): it names the store's plain
# records (StepRecord, Transition in store/run_store.h) as well, never the store.
PURE_FILES = {"engine/step_machine.h", "engine/step_machine.cc",
              "engine/step_update.h", "engine/step_update.cc"}
PURE_RECORDS = {"engine/step_update.h": {"store/run_store.h"}}
IO_HEADERS = re.compile(r"^(boost/asio|boost/process|boost/beast|sqlite3|fstream|iostream|"
                        r"cstdio|stdio\.h|unistd\.h|fcntl\.h|sys/|spdlog|filesystem|thread)")

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(rel_path):
    parts = rel_path.split("/")
    return parts[0] if len(parts) > 1 else ""


def main():
    source_dir = sys.argv[1]
    daemon = os.path.join(source_dir, "daemon")
    problems = []
    checked = 0
    for root, _, files in os.walk(daemon):
        for name in sorted(files):
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, daemon)
            layer = layer_of(rel)
            if layer not in ALLOWED:
                problems.append(f"daemon/{rel}:1: folder '{layer}' is not a layer")
                continue
            checked += 1
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    quote, target = m.groups()
                    where = f"daemon/{rel}:{number}:"
                    if rel in PURE_FILES:
                        if quote == "<" and IO_HEADERS.match(target):
                            problems.append(f"{where} the step machine does no I/O: <{target}>")
                        if quote == '"' and not (target.startswith("deployd/") or target in PURE_FILES
                                                 or target in PURE_RECORDS.get(rel, ())):
                            problems.append(f'{where} the step machine uses only include/deployd/: "{target}"')
                    if quote == "<":
                        continue
                    if target.startswith("deployd/"):
                        continue
                    if "/" not in target:
                        problems.append(f'{where} include with the folder: "{target}"')
                        continue
                    target_layer = layer_of(target)
                    if not os.path.exists(os.path.join(daemon, target)):
                        problems.append(f'{where} no such file daemon/{target}')
                    elif target_layer not in ALLOWED[layer]:
                        problems.append(f'{where} layer {layer or "main"} may not use {target_layer}: "{target}"')
    for p in problems:
        print(p)
    print(f"layers_check: {checked} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
