#!/usr/bin/env python3
"""Writes a tiny but real safetensors model for the demo: N shards of one F32 tensor each and a
model.safetensors.index.json whose weight_map names them, as a Hugging Face repository holds
them. deployd's `weights_complete` check reads exactly these headers.

Usage: make-model.py DIR [--shards N] [--shard-size BYTES]
"""

import argparse
import json
import os
import struct


def write_shard(path, tensor, data_bytes):
    header = {"__metadata__": {"format": "pt"},
              tensor: {"dtype": "F32", "shape": [data_bytes // 4], "data_offsets": [0, data_bytes]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(os.urandom(data_bytes))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard-size", type=int, default=16 << 20, help="tensor bytes per shard")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    weight_map = {}
    for i in range(1, args.shards + 1):
        name = "model-%05d-of-%05d.safetensors" % (i, args.shards)
        tensor = "model.layers.%d.weight" % (i - 1)
        write_shard(os.path.join(args.dir, name), tensor, args.shard_size - args.shard_size % 4)
        weight_map[tensor] = name
    index = {"metadata": {"total_size": args.shards * args.shard_size}, "weight_map": weight_map}
    with open(os.path.join(args.dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)


if __name__ == "__main__":
    main()
