"""Sessions of a stored cluster with and without the last answer as the warm start.

::

    python -m benchmarks.session_reuse [--families 950,850] [--nodes 8192] [--sessions 6]
                                       [--time-limit 1] [--changes 3]

For each family: a generated ``--nodes`` cluster is stored in a service worker
(:class:`solver.service.worker.Worker`, in this process); each session applies a small
delta through the worker (``--changes`` nodes change health) and solves the stored
problem twice with the same budget: *warm* (``solve(..., cache=)``: the previous
session's answer, translated and still valid, is the fallback and CP-SAT's warm start;
:mod:`solver.reuse`) and *cold* (no cache).  Per session it reports the CP-SAT model
build seconds and search seconds (summed over the large-neighbourhood steps, from the
engine's debug log; whole-batch models count as one step), the share of the budget
spent searching, and both objectives.
Session 1 has nothing to reuse.  Wall-clock figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from typing import Any

from benchmarks.generators import GenParams, generate_case
from solver.facade import solve
from solver.reuse import SolveCache
from solver.service.worker import DEFAULT_SOLVE, Worker


class _Steps(logging.Handler):
    """Collects the ``lns step`` and ``full model`` debug records of the CP-SAT engine."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.build = 0.0
        self.search = 0.0
        self.steps = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(("lns step", "full model")) and isinstance(record.args, tuple):
            build, search = record.args[1], record.args[3]
            assert isinstance(build, float) and isinstance(search, float)
            self.build += build
            self.search += search
            self.steps += 1


class _Pipe:
    def send(self, message: tuple[Any, ...]) -> None:
        pass


def _timed_solve(problem: Any, time_limit: float, cache: SolveCache | None
                 ) -> dict[str, Any]:
    steps = _Steps()
    engine_log = logging.getLogger("npu_place.cpsat")
    engine_log.addHandler(steps)
    level = engine_log.level
    engine_log.setLevel(logging.DEBUG)
    try:
        result = solve(problem, engine="auto", time_limit=time_limit, workers=1, seed=0,
                       cache=cache)
    finally:
        engine_log.setLevel(level)
        engine_log.removeHandler(steps)
    return {"objective": result.objective, "engine": result.engine,
            "build-s": round(steps.build, 3), "search-s": round(steps.search, 3),
            "search-share": round(steps.search / time_limit, 3), "lns-steps": steps.steps,
            "warm-start-reused": any("previous session" in n for n in result.notes)}


def measure(family: str, nodes: int, sessions: int, time_limit: float, changes: int,
            seed: int) -> dict[str, Any]:
    """Run the sessions of one family."""
    scenario = generate_case(GenParams(family, nodes=nodes, seed=seed, jobs=4)).scenario
    body = json.dumps(scenario.to_dict()).encode()
    worker = Worker(_Pipe(), DEFAULT_SOLVE)  # type: ignore[arg-type]
    worker.handle("put", 0, ("bench", body, 1))
    stored = worker.clusters.get("bench")
    assert stored is not None
    names = [n.name for n in scenario.nodes]
    rng = random.Random(seed)
    cache = SolveCache()
    rows = []
    for session in range(1, sessions + 1):
        if session > 1:
            delta = {"node-updates": [{"name": rng.choice(names),
                                       "health": rng.choice(["healthy", "subhealthy"])}
                                      for _ in range(changes)]}
            worker.handle("patch", session, ("bench", json.dumps(delta).encode()))
        problem = stored.snapshot.problem
        warm = _timed_solve(problem, time_limit, cache)
        cold = _timed_solve(problem, time_limit, None)
        rows.append({"session": session, "warm": warm, "cold": cold,
                     "warm-minus-cold": warm["objective"] - cold["objective"]})
    return {"family": family, "nodes": nodes, "time-limit": time_limit, "sessions": rows}


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.session_reuse",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--families", default="950,850")
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--time-limit", type=float, default=1.0, dest="time_limit")
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    out = [measure(f, args.nodes, args.sessions, args.time_limit, args.changes, args.seed)
           for f in args.families.split(",")]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
