"""Server CPU to receive one large POST body: uvicorn's h11 against httptools.

The extender's ``onSessionOpen`` body (61 MB at 1,024 real-size nodes) is read by the
event loop before the plan thread can parse it; this measures what reading alone costs the
server process (utime + stime from ``/proc``) with each HTTP implementation uvicorn can
use, on an app that only reads the body and answers ``{}``::

    python -m benchmarks.http_body --mb 61 --posts 5

A benchmark script, not a test (the load average is printed with the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx

from benchmarks.extender_bench import _cpu_seconds


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that reads the whole body and answers ``{}``."""
    if scope["type"] != "http":
        return
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    b"".join(chunks)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})


def measure(implementation: str, body: bytes, posts: int) -> dict[str, Any]:
    """Server CPU and client wall time per POST of ``body`` with one implementation."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "benchmarks.http_body:app", "--port", str(port),
         "--http", implementation, "--log-level", "warning"])
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(200):
            try:
                httpx.post(url, content=b"{}")
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        cpu, wall = [], []
        with httpx.Client(timeout=60) as client:
            for _ in range(posts):
                before, started = _cpu_seconds(server.pid), time.perf_counter()
                client.post(url, content=body)
                wall.append(round(time.perf_counter() - started, 3))
                cpu.append(round(_cpu_seconds(server.pid) - before, 3))
    finally:
        server.terminate()
        server.wait(30)
    return {"http": implementation, "mb": round(len(body) / 1e6, 1), "server_cpu_s": cpu,
            "client_wall_s": wall, "load": [round(x, 1) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.http_body``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=61.0)
    parser.add_argument("--posts", type=int, default=5)
    parser.add_argument("--http", nargs="+", default=["h11", "httptools"])
    args = parser.parse_args(argv)
    body = b'{"x":"' + b"a" * int(args.mb * 1e6) + b'"}'
    for implementation in args.http:
        print(json.dumps(measure(implementation, body, args.posts)), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
