#!/usr/bin/env python3
"""A stand-in for a model server (the shape of vLLM's OpenAI-compatible API) for the demo.

It checks and "loads" the safetensors model in --model (every shard the index names must be
there), which takes --loading seconds, during which the port refuses connections, as a real
server's does while weights load. Then it answers:
  GET  /health          200, empty body
  GET  /v1/models       {"object": "list", "data": [{"id": MODEL_DIR, ...}]}
  POST /v1/completions  {"model": MODEL_DIR, "choices": [{"text": ...}]}; with "stream": true
                        (also /v1/chat/completions) the answer streams at --tokens-per-s per
                        request (completion_stream.py), so that a benchmark measures that rate

--title sets the process title (argv[0]), as vLLM names its processes (VLLM::EngineCore);
--worker also starts a worker process with that title in the server's process group, which
exits when the server does, as vLLM's workers do.

Usage: model-server.py --port PORT --model DIR [--loading SECONDS] [--tokens-per-s N] [--title T]
                       [--worker T]
"""

import argparse
import http.server
import json
import os
import struct
import sys
import time

from completion_stream import stream_completion


def retitle(title):
    """Runs this script again with argv[0] = title (a no-op when that is done already)."""
    with open("/proc/self/cmdline", "rb") as f:
        argv0 = f.read().split(b"\0", 1)[0].decode()
    if argv0 != title:
        os.execv(os.readlink("/proc/self/exe"), [title] + sys.argv)


def start_worker(title, model):
    """A child with its own title that lives as long as the server: it waits for the end of a
    pipe whose write end only the server holds."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(write_end)
        os.set_inheritable(read_end, True)
        os.execv(os.readlink("/proc/self/exe"),
                 [title, os.path.abspath(__file__), "--worker-of", str(read_end), "--model", model])
    os.close(read_end)
    return write_end


def load(model):
    """The tensors of the model, from the shard headers; exits when a shard is missing."""
    try:
        with open(os.path.join(model, "model.safetensors.index.json")) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        tensors = 0
        for shard in shards:
            with open(os.path.join(model, shard), "rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                tensors += len([k for k in json.loads(f.read(length)) if k != "__metadata__"])
    except (OSError, ValueError, KeyError) as e:
        sys.exit("cannot load the model in %s: %s" % (model, e))
    return len(shards), tensors


class Handler(http.server.BaseHTTPRequestHandler):
    model = None
    tokens_per_s = 40.0

    def log_message(self, fmt, *args):
        sys.stderr.write("INFO: %s\n" % (fmt % args))
        sys.stderr.flush()

    def reply(self, code, body):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.reply(200, None)
        elif self.path == "/v1/models":
            self.reply(200, {"object": "list", "data": [
                {"id": self.model, "object": "model", "owned_by": "deployd-demo"}]})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self.reply(404, {"error": "not found"})
            return
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        text = " Hello from %s, deployed and verified by deployd." % os.path.basename(self.model)
        if request.get("stream"):
            stream_completion(self, request, self.model, text, self.tokens_per_s)
            return
        self.reply(200, {"object": "text_completion", "model": self.model,
                         "choices": [{"index": 0, "text": text,
                                      "prompt": request.get("prompt", "")}]})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int)
    parser.add_argument("--model", required=True)
    parser.add_argument("--loading", type=float, default=0)
    parser.add_argument("--tokens-per-s", type=float, default=40.0)
    parser.add_argument("--title")
    parser.add_argument("--worker")
    parser.add_argument("--worker-of", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_of is not None:
        os.read(args.worker_of, 1)  # returns at EOF: the server has exited
        return
    if args.title:
        retitle(args.title)
    if args.port is None:
        parser.error("--port is required")
    print("loading %s" % args.model, flush=True)
    shards, tensors = load(args.model)
    if args.worker:
        start_worker(args.worker, args.model)
    time.sleep(args.loading)
    Handler.model = args.model
    Handler.tokens_per_s = args.tokens_per_s
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print("loaded %d shards (%d tensors); serving on 127.0.0.1:%d" % (shards, tensors, args.port),
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
