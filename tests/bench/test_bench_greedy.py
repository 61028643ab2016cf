"""Speed of greedy as the facade runs it, per family, on generated batches of 10 jobs.

``solve(problem, engine="greedy")`` is what a caller gets: ``resolve_weights``,
``greedy_plan``, the validator ``check`` and ``evaluate``.  ``greedy_plan`` is also timed
alone.  Each round starts from a freshly compiled problem (compiling is not timed), so
caches kept per problem start cold, as in a scheduling session.  Target:
<= 50 ms per call at 8,192 nodes for every family.  The batches come from the benchmark
generators (``benchmarks.generators``, seed 0, 10 jobs).  CI runs a 1,024-node variant
once per case and validates the answer; measure the large ones with::

    NPU_PLACE_BENCH_SCALES=4096,8192 /work/venv/bin/python -m pytest \\
        tests/bench/test_bench_greedy.py --benchmark-enable -q

Timings on a shared machine are noisy: compare medians of several runs.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import pytest

from benchmarks.generators import FAMILIES, GenParams, generate
from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.placement import Status
from models.plan import to_placement
from models.scenario import Scenario
from solver.facade import solve

SCALES = tuple(int(s) for s in os.environ.get("NPU_PLACE_BENCH_SCALES", "1024").split(","))
JOBS = 10
ROUNDS = 7


@cache
def _scenario(family: str, nodes: int) -> Scenario:
    return generate(GenParams(family, nodes=nodes, seed=0, jobs=JOBS))


def _run_solve(problem: Problem) -> Any:
    return solve(problem, engine="greedy")


@pytest.mark.parametrize("nodes", SCALES)
@pytest.mark.parametrize("family", FAMILIES)
def test_bench_solve_greedy(benchmark: Any, family: str, nodes: int) -> None:
    scenario = _scenario(family, nodes)
    result = benchmark.pedantic(_run_solve, setup=lambda: ((compile_scenario(scenario),), {}),
                                rounds=ROUNDS, iterations=1)
    assert result.status is Status.GREEDY
    assert result.metrics.placed_jobs >= 1
    assert check(scenario, result.placement) == []


@pytest.mark.parametrize("nodes", SCALES)
@pytest.mark.parametrize("family", FAMILIES)
def test_bench_greedy_plan(benchmark: Any, family: str, nodes: int) -> None:
    scenario = _scenario(family, nodes)
    plan = benchmark.pedantic(greedy_plan, setup=lambda: ((compile_scenario(scenario),), {}),
                              rounds=ROUNDS, iterations=1)
    problem = compile_scenario(scenario)
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    assert check(problem, placement) == []
    assert len(plan.nodes) == JOBS
