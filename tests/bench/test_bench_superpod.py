"""Speed of the super-pod greedy strategy (target: ≤ 20 ms median for the cached case).

Measure with ``python -m pytest tests/bench/test_bench_superpod.py --benchmark-enable``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from heuristics.greedy import greedy_plan
from heuristics.state import ClusterState
from heuristics.superpod import place_superpod
from models.check import check
from models.compiled import Problem, compile_scenario
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import AffinityCacheModel, CacheEntry, Config, Job, Node, Scenario

NOW = 1_764_400_000
PODS = 96
PER_POD = 48
TASKS = 512
SP_NODES = 16  # sp-block 128 NPUs / 8


def big_problem(*, cached: bool) -> Problem:
    """96 super pods × 48 nodes; a 512-rank chip8-node8-sp job in 32 blocks of 16.

    With ``cached`` the job's owner has a live entry for every rank: block ``b`` ran on
    super pod ``3b mod 96`` on shuffled nodes.  Some origins were taken by other tenants
    (busy), a few nodes are sub-healthy or unhealthy, and two ranks are fault ranks.
    """
    rng = np.random.default_rng(7)
    names = [f"sp{s}-node-{i}" for s in range(PODS) for i in range(PER_POD)]
    busy = rng.random(len(names)) < 0.10
    health = rng.choice(["healthy", "subhealthy", "unhealthy"], size=len(names),
                        p=[0.94, 0.04, 0.02])
    nodes = [Node(name=name, npus=8, free=0 if busy[n] else 8, health=str(health[n]),
                  super_pod_id=n // PER_POD) for n, name in enumerate(names)]
    entries = []
    if cached:
        for b in range(TASKS // SP_NODES):
            pod = (3 * b) % PODS
            slots = rng.permutation(PER_POD)[:SP_NODES]
            for i, slot in enumerate(slots.tolist()):
                entries.append(CacheEntry(owner_uid="owner-big", rank=b * SP_NODES + i,
                                          node=names[pod * PER_POD + slot], updated=NOW))
    job = Job(name="big", owner_uid="owner-big", policy="chip8-node8-sp", tasks=TASKS,
              npu_per_task=8, sp_block=SP_NODES * 8, fault_ranks=[5, 300])
    scenario = Scenario(now=NOW,
                        config=Config(super_pod_size=PER_POD, reserve_nodes=2,
                                      prefer_previous_node=True),
                        nodes=nodes, affinity_cache=AffinityCacheModel(entries=entries),
                        jobs=[job])
    return compile_scenario(scenario)


@pytest.fixture(scope="module")
def cached_problem() -> Problem:
    return big_problem(cached=True)


@pytest.fixture(scope="module")
def plain_problem() -> Problem:
    return big_problem(cached=False)


def assert_placed_and_valid(problem: Problem, nodes: np.ndarray | None) -> None:
    assert nodes is not None
    plan = Plan.empty(problem)
    plan.nodes[0] = nodes
    assert check(problem, to_placement(problem, plan, engine="greedy",
                                       status=Status.GREEDY)) == []


def test_bench_superpod_512_tasks_full_cache(benchmark: Any, cached_problem: Problem) -> None:
    state = ClusterState.initial(cached_problem)
    outcome = benchmark(place_superpod, cached_problem, 0, state)
    assert_placed_and_valid(cached_problem, outcome.nodes)
    job = cached_problem.jobs[0]
    hits = int(np.count_nonzero((outcome.nodes == job.origin) & ~job.fault))
    usable = int(np.count_nonzero(cached_problem.whole_free[job.origin] & ~job.fault
                                  & (cached_problem.health[job.origin] == 0)))
    assert hits >= usable  # every free healthy origin is taken back


def test_bench_superpod_512_tasks_no_cache(benchmark: Any, plain_problem: Problem) -> None:
    state = ClusterState.initial(plain_problem)
    outcome = benchmark(place_superpod, plain_problem, 0, state)
    assert_placed_and_valid(plain_problem, outcome.nodes)


def test_bench_superpod_greedy_plan(benchmark: Any, cached_problem: Problem) -> None:
    plan = benchmark(greedy_plan, cached_problem)
    assert_placed_and_valid(cached_problem, plan.nodes[0])
