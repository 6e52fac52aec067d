#!/usr/bin/env python3
"""A rollout over namespace hosts, against ansible-playbook doing the same (on demand).

Makes a fleet of N hosts (tests/fleet/fleet_hosts.py: a network namespace each, with its own
sshd and deployd; needs root), a plan of S steps, each `run: 'sleep T; echo step I'`, and
rolls it over the fleet with `deployctl rollout --serial B --wait` from a coordinator deployd,
R times. Each time it also runs ansible-playbook on the same hosts with `serial: B`, no fact
gathering, and the same S commands as `shell` tasks (when ansible-playbook is installed:
Debian's ansible-core), over the same ssh configuration. The two alternate, so both see the
same background load.

Reported, median over the runs:
  rollout   wall time from `deployctl rollout` to the end of its run (`watch --json`)
  floor     for each batch, the slowest of its hosts' own runs (created → finished, by the
            hosts' deployd), summed over the batches: what no coordinator can beat
  overhead  rollout − floor, in all, per batch and per host
  ansible   wall time of ansible-playbook

Usage: fleet_rollout.py [--hosts 20] [--serial 5] [--steps 5] [--step-seconds 0.2]
                        [--runs 3] [--json FILE]
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fleet"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.dont_write_bytecode = True

import fleet_hosts  # noqa: E402
import harness  # noqa: E402


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def plan_text(name, steps, seconds):
    lines = ["version: 1", "name: %s" % name, "steps:"]
    for i in range(1, steps + 1):
        lines += ["  - id: step-%d" % i, "    run: 'sleep %s; echo step %d'" % (seconds, i)]
    return "\n".join(lines) + "\n"


def playbook_text(steps, seconds, serial):
    lines = ["- hosts: fleet", "  serial: %d" % serial, "  gather_facts: false", "  tasks:"]
    for i in range(1, steps + 1):
        lines += ["    - name: step %d" % i, "      shell: 'sleep %s; echo step %d'" % (seconds, i)]
    return "\n".join(lines) + "\n"


def host_runs(fleet, plan):
    """Each host's run of `plan`: (created, finished) in Unix ms, by the host's deployd."""
    runs = {}
    for h in fleet.hosts:
        db = sqlite3.connect("file:%s?mode=ro" % h.daemon.db, uri=True, timeout=5)
        try:
            for created, finished in db.execute(
                    "SELECT created_at_ms, finished_at_ms FROM runs WHERE plan_name = ?",
                    (plan,)):
                runs[h.name] = (created, finished)
        finally:
            db.close()
    return runs


def step_times(coordinator, rollout):
    """The coordinator's steps: id → (running at, ended at), Unix ms, from its events."""
    times = {}
    for e in coordinator.events(rollout):
        if e["kind"] != "step.state":
            continue
        start, end = times.get(e["step_id"], (None, None))
        if e["state"] == "running" and start is None:
            start = e["at_ms"]
        if e["state"] in ("succeeded", "failed"):
            end = e["at_ms"]
        times[e["step_id"]] = (start, end)
    return times


def one_rollout(fleet, coordinator, args, index):
    name = "bench%d" % index
    plan = write(os.path.join(fleet.dir, name + ".yaml"),
                 plan_text(name, args.steps, args.step_seconds))
    inventory = write(os.path.join(fleet.dir, "hosts.ini"),
                      "[fleet]\n" + "".join("%s ansible_host=%s ansible_user=root\n"
                                            % (h.name, h.address) for h in fleet.hosts))
    env = dict(fleet.env(), DEPLOYD_SOCKET=coordinator.socket)
    # `rollout`, then `watch --json` of its run: the coordinator's own stream, which asks no
    # host (the live table of `rollout --wait` connects to every host too).
    started = time.monotonic()
    cp = subprocess.run([harness.DEPLOYCTL_BIN, "rollout", plan, "-i", inventory, "--serial",
                         str(args.serial)], env=env, capture_output=True, text=True, timeout=600)
    if cp.returncode != 0:
        raise SystemExit("rollout refused:\n" + cp.stdout + cp.stderr)
    rollout = cp.stdout.split()[0]
    watch = subprocess.run([harness.DEPLOYCTL_BIN, "watch", "--json", rollout], env=env,
                           capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    if watch.returncode != 0:
        raise SystemExit("rollout failed:\n" + watch.stdout[-4000:])
    runs = host_runs(fleet, name)
    own = {h: (f - c) / 1000.0 for h, (c, f) in runs.items()}
    names = [h.name for h in fleet.hosts]
    batches = [names[i:i + args.serial] for i in range(0, len(names), args.serial)]
    floor = sum(max(own[h] for h in batch) for batch in batches)
    # Where a batch's time goes besides its hosts' runs: from its step's start to its first
    # host's run (the step's process, ssh, status, apply), and from its last host's end to
    # its step's end (the follow stream's end, the process's exit, the commit).
    steps = step_times(coordinator, rollout)
    start, tail = [], []
    for b, batch in enumerate(batches):
        running, ended = steps["batch-%d" % (b + 1)]
        start.append((min(runs[h][0] for h in batch) - running) / 1000.0)
        tail.append((ended - max(runs[h][1] for h in batch)) / 1000.0)
    verdict = steps["verdict"]
    return {"wall_s": wall, "floor_s": floor, "batches": len(batches),
            "host_run_s": statistics.median(own.values()),
            "batch_start_s": statistics.median(start), "batch_tail_s": statistics.median(tail),
            "verdict_s": (verdict[1] - verdict[0]) / 1000.0}


def one_ansible(fleet, args):
    inventory = write(os.path.join(fleet.dir, "ansible-hosts.ini"),
                      "[fleet]\n" + "".join(
                          "%s ansible_host=%s ansible_user=root\n" % (h.name, h.address)
                          for h in fleet.hosts)
                      + "[fleet:vars]\nansible_python_interpreter=/usr/bin/python3\n"
                      "ansible_ssh_common_args='-F %s'\n" % fleet.ssh_config)
    playbook = write(os.path.join(fleet.dir, "playbook.yml"),
                     playbook_text(args.steps, args.step_seconds, args.serial))
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORKS=str(args.serial), ANSIBLE_LOCAL_TEMP=os.path.join(fleet.dir, "at"),
               ANSIBLE_SSH_CONTROL_PATH_DIR=os.path.join(fleet.dir, "acp"))
    started = time.monotonic()
    cp = subprocess.run(["ansible-playbook", "-i", inventory, playbook], env=env,
                        capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    if cp.returncode != 0:
        raise SystemExit("ansible-playbook failed:\n" + cp.stdout[-4000:] + cp.stderr[-4000:])
    return {"wall_s": wall}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=20)
    p.add_argument("--serial", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--step-seconds", default="0.2")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()
    have_ansible = subprocess.run(["sh", "-c", "command -v ansible-playbook"],
                                  capture_output=True).returncode == 0
    if not have_ansible:
        print("ansible-playbook is not installed (apt-get install ansible-core): "
              "deployctl only")
    fleet = fleet_hosts.Fleet(args.hosts)
    results = {"rollout": [], "ansible": [], "load": []}
    try:
        fleet.up()
        coordinator = fleet.coordinator()
        coordinator.start()
        for i in range(args.runs):
            results["load"].append(os.getloadavg()[0])
            r = one_rollout(fleet, coordinator, args, i)
            results["rollout"].append(r)
            line = ("run %d: rollout %.1fs, floor %.1fs (%d batches; a host's own run %.2fs; "
                    "a batch's start %.2fs, tail %.2fs; verdict %.2fs)"
                    % (i + 1, r["wall_s"], r["floor_s"], r["batches"], r["host_run_s"],
                       r["batch_start_s"], r["batch_tail_s"], r["verdict_s"]))
            if have_ansible:
                a = one_ansible(fleet, args)
                results["ansible"].append(a)
                line += ", ansible-playbook %.1fs" % a["wall_s"]
            print(line + " (load %.1f)" % results["load"][-1], flush=True)
        coordinator.stop()
    finally:
        fleet.down()
    med = lambda key, rows: statistics.median(r[key] for r in rows)  # noqa: E731
    wall, floor = med("wall_s", results["rollout"]), med("floor_s", results["rollout"])
    batches = results["rollout"][0]["batches"]
    print("\n%d hosts, --serial %d (%d batches), %d steps of %ss; median of %d runs, load %.1f"
          % (args.hosts, args.serial, batches, args.steps, args.step_seconds, args.runs,
             statistics.median(results["load"])))
    print("rollout   %.1fs" % wall)
    print("floor     %.1fs   (rollout / floor = %.2fx)" % (floor, wall / floor))
    print("overhead  %.1fs   = %.2fs a batch, %.2fs a host" % (
        wall - floor, (wall - floor) / batches, (wall - floor) / args.hosts))
    print("          a batch's start %.2fs (its step → its first host's run), tail %.2fs "
          "(its last host's end → its step's end); the verdict %.2fs"
          % (med("batch_start_s", results["rollout"]), med("batch_tail_s", results["rollout"]),
             med("verdict_s", results["rollout"])))
    if results["ansible"]:
        ansible = med("wall_s", results["ansible"])
        print("ansible   %.1fs   (ansible / rollout = %.1fx)" % (ansible, ansible / wall))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
