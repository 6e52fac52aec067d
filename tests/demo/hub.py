#!/usr/bin/env python3
"""A local stand-in for a model hub, for the demo: serves the files under ROOT over HTTP at a
limited rate, with Range requests (so that a download can resume), and stalls once: the first
transfer of the file named by --stall-once stops sending halfway and holds the connection open
without a byte until the client goes away. That is how a real download hangs (a stuck mirror, a
dead TCP flow): no error, no progress. deployd's progress watch is what notices it.

Usage: hub.py --port PORT --root DIR [--rate BYTES_PER_S] [--stall-once RELPATH]
"""

import argparse
import http.server
import os
import re
import select
import sys
import threading
import time

CHUNK = 256 << 10
# A stalled transfer is held at most this long (the client normally goes away much sooner).
STALL_HOLD_S = 300


class Hub:
    def __init__(self, root, rate, stall_once):
        self.root = os.path.realpath(root)
        self.rate = rate
        self.stall_once = stall_once
        self.lock = threading.Lock()

    def take_stall(self, relpath):
        """True once, for the first transfer of the --stall-once file."""
        with self.lock:
            if self.stall_once and relpath == self.stall_once:
                self.stall_once = None
                return True
            return False


class Handler(http.server.BaseHTTPRequestHandler):
    hub = None  # set in main()

    def log_message(self, fmt, *args):
        sys.stderr.write("hub: %s\n" % (fmt % args))
        sys.stderr.flush()

    def do_GET(self):
        relpath = self.path.lstrip("/").split("?", 1)[0]
        path = os.path.realpath(os.path.join(self.hub.root, relpath))
        if not path.startswith(self.hub.root + os.sep) or not os.path.isfile(path):
            self.send_error(404)
            return
        size = os.path.getsize(path)
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if match and int(match.group(1)) < size:
            start = int(match.group(1))
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        stall_at = size // 2 if self.hub.take_stall(relpath) else None
        with open(path, "rb") as f:
            f.seek(start)
            self.send_body(f, start, size, stall_at, relpath)

    def send_body(self, f, position, size, stall_at, relpath):
        began = time.monotonic()
        sent = 0
        while position < size:
            if stall_at is not None and position >= stall_at:
                self.stall(relpath, position, size)
                return
            chunk = f.read(CHUNK)
            self.wfile.write(chunk)
            position += len(chunk)
            sent += len(chunk)
            # Paced to the rate: the demo's progress is visible, and the hub costs no CPU.
            ahead = sent / self.hub.rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)

    def stall(self, relpath, position, size):
        self.log_message("stalling %s at %.1fMiB of %.1fMiB (once): sending nothing more",
                         relpath, position / (1 << 20), size / (1 << 20))
        # The client going away (EOF or reset) makes the socket readable.
        select.select([self.connection], [], [], STALL_HOLD_S)
        self.close_connection = True


def parse_rate(text):
    units = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    match = re.fullmatch(r"(\d+)(KiB|MiB|GiB|)", text)
    if not match:
        raise argparse.ArgumentTypeError("a rate is bytes per second, e.g. 24MiB")
    return int(match.group(1)) * units[match.group(2)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--rate", type=parse_rate, default=parse_rate("24MiB"))
    parser.add_argument("--stall-once", help="a path under ROOT whose first transfer stalls")
    args = parser.parse_args()
    Handler.hub = Hub(args.root, args.rate, args.stall_once)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
