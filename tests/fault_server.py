"""An HTTP/1.1 server written for the tests, for the faults nginx and rclone
cannot be asked to make. It serves a folder with byte ranges (206) on kept
connections, and the first part of a request's path picks a fault:

    /slow-MS/FILE    wait MS milliseconds before each answer (a slow server)
    /flaky-N/FILE    answer every N-th request 503 SlowDown (a busy S3)
    /busy-W-D/FILE   the first GET of each range: wait W ms, answer 503 SlowDown; a later GET of it:
                     send the headers at once, then wait D ms before the body (a retried request
                     whose answer is slow to start)
    /short/FILE      answer a range one 4 KiB block shorter than asked (a short body)
    /cut/FILE        promise the whole range, send half, and close (a dropped connection)
    /offrange/FILE   answer a range 206 with the range one 4 KiB block later, its Content-Range saying so
                     (a server that sends another range than asked)
    /moved/FILE      answer 301, Location: /plain/FILE (a redirect)
    /forbidden/FILE  answer 403 with no body (a plain HTTP server that refuses)
    /plain/FILE      no fault

Usage: python fault_server.py PORT FOLDER
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RANGE = re.compile(r"bytes=(\d+)-(\d+)")
FAULT = re.compile(r"/(slow-(\d+)|flaky-(\d+)|busy-(\d+)-(\d+)|short|cut|offrange|moved|forbidden|plain)(/.*)")
BLOCK = 4096


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept connections, as real servers keep them
    requests = 0
    lock = threading.Lock()
    refused: set[tuple[str, str]] = set()  # /busy-W-D/: (path, range) of the GETs answered 503 once

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:
        self.answer(body=False)

    def do_GET(self) -> None:
        self.answer(body=True)

    def answer(self, body: bool) -> None:
        with Handler.lock:
            Handler.requests += 1
            count = Handler.requests
        m = FAULT.fullmatch(self.path)
        path = os.path.join(self.server.folder, m.group(6).lstrip("/")) if m else ""
        if not m or not os.path.isfile(path):
            self.send_error(404)
            return
        fault = m.group(1)
        if fault in ("moved", "forbidden"):
            self.refuse(fault, m.group(6))
            return
        if m.group(2):
            time.sleep(int(m.group(2)) / 1000)
        if m.group(3) and body and count % int(m.group(3)) == 0:
            self.slow_down()
            return
        busy = fault.startswith("busy-") and body
        if busy:
            key = (self.path, self.headers.get("Range", ""))
            with Handler.lock:
                first_try = key not in Handler.refused
                Handler.refused.add(key)
            if first_try:
                time.sleep(int(m.group(4)) / 1000)
                self.slow_down()
                return
        size = os.path.getsize(path)
        asked = RANGE.fullmatch(self.headers.get("Range", ""))
        if not body or not asked:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if body:
                with open(path, "rb") as f:
                    self.wfile.write(f.read())
            return
        first, last = int(asked.group(1)), min(int(asked.group(2)), size - 1)
        if fault == "short" and last - first + 1 > BLOCK:
            last -= BLOCK
        if fault == "offrange":
            first, last = min(first + BLOCK, size - 1), min(last + BLOCK, size - 1)
        with open(path, "rb") as f:
            f.seek(first)
            data = f.read(last - first + 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if busy:  # the answer has begun (status and headers sent); its body comes later
            self.wfile.flush()
            time.sleep(int(m.group(5)) / 1000)
        if fault == "cut":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)

    def refuse(self, fault: str, rest: str) -> None:
        self.send_response(301 if fault == "moved" else 403)
        if fault == "moved":
            self.send_header("Location", f"/plain{rest}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def slow_down(self) -> None:
        message = b"<Error><Code>SlowDown</Code></Error>"
        self.send_response(503)
        self.send_header("Content-Length", str(len(message)))
        self.end_headers()
        self.wfile.write(message)


def main() -> None:
    port, folder = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.folder = folder
    server.serve_forever()


if __name__ == "__main__":
    main()
