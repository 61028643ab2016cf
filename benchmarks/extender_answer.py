"""When ``onSessionOpen`` is answered, whatever the snapshot's size.

Starts ``npu-place serve --extender`` as a subprocess (loopback), posts Volcano snapshots
of real-size objects (:func:`benchmarks.kube_dump.synthetic`) of about the sizes asked,
and prints per session: the body's bytes, the status, the answer time seen by the client
and by the server (``/sessions`` "answered": the route's answer, "sent": its last byte
handed to the socket, both from the request's first byte), whether the plan
was ready, the server's CPU for the session and the load average::

    python -m benchmarks.extender_answer --mb 10 40 80 --sessions 2

A benchmark script, not a test: wall times depend on the machine's load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import httpx
import orjson

from benchmarks.extender_bench import extender_on_synthetic
from benchmarks.volcano_session import volcano_snapshot

#: Snapshot bytes per node of :func:`~benchmarks.kube_dump.synthetic` (61.2 MB / 1,024).
BYTES_PER_NODE = 59_700


def measure(megabytes: float, sessions: int, engine: str, timeout: float) -> list[dict[str, Any]]:
    """The sessions of one body size."""
    nodes = max(64, int(megabytes * 1e6 / BYTES_PER_NODE))
    out = []
    with (extender_on_synthetic(nodes, engine, timeout) as (cluster, server, url),
          httpx.Client(timeout=60) as client):
        for _ in range(sessions):
            body = orjson.dumps(volcano_snapshot(cluster))
            cpu0 = server.cpu()
            started = time.perf_counter()
            status = client.post(f"{url}/onSessionOpen", content=body).status_code
            wall = time.perf_counter() - started
            time.sleep(max(0.0, 8.0 - wall))  # the plan goes on: let it finish
            client.post(f"{url}/onSessionClose", content=b"{}")
            last = client.get(f"{url}/sessions").json()[-1]
            out.append({"nodes": nodes, "mb": round(len(body) / 1e6, 1),
                        "status": status, "client_answer_s": round(wall, 3),
                        "server_answer_s": round(last["timings"].get("answered", -1), 3),
                        "server_sent_s": round(last["timings"].get("sent", -1), 3),
                        "plan_ready_in_time": not last["counts"].get(
                            "answered-before-plan"),
                        "timings": {k: round(v, 3) for k, v in last["timings"].items()},
                        "error": last["error"],
                        "server_cpu_s": round(server.cpu() - cpu0, 2),
                        "load": [round(x, 1) for x in os.getloadavg()]})
            print(json.dumps(out[-1]), flush=True)
            cluster.now += 60
    summary = {"mb": out[-1]["mb"], "sessions": len(out)}
    for key in ("client_answer_s", "server_answer_s", "server_sent_s"):
        values = [o[key] for o in out]
        summary[key] = {"median": round(statistics.median(values), 3), "max": max(values)}
    print(json.dumps({"summary": summary}), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.extender_answer``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[10.0, 40.0, 80.0])
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--timeout", type=float, default=1.0, help="httpTimeout, seconds")
    args = parser.parse_args(argv)
    for size in args.mb:
        measure(size, args.sessions, args.engine, args.timeout)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
