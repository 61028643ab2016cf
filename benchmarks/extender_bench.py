"""Measure the Volcano extender verbs against Volcano's default 1-s ``httpTimeout``.

Starts ``npu-place serve --extender`` as a subprocess on loopback (its CPU is read from
``/proc``), builds synthetic 850 clusters (:func:`benchmarks.kube_dump.synthetic`: super
pods of 64 nodes, about 70 % busy, every fifth job pending) and, per size:

* ``onSessionOpen``: the snapshot's bytes in Volcano's JSON shape, the answer's wall time
  seen by the caller, and the server's own parse / import / plan times and plan-thread
  CPU (``GET <prefix>/sessions``), over ``--sessions`` sessions (the cache kept across);
* ``prioritize``: body bytes with every node a candidate (``percentageNodesToFind`` 100)
  and the latency p50/p99 of ``--prioritize`` calls while 16 callers send ``predicate``
  calls without pause (Volcano's 16 predicate workers);
* ``predicate`` / ``allocateFunc``: body bytes and latency p50/p99 under the same load;
* CPU of the server process per session (``utime + stime`` over the session's calls);
* one full session of the allocate-action re-creation (benchmarks/volcano_session.py) at
  the smallest size: calls and bytes per verb.

Usage::

    python -m benchmarks.extender_bench --nodes 256 1024 4096 --out /tmp/ext.json

The machine's load (``os.getloadavg``) is printed beside every wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.kube_dump import synthetic
from benchmarks.volcano_session import (
    STATUS,
    AscendStandIn,
    VolcanoCluster,
    run_session,
    task_info,
    volcano_snapshot,
)

_SEP = (",", ":")
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


class Server:
    """``npu-place serve --extender`` in a subprocess."""

    def __init__(self, devices: Path, engine: str, timeout: float) -> None:
        self.port = _free_port()
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - open while the server runs
            prefix="extender-bench-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "solver.cli", "serve", "--port", str(self.port),
             "--extender", "--extender-configmaps", str(devices), "--extender-engine", engine,
             "--extender-http-timeout", str(timeout), "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=self.log)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    time.sleep(3.0)  # the engines' imports (preloaded in the plan thread)
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the server did not start")

    def cpu(self) -> float:
        """CPU seconds of the server process so far."""
        return _cpu_seconds(self.process.pid)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then wait)."""
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _load_calls(client: httpx.Client, url: str, body: bytes, stop: threading.Event,
                seconds: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        client.post(f"{url}/predicate", content=body)
        seconds.append(time.perf_counter() - started)


@contextmanager
def extender_on_synthetic(nodes: int, engine: str, timeout: float
                          ) -> Iterator[tuple[VolcanoCluster, Server, str]]:
    """A generated cluster of ``nodes`` nodes, its device records in a temporary folder,
    and a ``serve --extender`` reading them: ``(cluster, server, extender URL)``; the
    server is stopped and the folder removed on exit."""
    builder = synthetic(nodes, mode="device-plugin")
    cluster = VolcanoCluster(builder, builder.now)
    with tempfile.TemporaryDirectory() as folder:
        cluster.write_device_dump(Path(folder))
        server = Server(Path(folder), engine, timeout)
        try:
            yield cluster, server, f"{server.url}/volcano"
        finally:
            server.stop()


def measure(nodes: int, sessions: int, prioritize_calls: int, engine: str,
            timeout: float) -> dict[str, Any]:
    """The figures of one cluster size."""
    out: dict[str, Any] = {"nodes": nodes, "load": os.getloadavg()}
    with (extender_on_synthetic(nodes, engine, timeout) as (cluster, server, url),
          httpx.Client(timeout=60) as client):
        opens = []
        for _ in range(sessions):
            snapshot = volcano_snapshot(cluster)
            body = json.dumps(snapshot, separators=_SEP).encode()
            cpu0 = server.cpu()
            started = time.perf_counter()
            status = client.post(f"{url}/onSessionOpen", content=body).status_code
            wall = time.perf_counter() - started
            time.sleep(max(0.0, timeout - wall) + 0.5)  # a late plan finishes
            client.post(f"{url}/onSessionClose", content=b"{}")
            history = client.get(f"{url}/sessions").json()
            last = history[-1]
            opens.append({"status": status, "bytes": len(body), "wall": wall,
                          "server": last["timings"], "counts": last["counts"],
                          "engine": last["engine"], "error": last["error"],
                          "cpu_process": server.cpu() - cpu0})
            cluster.now += 60
        out["onSessionOpen"] = opens
        # the per-task verbs under 16 predicate callers, in a session of their own
        snapshot = volcano_snapshot(cluster)
        client.post(f"{url}/onSessionOpen",
                    content=json.dumps(snapshot, separators=_SEP).encode())
        time.sleep(timeout + 0.5)
        job, pod = next((j, p) for j, p in _pending_pods(cluster))
        task = task_info(pod, job, STATUS["Pending"])
        node_infos = list(snapshot["Nodes"].values())
        predicate_body = json.dumps({"task": task, "node": node_infos[0]},
                                    separators=_SEP).encode()
        prioritize_body = json.dumps({"task": task, "nodes": node_infos},
                                     separators=_SEP).encode()
        allocate_body = json.dumps({"task": task_info(
            pod, job, STATUS["Allocated"], node_infos[0]["Name"])},
            separators=_SEP).encode()
        del snapshot, node_infos
        stop = threading.Event()
        predicate_seconds: list[float] = []
        loaders = [threading.Thread(target=_load_calls, args=(
            httpx.Client(timeout=60), url, predicate_body, stop, predicate_seconds))
            for _ in range(16)]
        for thread in loaders:
            thread.start()
        cpu0 = server.cpu()
        prioritize_seconds = []
        answers = set()
        for _ in range(prioritize_calls):
            started = time.perf_counter()
            answer = client.post(f"{url}/prioritize", content=prioritize_body)
            prioritize_seconds.append(time.perf_counter() - started)
            answers.add(json.dumps(answer.json().get("nodeScore"))
                        if answer.status_code == 200 else str(answer.status_code))
        allocate_seconds = []
        for _ in range(20):
            started = time.perf_counter()
            client.post(f"{url}/allocateFunc", content=allocate_body)
            allocate_seconds.append(time.perf_counter() - started)
        stop.set()
        for thread in loaders:
            thread.join()
        out["load_after"] = os.getloadavg()
        out["verbs"] = {
            "prioritize": {"bytes": len(prioritize_body), "calls": prioritize_calls,
                           "p50": _percentile(prioritize_seconds, 0.5),
                           "p99": _percentile(prioritize_seconds, 0.99),
                           "answers": sorted(answers)[:3]},
            "predicate": {"bytes": len(predicate_body), "calls": len(predicate_seconds),
                          "p50": _percentile(predicate_seconds, 0.5),
                          "p99": _percentile(predicate_seconds, 0.99)},
            "allocateFunc": {"bytes": len(allocate_body),
                             "p50": _percentile(allocate_seconds, 0.5),
                             "p99": _percentile(allocate_seconds, 0.99)},
            "server_cpu_during_load": server.cpu() - cpu0,
        }
    return out


def _pending_pods(cluster: VolcanoCluster) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for pod in cluster.pods:
        group = pod["metadata"]["annotations"].get("scheduling.k8s.io/group-name")
        if group and not pod["spec"].get("nodeName"):
            out.append((f"{pod['metadata']['namespace']}/{group}", pod))
    return out


def cpu_profile(nodes: int, engine: str, sessions: int, calls: int) -> dict[str, Any]:
    """The extender's own CPU per verb, in this process without HTTP (``thread_time``):
    what a session costs on an idle core, whatever the machine's load."""
    from solver.service.extender import ExtenderConfig, ExtenderCore

    builder = synthetic(nodes, mode="device-plugin")
    cluster = VolcanoCluster(builder, builder.now)
    out: dict[str, Any] = {"nodes": nodes, "load": os.getloadavg(), "sessions": []}
    with tempfile.TemporaryDirectory() as folder:
        cluster.write_device_dump(Path(folder))
        core = ExtenderCore(ExtenderConfig(configmaps=(folder,), engine=engine,
                                           http_timeout=1.0), clock=lambda: cluster.now)
        from solver.facade import preload

        preload(engine)
        snapshot = volcano_snapshot(cluster)
        body = json.dumps(snapshot, separators=_SEP).encode()
        for _ in range(sessions):
            session = core.begin()
            started = time.thread_time()
            core.open_session(session, body, time.monotonic() + 30)
            cpu = time.thread_time() - started
            out["sessions"].append({"cpu": cpu,
                                    **{k: v for k, v in session.timings.items()
                                       if k.endswith("_cpu")},
                                    "engine": session.engine, "error": session.error,
                                    "steered": session.counts.get("steered-jobs", 0)})
            cluster.now += 60
        job, pod = _pending_pods(cluster)[0]
        task = task_info(pod, job, STATUS["Pending"])
        nodes_info = list(snapshot["Nodes"].values())
        prioritize_body = json.dumps({"task": task, "nodes": nodes_info},
                                     separators=_SEP).encode()
        predicate_body = json.dumps({"task": task, "node": nodes_info[0]},
                                    separators=_SEP).encode()
        del snapshot, nodes_info
        import orjson

        started = time.thread_time()
        for _ in range(calls):
            answer = core.prioritize_raw(prioritize_body)
        out["prioritize_cpu"] = (time.thread_time() - started) / calls
        out["prioritize_answer"] = answer.decode()
        started = time.thread_time()
        for _ in range(max(1, calls // 5)):
            core.prioritize(orjson.loads(prioritize_body))
        out["prioritize_full_parse_cpu"] = (time.thread_time() - started) / max(1, calls // 5)
        started = time.thread_time()
        for _ in range(calls * 20):
            core.predicate(orjson.loads(predicate_body))
        out["predicate_cpu"] = (time.thread_time() - started) / (calls * 20)
        out["bytes"] = {"onSessionOpen": len(body), "prioritize": len(prioritize_body),
                        "predicate": len(predicate_body)}
        core.close()
        # the service's own view: the stored cluster's scenario instead of the snapshot
        # (the worker's dump of it is not counted: another process)
        scenario = json.dumps(cluster.scenario().to_dict(), separators=_SEP).encode()
        view = ExtenderCore(ExtenderConfig(cluster="c", engine=engine, http_timeout=1.0),
                            clock=lambda: cluster.now)
        out["own_view"] = {"bytes": len(scenario), "sessions": []}
        for _ in range(sessions):
            session = view.begin()
            started = time.thread_time()
            view.open_session(session, scenario, time.monotonic() + 30)
            out["own_view"]["sessions"].append({
                "cpu": time.thread_time() - started,
                **{k: v for k, v in session.timings.items() if k.endswith("_cpu")},
                "engine": session.engine, "error": session.error,
                "steered": session.counts.get("steered-jobs", 0)})
        view.close()
    return out


def hostile_profile() -> dict[str, Any]:
    """CPU (``thread_time``) and peak memory the extender spends refusing hostile
    snapshots, in this process: a 100,000-deep nesting, 64 MB of junk that is not JSON,
    an object of the wrong shape holding 64 MB of strings, 70,000 nodes, and 16 / 64 MB
    of empty objects (the densest JSON: one value per 3 bytes)."""
    import resource

    from solver.service.extender import ExtenderConfig, ExtenderCore, SnapshotError

    core = ExtenderCore(ExtenderConfig())
    cases = {
        "deep nesting (200 kB)": b"[" * 100_000 + b"]" * 100_000,
        "not JSON (64 MB)": b'{"Jobs": ' + b"x" * (64 << 20),
        "wrong shape (64 MB of strings)": json.dumps(
            {"Queues": ["x" * 1024] * (64 << 10)}).encode(),
        "70,000 nodes": json.dumps({"Nodes": {f"n{i}": {} for i in range(70_000)}}).encode(),
        "16 MB of empty objects": b'{"Queues":[' + b"{}," * ((16 << 20) // 3) + b"{}]}",
        "64 MB of empty objects": b'{"Queues":[' + b"{}," * ((64 << 20) // 3) + b"{}]}",
    }
    out: dict[str, Any] = {"load": os.getloadavg()}
    for name, body in cases.items():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.thread_time()
        try:
            core.open_session(core.begin(), body, time.monotonic() + 30)
            status = 200
        except SnapshotError as exc:
            status = exc.status
        out[name] = {"status": status, "cpu": time.thread_time() - started,
                     "bytes": len(body),
                     "maxrss_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                          - before) / 1024}
    core.close()
    return out


def full_session(nodes: int, engine: str, timeout: float) -> dict[str, Any]:
    """One session of the allocate-action re-creation: calls and bytes per verb."""
    builder = synthetic(nodes, mode="device-plugin")
    cluster = VolcanoCluster(builder, builder.now)
    with tempfile.TemporaryDirectory() as folder:
        cluster.write_device_dump(Path(folder))
        server = Server(Path(folder), engine, timeout)
        try:
            with httpx.Client(timeout=60) as client:
                cpu0 = server.cpu()
                report = run_session(client, f"{server.url}/volcano", cluster, AscendStandIn())
                cpu = server.cpu() - cpu0
        finally:
            server.stop()
    return {"nodes": nodes, "calls": report.calls, "bytes": report.bytes_sent,
            "p50": {v: statistics.median(s) for v, s in report.seconds.items()},
            "p99": {v: _percentile(s, 0.99) for v, s in report.seconds.items()},
            "bound_jobs": len(report.bindings), "discarded": len(report.discarded),
            "server_cpu": cpu, "load": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.extender_bench``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--prioritize", type=int, default=50)
    parser.add_argument("--engine", default="auto", choices=("auto", "greedy", "cpsat"))
    parser.add_argument("--http-timeout", type=float, default=1.0, dest="timeout")
    parser.add_argument("--full-session", type=int, default=256, dest="full_session",
                        help="nodes of the one full allocate-action session (0: none)")
    parser.add_argument("--cpu-only", action="store_true", dest="cpu_only",
                        help="only the in-process CPU profile (no server, no HTTP)")
    parser.add_argument("--hostile", action="store_true",
                        help="only the cost of refusing hostile snapshots (in-process)")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"sizes": [], "load_start": os.getloadavg(),
                               "cpus": os.cpu_count()}
    if args.hostile:
        print(json.dumps(hostile_profile(), indent=1), flush=True)
        return 0
    if args.cpu_only:
        results["cpu"] = []
        for nodes in args.nodes:
            figures = cpu_profile(nodes, args.engine, args.sessions, args.prioritize)
            results["cpu"].append(figures)
            print(json.dumps(figures), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))
        return 0
    for nodes in args.nodes:
        figures = measure(nodes, args.sessions, args.prioritize, args.engine, args.timeout)
        results["sizes"].append(figures)
        print(json.dumps(figures), flush=True)
    if args.full_session:
        results["full_session"] = full_session(args.full_session, args.engine, args.timeout)
        print(json.dumps(results["full_session"]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
