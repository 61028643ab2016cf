"""Multilevel greedy: time per batch against a reference copy of ``heuristics/multilevel.py``.

For each seed, the 8,192-node (by default) multilevel batch of the anytime curve is
generated once; then, alternating, the reference module and the current one place every
job of the batch in queue order (``place_multilevel`` on the state the earlier jobs left),
each on a freshly compiled problem (as ``solve`` does: the tree indexes are built inside
the time).  Placements must be identical (the command fails otherwise); medians of wall
and CPU time are printed with their ratio, and the machine reference loop before and
after.

Usage::

    git show ab03e28:heuristics/multilevel.py > /tmp/multilevel_ref.py
    python -m benchmarks.multilevel_speed --reference /tmp/multilevel_ref.py --seeds 0,1,2,3
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from types import ModuleType

import heuristics.multilevel as current
from benchmarks.anytime import BATCH_JOBS
from benchmarks.generators import GenParams, generate
from heuristics.state import ClusterState
from models.compiled import Problem, compile_scenario
from models.scenario import Scenario


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("multilevel_reference", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot load reference module '{path}'")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _batch(module: ModuleType, problem: Problem) -> list[list[int] | None]:
    state = ClusterState.initial(problem)
    out: list[list[int] | None] = []
    for j in problem.queue:
        outcome = module.place_multilevel(problem, j, state)
        out.append(None if outcome.nodes is None else outcome.nodes.tolist())
        if outcome.nodes is not None:
            job = problem.jobs[j]
            state.commit(job.placed_nodes(outcome.nodes), job.npu_per_task)
    return out


def reference_loop() -> float:
    """The machine reference of the project's notes (idle machine ~0.30 s)."""
    started = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i
    return round(time.perf_counter() - started, 3)


def compare(scenario: Scenario, reference: ModuleType, reps: int) -> dict[str, float]:
    """Median wall and CPU milliseconds of both modules on one batch (alternating).

    Raises
    ------
    SystemExit
        When the two modules place a job differently.
    """
    times: dict[str, tuple[list[float], list[float]]] = {"ref": ([], []), "cur": ([], [])}
    answers: dict[str, list[list[int] | None]] = {}
    pairs = (("ref", reference), ("cur", current))
    for rep in range(reps):
        for name, module in pairs if rep % 2 == 0 else pairs[::-1]:
            problem = compile_scenario(scenario)
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            got = _batch(module, problem)
            times[name][0].append(time.perf_counter() - wall)
            times[name][1].append(time.process_time() - cpu)
            if answers.setdefault(name, got) != got:
                raise SystemExit(f"error: {name} answers differ between repetitions")
    if answers["ref"] != answers["cur"]:
        raise SystemExit("error: the current module places the batch differently")

    def median(values: list[float]) -> float:
        return 1000 * sorted(values)[len(values) // 2]

    return {f"{name}-{kind}": median(times[name][k])
            for name in times for k, kind in enumerate(("wall", "cpu"))}


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.multilevel_speed",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True,
                        help="path of a reference copy of heuristics/multilevel.py")
    parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated seeds")
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=8, help="runs per module and seed")
    args = parser.parse_args(argv)
    reference = _load(args.reference)
    print("reference loop", reference_loop())
    for seed in (int(s) for s in args.seeds.split(",")):
        params = GenParams("multilevel", nodes=args.nodes, seed=seed,
                           jobs=BATCH_JOBS.get(args.nodes, 10))
        got = compare(generate(params), reference, args.reps)
        print(f"seed {seed}: wall ref {got['ref-wall']:.1f} ms cur {got['cur-wall']:.1f} ms "
              f"(x{got['ref-wall'] / got['cur-wall']:.2f}); cpu ref {got['ref-cpu']:.1f} ms "
              f"cur {got['cur-cpu']:.1f} ms (x{got['ref-cpu'] / got['cur-cpu']:.2f}); "
              "placements identical")
    print("reference loop", reference_loop())
    return 0


if __name__ == "__main__":
    sys.exit(main())
