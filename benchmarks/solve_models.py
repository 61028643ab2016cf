"""One stateless solve with and without its own model cache.

::

    python -m benchmarks.solve_models [--families 950,a3,multilevel,850] [--nodes 8192]
                                      [--jobs 4] [--deterministic-time 1] [--seed 1]

A solve without a stored cluster's cache (``POST /v1/plan``, the command line) keeps the
CP-SAT models it builds in a cache of its own for the length of the solve
(:func:`solver.engine.solve_cpsat`), so a large-neighbourhood step it repeats (a sweep
after the last improvement repeats the previous sweep) is handed back instead of built
again.  For each family this solves one generated batch twice under the same
deterministic budget: *rebuild* (a cache that keeps nothing: every step built, as before)
and *per-solve* (no cache given: the solve's own), and reports the models reused and
built, the build seconds summed over the steps (from the engine's debug log; a reused
model's "build" is its lookup), the wall seconds, the objective, and whether the two
placements are identical.  Build and wall seconds depend on the machine and its load;
the model counts, objectives and placements do not.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from benchmarks.generators import GenParams, generate_case
from benchmarks.session_reuse import _Steps
from models.check import check
from models.compiled import compile_scenario
from solver.facade import preload, solve
from solver.model.reuse import ModelCache
from solver.reuse import SolveCache


def _run(problem: Any, deterministic_time: float, keep_models: bool) -> tuple[dict[str, Any],
                                                                               Any]:
    steps = _Steps()
    engine_log = logging.getLogger("npu_place.cpsat")
    level = engine_log.level
    engine_log.addHandler(steps)
    engine_log.setLevel(logging.DEBUG)
    # rebuild: a cache that keeps nothing (its first session has no answer to reuse)
    cache = None if keep_models else SolveCache(models=ModelCache(max_models=0))
    started = time.perf_counter()
    try:
        result = solve(problem, engine="auto", time_limit=max(60.0, 30 * deterministic_time),
                       workers=1, seed=0, deterministic_time=deterministic_time, cache=cache)
    finally:
        wall = time.perf_counter() - started
        engine_log.setLevel(level)
        engine_log.removeHandler(steps)
    assert not check(problem, result.placement)
    counts = result.models
    row = {"objective": result.objective, "engine": result.engine,
           "models-reused": None if counts is None else counts.reused,
           "models-built": None if counts is None else counts.built,
           "steps": steps.steps, "build-s": round(steps.build, 3),
           "search-s": round(steps.search, 3), "wall-s": round(wall, 3)}
    return row, result


def measure(family: str, nodes: int, jobs: int, seed: int,
            deterministic_time: float) -> dict[str, Any]:
    """Both variants on one generated batch."""
    scenario = generate_case(GenParams(family, nodes=nodes, seed=seed, jobs=jobs)).scenario
    # a problem of its own per variant: nothing memoised by the first run helps the second
    rebuild, first = _run(compile_scenario(scenario), deterministic_time, keep_models=False)
    own, second = _run(compile_scenario(scenario), deterministic_time, keep_models=True)
    same = [None if n is None else n.tolist() for n in first.plan.nodes] == [
        None if n is None else n.tolist() for n in second.plan.nodes]
    return {"family": family, "nodes": nodes, "jobs": jobs, "rebuild": rebuild,
            "per-solve": own, "identical-placement": same}


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.solve_models",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--families", default="950,a3,multilevel,850")
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--deterministic-time", type=float, default=1.0,
                        dest="deterministic_time")
    parser.add_argument("--out", help="write the rows as JSON")
    args = parser.parse_args(argv)
    preload("auto")
    rows = []
    for family in args.families.split(","):
        row = measure(family, args.nodes, args.jobs, args.seed, args.deterministic_time)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
