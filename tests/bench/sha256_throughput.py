#!/usr/bin/env python3
"""How fast `weights_complete` with `sha256` hashes, through deployd's own path, beside OpenSSL.

deployd's path is the probe child the daemon starts for that check: `deployd --probe JSON`
with the check's keys, which lists the directory, reads every shard's header, then hashes the
files the check names and prints its outcome. The script times that process whole, against
`openssl dgst -sha256` over the same files:

  single    one 1 GiB shard (`--size`): the probe vs `openssl dgst -sha256 FILE`
  parallel  `--shards` shards of `--shard-size` each: the probe (which hashes several files at
            once) vs one `openssl dgst -sha256 F1 F2 …` (one file after another)

The files are read once before timing, so both read from the page cache: the figures are the
hashing, not the disk (a cold read is as fast as the disk, for both). Each figure is the median
of `--repeat` runs, the two programs alternating so that both see the same load.

    python3 tests/bench/sha256_throughput.py [--build-dir build] [--tmp /var/tmp] [--json F]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib

MiB = 1 << 20
GiB = 1 << 30


def write_shard(path, size):
    """A safetensors file of exactly `size` bytes (one U8 tensor), so that the probe's header
    check passes and it goes on to hash; the data is pseudo-random (a repeated random MiB)."""
    header = b'{"w":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}'
    # The data length depends on the header's, which depends on the data length's digits.
    data = size - 8 - len(header % (size, size))
    text = header % (data, data)
    assert 8 + len(text) + data == size, "size too small or at a digit boundary"
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        left = data
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def warm(paths):
    for path in paths:
        with open(path, "rb") as f:
            while f.read(8 * MiB):
                pass


def timed(argv):
    start = time.perf_counter()
    cp = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return time.perf_counter() - start, cp


def openssl_digests(paths):
    seconds, cp = timed(["openssl", "dgst", "-sha256"] + paths)
    if cp.returncode != 0:
        raise SystemExit("openssl dgst failed: " + cp.stdout)
    digests = {}
    for line in cp.stdout.splitlines():  # SHA2-256(PATH)= HEX
        name, _, hexdigest = line.rpartition("= ")
        digests[name[name.index("(") + 1:-1]] = hexdigest
    return seconds, digests


def probe(deployd, directory, digests):
    request = {"kind": "weights_complete", "path": directory,
               "sha256": {os.path.basename(p): d for p, d in digests.items()}}
    seconds, cp = timed([deployd, "--probe", json.dumps(request)])
    answer = json.loads(cp.stdout)
    if cp.returncode != 0 or not answer["passed"]:
        raise SystemExit("the probe failed: " + answer["summary"])
    return seconds


def compare(deployd, directory, paths, repeat):
    warm(paths)
    total = sum(os.path.getsize(p) for p in paths)
    _, digests = openssl_digests(paths)
    ours, theirs = [], []
    for _ in range(repeat):
        theirs.append(openssl_digests(paths)[0])
        ours.append(probe(deployd, directory, digests))
    o, t = benchlib.median(ours), benchlib.median(theirs)
    return {"files": len(paths), "bytes": total, "repeat": repeat,
            "probe_s": ours, "openssl_s": theirs,
            "probe_median_s": o, "openssl_median_s": t,
            "probe_mb_s": total / o / 1e6, "openssl_mb_s": total / t / 1e6,
            "ratio": o / t}


def report(name, r):
    print("%-8s %d file(s), %.0f MiB: probe %.2f s (%.0f MB/s), openssl dgst %.2f s (%.0f MB/s),"
          " probe/openssl %.2fx" % (name, r["files"], r["bytes"] / MiB, r["probe_median_s"],
                                    r["probe_mb_s"], r["openssl_median_s"], r["openssl_mb_s"],
                                    r["ratio"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir")
    ap.add_argument("--tmp", default="/var/tmp", help="where the shards are written")
    ap.add_argument("--size", type=int, default=1024, help="MiB of the single shard")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--shard-size", type=int, default=512, help="MiB of each parallel shard")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="also write every number to this file")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    deployd = benchlib.find_binary("deployd", "DEPLOYD_BIN", args.build_dir)
    if shutil.which("openssl") is None:
        raise SystemExit("openssl not found on PATH (Debian's openssl package)")

    work = tempfile.mkdtemp(prefix="deployd-bench-sha256-", dir=args.tmp)
    results = {"load_before": benchlib.load_average(), "cpus": len(os.sched_getaffinity(0)),
               "openssl": subprocess.run(["openssl", "version"], stdout=subprocess.PIPE,
                                         text=True).stdout.strip()}
    try:
        single = os.path.join(work, "single")
        os.mkdir(single)
        path = os.path.join(single, "model-00001-of-00001.safetensors")
        write_shard(path, args.size * MiB)
        results["single"] = compare(deployd, single, [path], args.repeat)
        report("single", results["single"])
        os.remove(path)

        several = os.path.join(work, "parallel")
        os.mkdir(several)
        paths = []
        for k in range(1, args.shards + 1):
            paths.append(os.path.join(several, "model-%05d-of-%05d.safetensors" % (k, args.shards)))
            write_shard(paths[-1], args.shard_size * MiB)
        results["parallel"] = compare(deployd, several, paths, args.repeat)
        report("parallel", results["parallel"])
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["load_after"] = benchlib.load_average()
    print("cpus %d, load before %s, after %s; %s" % (results["cpus"], results["load_before"],
                                                    results["load_after"], results["openssl"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
