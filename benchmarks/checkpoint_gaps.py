"""The longest stretches of work between two cancellation checkpoints of a real solve.

The CP-SAT worker stops only at checkpoints (:mod:`solver.model.cancel`); a stretch
without one holds it past its deadline.  This script runs ``solve(engine="auto")`` under
a deterministic budget on generated batches and records, in the worker thread, the CPU
time (``time.thread_time``: work, not the wall clock, so it hardly depends on the load)
between consecutive checkpoints, CP-SAT's own search left out (it stops on request).
It prints, per batch, the stretches above ``--report-ms`` and where each ended.

Run it with ``python -m benchmarks.checkpoint_gaps --nodes 65536 --seed S``.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any, ClassVar

import solver.cpsat as cpsat
import solver.engine as engine
from benchmarks.generators import FAMILIES, GenParams, generate_case
from models.compiled import compile_scenario
from solver.facade import preload, solve
from solver.model.cancel import CancelToken


class GapToken(CancelToken):
    """A cancel token that records the worker's CPU time between its checks."""

    live: ClassVar[list[GapToken]] = []

    def __init__(self, deadline: float | None = None, report: float = 0.01) -> None:
        super().__init__(deadline)
        self.last: float | None = None
        self.report = report
        self.stretches: list[tuple[float, str]] = []
        GapToken.live.append(self)

    def check(self) -> None:
        now = time.thread_time()
        if self.last is not None and now - self.last > self.report:
            frames = [f for f in traceback.extract_stack()[:-1]
                      if "/solver/" in f.filename or "/models/" in f.filename]
            self.stretches.append((now - self.last, " < ".join(
                f"{f.name}:{f.lineno}" for f in reversed(frames[-5:]))))
        self.last = time.thread_time()
        super().check()

    def restart(self) -> None:
        """Start a new stretch (after CP-SAT's own search)."""
        self.last = time.thread_time()


def measure(family: str, nodes: int, seed: int, deterministic_time: float,
            report: float) -> list[tuple[float, str]]:
    """The stretches above ``report`` seconds of one solve, longest first."""
    problem = compile_scenario(generate_case(GenParams(family, nodes=nodes, seed=seed,
                                                       jobs=16)).scenario)
    GapToken.live.clear()
    solve(problem, engine="auto", time_limit=max(120.0, 60 * deterministic_time), seed=0,
          deterministic_time=deterministic_time)
    return sorted((s for t in GapToken.live for s in t.stretches), reverse=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=65536)
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--deterministic-time", type=float, default=0.5)
    parser.add_argument("--report-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    preload()
    report = args.report_ms / 1000

    def token(deadline: float | None = None) -> GapToken:
        return GapToken(deadline, report=report)

    # CP-SAT through the solver package (only the solver imports OR-Tools)
    solver_class = cpsat.cp_model.CpSolver
    solve_search = solver_class.solve

    def timed_solve(self: Any, *a: Any, **k: Any) -> Any:
        try:
            return solve_search(self, *a, **k)
        finally:
            for live in GapToken.live:
                live.restart()

    real_token = engine.CancelToken
    engine.CancelToken = token  # type: ignore[misc,assignment]
    solver_class.solve = timed_solve  # type: ignore[method-assign]
    try:
        for family in args.families.split(","):
            found = measure(family, args.nodes, args.seed, args.deterministic_time, report)
            worst = (f"{1000 * found[0][0]:.1f} ms" if found
                     else f"none above {args.report_ms:g} ms")
            print(f"{family} {args.nodes} nodes, seed {args.seed}: longest stretch {worst}; "
                  f"{len(found)} above {args.report_ms:g} ms", flush=True)
            for seconds, where in found[:5]:
                print(f"  {1000 * seconds:6.1f} ms  ending at {where}")
    finally:  # the process may go on solving (a test)
        engine.CancelToken = real_token  # type: ignore[misc]
        solver_class.solve = solve_search  # type: ignore[method-assign]
    return 0


if __name__ == "__main__":
    sys.exit(main())
