"""CPU time of reading a large scenario file and of greedy on it (issue 37).

::

    python -m benchmarks.scale_load --generate DIR [--nodes 65536] [--seed 37] [--families ...]
    python -m benchmarks.scale_load FILE [FILE ...]

With ``--generate`` the 16-job batch of every family at ``--nodes`` nodes is generated
(:class:`benchmarks.generators.GenParams`, seed ``--seed``) and written to ``DIR`` as
``FAMILY-NODES-SEED.json``, then measured; otherwise the given files are.  Per file:
reading, validating and compiling it (:func:`solver.doors.load_problem`), best of 3; for
JSON files also ``greedy_plan`` and ``solve(engine="greedy")`` (greedy, the validator and
the objective), best and median of 5.  All figures are this process's CPU time
(``time.process_time``), which the machine's load changes far less than wall-clock time;
one JSON row per file is printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.generators import FAMILIES, GenParams, generate
from heuristics.greedy import greedy_plan
from models.io import save_scenario
from solver.doors import load_problem
from solver.facade import solve


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
    args = parser.parse_args(argv)
    paths = list(args.files)
    if args.generate is not None:
        families = [f for f in args.families.split(",") if f]
        paths += generate_files(args.generate, families, args.nodes, args.seed)
    if not paths:
        parser.error("give scenario files or --generate DIR")
    for path in paths:
        print(json.dumps(measure(path)), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
