"""Speed of the Atlas 950 greedy path (``heuristics.rack.place_rack``).

The cluster: 8 super pods x 1,024 nodes (128 racks of 8, 8,192 nodes), super-pod-size
1,024.  The job: 1,024 tasks, ra-block 64 (tpBlock 8).  Target: <= 20 ms median for the
full-cache cases.  Two stress cases (tpBlock 1 with 1,024 blocks; a soft job no super
pod can hold) show the slow paths.  Measure with::

    /work/venv/bin/python -m pytest tests/bench/test_bench_rack.py --benchmark-enable -q

In CI (``--benchmark-disable``) every case runs once and its answer is validated.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from heuristics.rack import place_rack
from heuristics.state import ClusterState
from models.check import check
from models.compiled import Problem, compile_scenario
from models.scenario import Scenario
from tests.models.builders import one_job_placement

NOW = 1_764_400_000
PODS, RACKS, PER_RACK = 8, 128, 8
TASKS = 1024


def _name(sp: int, rk: int, i: int) -> str:
    return f"sp{sp}-r{rk:03d}-n{i}"


def _scenario(busy: set[str], sp_block_npus: int, cache: dict[int, str], prefer: bool,
              ra_block: int = 64, soft: bool = False) -> Scenario:
    nodes = [
        {"name": _name(sp, rk, i), "npus": 8, "free": 0 if _name(sp, rk, i) in busy else 8,
         "super-pod-id": sp, "rack-id": sp * RACKS + rk}
        for sp in range(PODS) for rk in range(RACKS) for i in range(PER_RACK)
    ]
    entries = [{"owner-uid": "bench-owner", "rank": r, "node": n, "updated": NOW - 60}
               for r, n in cache.items()]
    return Scenario.model_validate({
        "now": NOW,
        "config": {"super-pod-size": PODS * RACKS * PER_RACK // PODS,
                   "prefer-previous-node": prefer},
        "nodes": nodes,
        "affinity-cache": {"entries": entries},
        "jobs": [{"name": "big", "owner-uid": "bench-owner", "policy": "chip8-node8-ra64-sp",
                  "tasks": TASKS, "npu-per-task": 8, "sp-block": sp_block_npus,
                  "ra-block": ra_block, "super-pod-affinity": "soft" if soft else "hard"}],
    })


def _one_pod_layout(rng: np.random.Generator, sp: int) -> dict[int, str]:
    """An earlier valid placement filling super pod ``sp``: racks and nodes shuffled."""
    racks = rng.permutation(RACKS)
    cache = {}
    for w, rk in enumerate(racks.tolist()):
        for j, i in enumerate(rng.permutation(PER_RACK).tolist()):
            cache[w * PER_RACK + j] = _name(sp, rk, i)
    return cache


def _spread_layout(rng: np.random.Generator) -> dict[int, str]:
    """An earlier placement with spBlock 64: 2 blocks per super pod, random racks."""
    cache = {}
    per_block = 64 // PER_RACK
    for sp in range(PODS):
        racks = rng.choice(RACKS, size=2 * per_block, replace=False).tolist()
        for k in range(2):
            b = 2 * sp + k
            for w, rk in enumerate(racks[k * per_block:(k + 1) * per_block]):
                for j, i in enumerate(rng.permutation(PER_RACK).tolist()):
                    cache[b * 64 + w * PER_RACK + j] = _name(sp, rk, i)
    return cache


def _others_busy(rng: np.random.Generator, keep: set[str], share: float,
                 spare_pod: int | None = None) -> set[str]:
    return {_name(sp, rk, i) for sp in range(PODS) for rk in range(RACKS)
            for i in range(PER_RACK)
            if sp != spare_pod and _name(sp, rk, i) not in keep and rng.random() < share}


def _cases() -> dict[str, tuple[Problem, dict[int, str]]]:
    rng = np.random.default_rng(950)
    out: dict[str, tuple[Problem, dict[int, str]]] = {}
    # 1. sp-block = the whole job (1,024 nodes): it returns to its super pod 5.
    cache = _one_pod_layout(rng, 5)
    busy = _others_busy(rng, set(cache.values()), 0.2, spare_pod=5)
    out["full-cache-one-block"] = (compile_scenario(_scenario(busy, TASKS * 8, cache, True)),
                                   cache)
    # 2. spBlock 64 (16 blocks) over all super pods, a third of the other nodes busy.
    cache = _spread_layout(rng)
    busy = _others_busy(rng, set(cache.values()), 0.33)
    out["full-cache-16-blocks"] = (compile_scenario(_scenario(busy, 512, cache, True)), cache)
    # 3. As 2 with a tenth of the other nodes busy, and 5 % of the cached nodes taken:
    #    a window that lost a node cannot complete in its rack (tpBlock 8) and moves.
    light = _others_busy(rng, set(cache.values()), 0.1)
    lost = {n for n in cache.values() if rng.random() < 0.05}
    out["cache-5pct-lost"] = (compile_scenario(_scenario(light | lost, 512, cache, True)),
                              cache)
    # 4. No preference: upstream's strategies alone (SuperPodSchedule over 16 blocks).
    out["no-cache-16-blocks"] = (compile_scenario(_scenario(busy, 512, cache, False)), cache)
    # Stress (no target): 1,024 one-node blocks and windows carved one by one, and a soft
    # whole-job block that no super pod can hold (the soft pass gathers 1,024 nodes).
    out["no-cache-1024-blocks-tp1"] = (
        compile_scenario(_scenario(busy, 8, cache, False, ra_block=8)), cache)
    out["soft-fallback-whole-job"] = (
        compile_scenario(_scenario(busy, TASKS * 8, cache, False, soft=True)), cache)
    return out


@pytest.fixture(scope="module")
def cases() -> dict[str, tuple[Problem, dict[int, str]]]:
    return _cases()


@pytest.mark.parametrize("case", ["full-cache-one-block", "full-cache-16-blocks",
                                  "cache-5pct-lost", "no-cache-16-blocks",
                                  "no-cache-1024-blocks-tp1", "soft-fallback-whole-job"])
def test_bench_rack(benchmark: Any, cases: dict[str, tuple[Problem, dict[int, str]]],
                    case: str) -> None:
    problem, cache = cases[case]
    state = ClusterState.initial(problem)
    outcome = benchmark(place_rack, problem, 0, state)
    assert outcome.nodes is not None, outcome.reason
    placement = one_job_placement(problem, 0, outcome.nodes)
    assert check(problem, placement) == []
    got = [problem.node_names[n] for n in outcome.nodes]
    hit = sum(1 for r, n in cache.items() if got[r] == n)
    benchmark.extra_info["origin_hits"] = hit
    if case.startswith("full-cache"):
        assert hit == TASKS  # an evicted job with every origin free returns fully
    elif case == "cache-5pct-lost":
        whole = sum(
            1 for w in range(TASKS // PER_RACK)
            if all(problem.free[problem.node_index[cache[r]]] == 8
                   for r in range(w * PER_RACK, (w + 1) * PER_RACK))
        )
        assert 0 < whole < TASKS // PER_RACK
        assert hit == whole * PER_RACK  # every window whose rack is intact returns
