"""CPU time of reading a large scenario file and of greedy on it.

::

    python -m benchmarks.scale_load --generate DIR [--nodes 65536] [--seed 37] [--families ...]
    python -m benchmarks.scale_load FILE [FILE ...]
    python -m benchmarks.scale_load --generate DIR --nodes 32768 --peak-memory 10
    python -m benchmarks.scale_load --generate DIR --patch [--families 950,a3,multilevel]
    python -m benchmarks.scale_load --generate DIR --plan-latency 0.2,1,2 [--repeat 3]


With ``--generate`` the 16-job batch of every family at ``--nodes`` nodes is generated
(:class:`benchmarks.generators.GenParams`, seed ``--seed``) and written to ``DIR`` as
``FAMILY-NODES-SEED.json``, then measured; otherwise the given files are.  Per file:
reading, validating and compiling it (:func:`solver.doors.load_problem`), best of 3; for
JSON files also ``greedy_plan`` and ``solve(engine="greedy")`` (greedy, the validator and
the objective), best and median of 5.  All figures are this process's CPU time
(``time.process_time``), which the machine's load changes far less than wall-clock time;
one JSON row per file is printed.

With ``--patch`` each file is stored as a service cluster
(:class:`solver.service.state.Cluster`, the heap settled as the worker does after a
``PUT``: :func:`solver.service.worker.settle_heap`) and moved by :data:`PATCH_ROUNDS`
rounds of four deltas in turn (:func:`patch_deltas`: 16 nodes' ``health``; a job removed;
the same job submitted again; ``now`` one minute later with a ``bind`` cache event); per
kind the CPU seconds of ``Cluster.apply``, median and max, and the tiers paid.

With ``--plan-latency T1,T2,...`` a service is started in this process (uvicorn on a
loopback socket, one worker process, as ``npu-place serve`` runs it), each file is
``PUT`` as a stored cluster and planned (``POST /v1/clusters/NAME/plan``, engine ``auto``)
``--repeat`` times per time limit, after one warm-up plan: per call the client's wall
time from sending to the whole answer, the service's own ``X-Elapsed-Before-Send`` and
where the answer came from (``X-Plan-Source``: the full solve or its fallback).

With ``--peak-memory D`` each file is instead answered by ``solve(engine="auto",
deterministic_time=D)`` in a process of its own, which reports its peak resident memory
(``VmHWM``, else ``ru_maxrss``) after loading and after the answer, and the answer's objective.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.generators import FAMILIES, GenParams, generate
from heuristics.greedy import greedy_plan
from models.documents import read_bytes
from models.io import save_scenario
from models.scenario import Scenario
from solver.doors import load_problem
from solver.facade import solve
from solver.service.state import Cluster, ClusterDelta
from solver.service.worker import settle_heap


def _cpu(work: Callable[[], object], times: int) -> list[float]:
    """CPU seconds of ``times`` calls of ``work``."""
    out = []
    for _ in range(times):
        started = time.process_time()
        work()
        out.append(time.process_time() - started)
        gc.collect()
    return out


def measure(path: Path) -> dict[str, Any]:
    """The figures of one scenario file."""
    loads = _cpu(lambda: load_problem(path), 3)
    row: dict[str, Any] = {"file": path.name, "load-cpu": round(min(loads), 3)}
    if path.suffix == ".json":
        problem = load_problem(path)
        row["nodes"] = problem.num_nodes
        greedy_plan(problem)  # warm: imports and per-problem caches
        greedy = _cpu(lambda: greedy_plan(problem), 5)
        solved = _cpu(lambda: solve(problem, engine="greedy"), 5)
        row.update({"greedy-cpu": round(min(greedy), 3),
                    "greedy-cpu-median": round(statistics.median(greedy), 3),
                    "solve-greedy-cpu": round(min(solved), 3),
                    "solve-greedy-cpu-median": round(statistics.median(solved), 3)})
    return row


#: Rounds of the four PATCH deltas of :func:`patch_deltas` (40 deltas in all).
PATCH_ROUNDS = 10


def patch_deltas(scenario: Scenario, rounds: int = PATCH_ROUNDS, seed: int = 0
                 ) -> list[tuple[str, ClusterDelta]]:
    """The deltas of ``--patch``, in the order they are applied: ``(kind, delta)``.

    Per round: 16 random nodes' ``health``; a job removed; that job submitted again;
    ``now`` moved one minute on with a ``bind`` of a random rank of a random job's owner
    to a random node (an entry added or overwritten: the cache grows over the rounds).
    """
    rng = random.Random(seed)
    names = [n.name for n in scenario.nodes if n.vnpu is None]
    jobs = list(scenario.jobs)
    now = scenario.now or 0
    out: list[tuple[str, ClusterDelta]] = []
    for _ in range(rounds):
        health = [{"name": name, "health": rng.choice(["healthy", "subhealthy"])}
                  for name in rng.sample(names, 16)]
        out.append(("health-16", ClusterDelta.model_validate({"node-updates": health})))
        job = rng.choice(jobs)
        out.append(("job-removed", ClusterDelta.model_validate({"jobs-removed": [job.name]})))
        out.append(("job-submitted", ClusterDelta(jobs_submitted=[job])))
        owner = rng.choice(jobs).owner_uid or "owner-0"
        now += 60
        out.append(("now-bind", ClusterDelta.model_validate({"now": now, "cache-events": [
            {"event": "bind", "owner-uid": owner, "rank": rng.randrange(8),
             "node": rng.choice(names)}]})))
    return out


def measure_patch(path: Path) -> dict[str, Any]:
    """CPU seconds of ``Cluster.apply`` per delta kind on the stored cluster of ``path``."""
    problem = load_problem(path)
    deltas = patch_deltas(problem.scenario)
    cluster = Cluster(path.stem, problem)
    del problem
    settle_heap()
    cpu: dict[str, list[float]] = {}
    tiers: dict[str, set[str]] = {}
    for kind, delta in deltas:
        started = time.process_time()
        cluster.apply(delta)
        cpu.setdefault(kind, []).append(time.process_time() - started)
        tiers.setdefault(kind, set()).add(cluster.last_update)
    gc.unfreeze()
    return {"file": path.name, "nodes": cluster.snapshot.problem.num_nodes,
            "cache-entries": len(cluster.snapshot.problem.scenario.affinity_cache.entries),
            **{kind: {"median": round(statistics.median(times), 4),
                      "max": round(max(times), 4), "tiers": sorted(tiers[kind])}
               for kind, times in cpu.items()}}


#: Seconds between two plan calls of ``--plan-latency`` (a daemon plans about once a
#: second; a call right after another finds the worker still finishing the last solve).
PLAN_SPACING = 1.0


def plan_latency(paths: Sequence[Path], limits: Sequence[float], repeat: int
                 ) -> Iterator[dict[str, Any]]:
    """Per file, per time limit, per repetition: the stored cluster's plan call timed."""
    import httpx

    from solver.service.app import ServiceConfig
    from solver.service.client import PlanClient, ServiceError
    from solver.service.server import build_server, listen_socket

    config = ServiceConfig(port=0, workers=1, warmup=True, max_body_mb=256.0)
    sock = listen_socket("127.0.0.1", 0)
    server = build_server(config, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    client = PlanClient(base, timeout=600.0)
    try:
        while not client.readyz():
            time.sleep(0.1)
        for path in paths:
            name = path.stem.replace(".", "-")
            client.request("PUT", f"/v1/clusters/{name}", content=read_bytes(path),
                           headers={"Content-Type": "application/json"})
            put_at = time.perf_counter()
            while True:  # warm: this cluster's first solve, once the worker is free
                try:
                    client.plan_cluster(name, time_limit=1.0)
                    break
                except ServiceError as exc:  # busy (the PUT's compaction: see pool.py)
                    if exc.status != 503:
                        raise
                    time.sleep(exc.retry_after or 0.5)
            busy_after_put = time.perf_counter() - put_at
            for limit in limits:
                for _ in range(repeat):
                    time.sleep(PLAN_SPACING)  # a daemon's pace: the last solve has ended
                    started = time.perf_counter()
                    try:
                        response = client.request(
                            "POST", f"/v1/clusters/{name}/plan",
                            params={"engine": "auto", "time-limit": limit})
                    except ServiceError as exc:
                        yield {"file": path.name, "time-limit": limit,
                               "wall": round(time.perf_counter() - started, 4),
                               "refused": f"{exc.status} {exc.error}"}
                        continue
                    wall = time.perf_counter() - started
                    yield {"file": path.name, "time-limit": limit,
                           "wall": round(wall, 4), "over": round(wall - limit, 4),
                           "elapsed-before-send": float(
                               response.headers.get("X-Elapsed-Before-Send", "nan")),
                           "source": response.headers.get("X-Plan-Source"),
                           "engine": response.json().get("engine"),
                           "load": round(os.getloadavg()[0], 2),
                           "warm-after-put": round(busy_after_put, 2)}
            client.delete_cluster(name)
    except httpx.HTTPError as exc:  # pragma: no cover - a benchmark's report
        raise SystemExit(f"the service failed: {exc}") from None
    finally:
        client.close()
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def _peak_mb() -> float:
    """This process's peak resident memory in MB.

    Linux's ``VmHWM`` (``/proc/self/status``) where it exists: ``ru_maxrss`` of a process
    started by another carries the parent's peak at the fork over the ``exec``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def peak_memory(path: Path, deterministic_time: float) -> dict[str, Any]:
    """Load ``path`` and answer it with ``auto`` under ``deterministic_time``, in this
    process; its peak resident memory after each step."""
    started = time.perf_counter()
    problem = load_problem(path)
    row: dict[str, Any] = {"file": path.name, "nodes": problem.num_nodes,
                           "deterministic-time": deterministic_time,
                           "peak-mb-loaded": _peak_mb()}
    result = solve(problem, engine="auto", deterministic_time=deterministic_time,
                   time_limit=3600.0)
    row.update({"peak-mb-solved": _peak_mb(), "engine": result.engine,
                "objective": result.objective, "status": str(result.status),
                "greedy-objective": result.greedy_objective,
                "wall-s": round(time.perf_counter() - started, 1),
                "cpu-s": round(time.process_time(), 1)})
    return row


def peak_memory_apart(path: Path, deterministic_time: float) -> dict[str, Any]:
    """:func:`peak_memory` in a fresh process (so that each file has its own peak)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale_load", str(path), "--peak-memory",
         str(deterministic_time), "--in-process"],
        check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def generate_files(folder: Path, families: Sequence[str], nodes: int, seed: int
                   ) -> list[Path]:
    """Write the 16-job batch of every family to ``folder``; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for family in families:
        path = folder / f"{family}-{nodes}-{seed}.json"
        save_scenario(generate(GenParams(family, nodes=nodes, seed=seed, jobs=16)), path)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.scale_load``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_load",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE")
    parser.add_argument("--generate", type=Path, metavar="DIR",
                        help="generate the batches into DIR and measure them")
    parser.add_argument("--nodes", type=int, default=65536)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--peak-memory", type=float, metavar="D",
                        help="peak memory of auto under deterministic time D, per file")
    parser.add_argument("--patch", action="store_true",
                        help="CPU time of Cluster.apply per delta kind, per file")
    parser.add_argument("--plan-latency", metavar="T1,T2,...",
                        help="wall time of a stored cluster's plan call per time limit")
    parser.add_argument("--repeat", type=int, default=3,
                        help="plan calls per time limit (--plan-latency)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = list(args.files)
    if args.generate is not None:
        families = [f for f in args.families.split(",") if f]
        paths += generate_files(args.generate, families, args.nodes, args.seed)
    if not paths:
        parser.error("give scenario files or --generate DIR")
    if args.plan_latency:
        limits = [float(t) for t in args.plan_latency.split(",") if t]
        for row in plan_latency(paths, limits, args.repeat):
            print(json.dumps(row), flush=True)
        return 0
    for path in paths:
        if args.patch:
            row = measure_patch(path)
        elif args.peak_memory is None:
            row = measure(path)
        elif args.in_process:
            row = peak_memory(path, args.peak_memory)
        else:
            row = peak_memory_apart(path, args.peak_memory)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
