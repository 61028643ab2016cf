"""Greedy work per service plan: how often and how long greedy runs in one plan.

::

    python -m benchmarks.plan_greedy [--family 950] [--nodes 8192] [--plans 5] [--time-limit 1]

Runs the service's worker handler (:class:`solver.service.worker.Worker`) in this process
on a stored cluster of ``--nodes`` nodes, ``--plans`` times with engine ``auto``, with
greedy (``solver.facade.greedy_plan``, which every facade call runs) wrapped to count its
calls and time them.  Reports per plan: greedy calls, greedy seconds, the time from the
plan's start to its first (fallback) answer, and the answer's source and objective.
Wall-clock figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import solver.facade as facade
from benchmarks.generators import GenParams, generate_case
from solver.service.messages import FallbackAnswer, FinalAnswer, PlanRequest, PutCluster
from solver.service.worker import DEFAULT_SOLVE, Worker


class _Recorder:
    """Stands in for the worker's pipe: keeps every answer with its time."""

    def __init__(self) -> None:
        self.messages: list[tuple[float, Any]] = []

    def send(self, message: Any) -> None:
        self.messages.append((time.monotonic(), message))


def measure(family: str, nodes: int, plans: int, time_limit: float, seed: int
            ) -> dict[str, Any]:
    """Run the plans; return the per-plan figures and their medians."""
    scenario = generate_case(GenParams(family, nodes=nodes, seed=seed, jobs=4)).scenario
    body = json.dumps(scenario.to_dict()).encode()
    recorder = _Recorder()
    worker = Worker(recorder, DEFAULT_SOLVE)  # type: ignore[arg-type]
    worker.handle(0, PutCluster("bench", body, 1))
    original = facade.greedy_plan
    calls: list[float] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            calls.append(time.perf_counter() - started)

    facade.greedy_plan = counted
    rows: list[dict[str, Any]] = []
    stored = worker.clusters.get("bench")
    assert stored is not None
    try:
        worker.solve(stored.snapshot.problem, engine="greedy")  # warm
        for rid in range(1, plans + 1):
            calls.clear()
            recorder.messages.clear()
            started = time.monotonic()
            worker.plan(rid, PlanRequest(None, "bench", "auto", started + time_limit, 0,
                                         None))
            first = next(t for t, m in recorder.messages if isinstance(m, FallbackAnswer))
            final = next(m for _, m in recorder.messages if isinstance(m, FinalAnswer))
            rows.append({"greedy-calls": len(calls),
                         "greedy-seconds": round(sum(calls), 4),
                         "first-answer-seconds": round(first - started, 4),
                         "final-objective": None if final.placement is None
                         else final.placement.get("objective")})
    finally:
        facade.greedy_plan = original
    return {"family": family, "nodes": len(scenario.nodes), "time-limit": time_limit,
            "plans": rows,
            "median-greedy-calls": statistics.median(int(r["greedy-calls"]) for r in rows),
            "median-greedy-seconds": round(statistics.median(float(r["greedy-seconds"])
                                                             for r in rows), 4),
            "median-first-answer-seconds": round(statistics.median(
                float(r["first-answer-seconds"]) for r in rows), 4)}


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plan_greedy",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--family", default="950")
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--plans", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=1.0, dest="time_limit")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.family, args.nodes, args.plans, args.time_limit,
                             args.seed), indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
