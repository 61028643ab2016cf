"""Sessions of a stored cluster: cold, with the last answer, and with kept models too.

::

    python -m benchmarks.session_reuse [--families 950,850] [--nodes 8192] [--sessions 6]
                                       [--jobs 4] [--time-limit 1] [--changes 3]
                                       [--free-changes 0] [--deterministic-time D]

For each family: a generated ``--nodes`` cluster is stored in a service worker
(:class:`solver.service.worker.Worker`, in this process); each session applies a small
delta through the worker (``--changes`` nodes change health, ``--free-changes`` partly
used nodes change their free chips) and solves the stored problem three times with the
same budget, each variant with its own history:

* *cold*: no cache between sessions (a solve still keeps its own models for the steps it
  repeats within itself, :func:`solver.engine.solve_cpsat`);
* *answer*: ``solve(..., cache=)`` with model reuse off, also within a session (the
  previous session's answer, translated and still valid, is the fallback and CP-SAT's
  warm start; :mod:`solver.reuse`);
* *models*: the same, and the cluster's built CP-SAT models are kept and handed back when
  a build would give the same model (:mod:`solver.model.reuse`).

Per session and variant it reports the CP-SAT model build seconds and search seconds
(summed over the large-neighbourhood steps, from the engine's debug log; whole-batch
models count as one step; a kept model's "build" is its lookup), the share of the budget
spent searching, the steps, the objective, the models carried over from earlier sessions /
reused within the session / built, and the call's wall seconds.  The summary gives, per
variant, session 1 against the mean of the following sessions, and the ratios of the
*models* variant to the *answer* variant within this run (the machine may be shared).
Session 1 has nothing to reuse.  Wall-clock figures depend on the machine and its load;
``--deterministic-time`` bounds the searches by CP-SAT's deterministic time instead (the
budget then stays a safety net of ``max(--time-limit, 60)`` s).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import random
import sys
import time
from typing import Any

import numpy as np

from benchmarks.generators import GenParams, generate_case
from models.check import check
from models.compiled import Problem
from solver.facade import solve
from solver.reuse import SolveCache
from solver.service.messages import PatchCluster, PutCluster
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


def _timed_solve(problem: Any, time_limit: float, deterministic_time: float | None,
                 cache: SolveCache | None) -> dict[str, Any]:
    steps = _Steps()
    engine_log = logging.getLogger("npu_place.cpsat")
    engine_log.addHandler(steps)
    level = engine_log.level
    engine_log.setLevel(logging.DEBUG)
    started = time.perf_counter()
    try:
        result = solve(problem, engine="auto", time_limit=time_limit, workers=1, seed=0,
                       deterministic_time=deterministic_time, cache=cache)
    finally:
        wall = time.perf_counter() - started
        engine_log.setLevel(level)
        engine_log.removeHandler(steps)
    violations = check(problem, result.placement)
    assert not violations, violations[0]
    budget = time_limit if deterministic_time is None else deterministic_time
    row: dict[str, Any] = {"objective": result.objective, "engine": result.engine,
           "build-s": round(steps.build, 3), "search-s": round(steps.search, 3),
           "search-share": round(steps.search / budget, 3), "lns-steps": steps.steps,
           "wall-s": round(wall, 3),
           "warm-start-reused": any("previous session" in n for n in result.notes)}
    counts = result.models  # the solve's own count (None: CP-SAT did not run)
    row["models-carried"] = 0 if counts is None else counts.carried
    row["models-within"] = 0 if counts is None else counts.within
    row["models-built"] = 0 if counts is None else counts.built
    return row


def _delta(rng: random.Random, problem: Problem, changes: int, free_changes: int
           ) -> dict[str, Any]:
    names = problem.node_names
    updates: dict[str, dict[str, Any]] = {}
    for _ in range(changes):
        name = rng.choice(names)
        updates[name] = {"name": name, "health": rng.choice(["healthy", "subhealthy"])}
    partly = np.flatnonzero((problem.free > 0) & (problem.free < problem.npus)).tolist()
    for n in rng.sample(partly, min(free_changes, len(partly))):
        free = int(problem.free[n]) + rng.choice([-1, 1])
        free = min(max(free, 0), int(problem.npus[n]))
        updates.setdefault(names[n], {"name": names[n]})["free"] = free
    return {"node-updates": list(updates.values())}


VARIANTS = ("cold", "answer", "models")


def measure(family: str, nodes: int, sessions: int, time_limit: float, changes: int,
            seed: int, jobs: int = 4, free_changes: int = 0,
            deterministic_time: float | None = None) -> dict[str, Any]:
    """Run the sessions of one family."""
    importlib.import_module("solver.engine")  # OR-Tools' first import is not a session's
    scenario = generate_case(GenParams(family, nodes=nodes, seed=seed, jobs=jobs)).scenario
    body = json.dumps(scenario.to_dict()).encode()
    worker = Worker(_Pipe(), DEFAULT_SOLVE)  # type: ignore[arg-type]
    worker.handle(0, PutCluster("bench", body, 1))
    stored = worker.clusters.get("bench")
    assert stored is not None
    rng = random.Random(seed)
    caches: dict[str, SolveCache | None] = {"cold": None, "answer": SolveCache(),
                                            "models": SolveCache()}
    answer_only = caches["answer"]
    assert answer_only is not None
    answer_only.models.max_models = 0  # keeps nothing: answer-level reuse only
    limit = time_limit if deterministic_time is None else max(time_limit, 60.0)
    rows = []
    for session in range(1, sessions + 1):
        if session > 1:
            delta = _delta(rng, stored.snapshot.problem, changes, free_changes)
            worker.handle(session, PatchCluster("bench", json.dumps(delta).encode()))
        problem = stored.snapshot.problem
        row: dict[str, Any] = {"session": session}
        for variant in VARIANTS:
            row[variant] = _timed_solve(problem, limit, deterministic_time, caches[variant])
        row["models-minus-cold"] = row["models"]["objective"] - row["cold"]["objective"]
        rows.append(row)
    return {"family": family, "nodes": stored.snapshot.problem.num_nodes, "jobs": jobs,
            "time-limit": time_limit, "deterministic-time": deterministic_time,
            "sessions": rows, "summary": _summary(rows)}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    later = rows[1:]
    for variant in VARIANTS:
        out[variant] = {
            key: {"first": rows[0][variant][key],
                  "following-mean": _mean([r[variant][key] for r in later])}
            for key in ("build-s", "search-s", "search-share", "wall-s")}
    if later:
        def ratio(key: str) -> float | None:
            a = sum(r["models"][key] for r in later)
            b = sum(r["answer"][key] for r in later)
            return round(a / b, 3) if b else None
        out["following-models-over-answer"] = {key: ratio(key)
                                               for key in ("build-s", "search-s", "wall-s")}
        out["models-carried"] = sum(r["models"]["models-carried"] for r in later)
        out["models-built"] = sum(r["models"]["models-built"] for r in later)
        out["models-minus-cold"] = [r["models-minus-cold"] for r in rows]
        out["models-minus-answer"] = [r["models"]["objective"] - r["answer"]["objective"]
                                      for r in rows]
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.session_reuse",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--families", default="950,850")
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--time-limit", type=float, default=1.0, dest="time_limit")
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--free-changes", type=int, default=0, dest="free_changes")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--deterministic-time", type=float, default=None,
                        dest="deterministic_time")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    out = [measure(f, args.nodes, args.sessions, args.time_limit, args.changes, args.seed,
                   args.jobs, args.free_changes, args.deterministic_time)
           for f in args.families.split(",")]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
