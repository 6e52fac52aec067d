#!/usr/bin/env python3
"""Downloads a safetensors model from a hub URL into DEST, the way `hf download` does it: the
index first, then each shard it names, each written as NAME.incomplete and renamed when whole.
A partial file left by an earlier attempt is resumed with a Range request. Files already in
place are kept, so running it again finishes what is missing.

There is no read timeout on purpose: when the hub stops sending, this hangs, as real downloads
do; noticing that is the job of the step's `watch.progress`.

Usage: fetch-model.py URL DEST
"""

import json
import os
import sys
import urllib.request

INDEX = "model.safetensors.index.json"


def size(n):
    return "%.1fMiB" % (n / (1 << 20)) if n >= 1 << 20 else "%dB" % n


def fetch(url, dest, name):
    final = os.path.join(dest, name)
    if os.path.exists(final):
        print("%s: already here" % name, flush=True)
        return
    partial = final + ".incomplete"
    offset = os.path.getsize(partial) if os.path.exists(partial) else 0
    request = urllib.request.Request(url + "/" + name)
    if offset:
        request.add_header("Range", "bytes=%d-" % offset)
    with urllib.request.urlopen(request) as response:
        if offset and response.status != 206:
            offset = 0  # the hub ignored the Range: start over
        if offset:
            print("%s: resuming at %s" % (name, size(offset)), flush=True)
        with open(partial, "ab" if offset else "wb") as f:
            while chunk := response.read(1 << 20):
                f.write(chunk)
                f.flush()  # the bytes on disk are what deployd sees as progress
    os.rename(partial, final)
    print("%s: %s" % (name, size(os.path.getsize(final))), flush=True)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: fetch-model.py URL DEST")
    url, dest = sys.argv[1].rstrip("/"), sys.argv[2]
    os.makedirs(dest, exist_ok=True)
    print("fetching %s into %s" % (url, dest), flush=True)
    # The index first: until every shard it names is here, the directory is visibly incomplete.
    fetch(url, dest, INDEX)
    with open(os.path.join(dest, INDEX)) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    for shard in shards:
        fetch(url, dest, shard)
    print("%d shards in %s" % (len(shards), dest), flush=True)


if __name__ == "__main__":
    main()
