"""Multilevel greedy: fault nodes are taken last across domains (RFC cases f5 and f5b).

The RFC's rule: a fault pod prefers not to return to its cached node but is never banned
from it.  ``place_multilevel`` schedules the job once with every usable node and once with
its fault nodes held back, and keeps the layout without them unless the other has more
origin hits or fewer fault returns.  The shared cases come from
``shared/cases/rfc-preference`` (``tests/data/rfc/``); each variant below changes the size,
the number of fault ranks or the batch so that the rule is tested, not the example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.objective import Metrics, evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Scenario

DATA = Path(__file__).resolve().parents[2] / "data" / "rfc"
NOW = 1_764_400_000


def _load(name: str) -> Problem:
    return compile_scenario(load_scenario(DATA / f"{name}.yaml"))


def _node(name: str, rack: str, switch: str = "w0", free: int = 8,
          health: str = "healthy") -> dict[str, Any]:
    return {"name": name, "npus": 8, "free": free, "health": health,
            "labels": {"rack-id": rack, "switch-id": switch}}


def _job(name: str, tasks: int, affinity: str, faults: list[int],
         priority: int = 0) -> dict[str, Any]:
    return {"name": name, "owner-uid": f"u-{name}", "policy": "multilevel", "tasks": tasks,
            "npu-per-task": 8, "affinity-config": affinity, "fault-ranks": faults,
            "priority": priority}


def _build(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
           cache: dict[str, dict[int, str]]) -> Problem:
    """A multilevel scenario (level1 ``rack-id``, level2 ``switch-id``); ``cache`` maps a
    job name to rank -> node."""
    entries = [{"owner-uid": f"u-{job}", "rank": r, "node": n, "updated": NOW - 60}
               for job, ranks in cache.items() for r, n in sorted(ranks.items())]
    return compile_scenario(Scenario.model_validate({
        "now": NOW,
        "config": {"prefer-previous-node": True, "resource-level-config": {"default": {
            "level1": {"label": "rack-id"}, "level2": {"label": "switch-id"}}}},
        "nodes": nodes, "jobs": jobs, "affinity-cache": {"entries": entries},
    }))


def _plan(problem: Problem) -> tuple[Plan, Metrics]:
    """Greedy on the whole batch, validated, with its metrics."""
    plan = greedy_plan(problem)
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    assert check(problem, placement) == []
    return plan, evaluate(problem, plan.as_mapping())


def _names(problem: Problem, plan: Plan, j: int = 0) -> list[str]:
    nodes = plan.nodes[j]
    assert nodes is not None, plan.reasons[j]
    return [problem.node_names[int(n)] for n in nodes]


# --------------------------------------------------------------------------- shared cases


def test_f5_fault_rank_moves_to_a_spare_rack_and_the_healthy_rank_returns() -> None:
    """f5: rank 1 (fault, cached on a0) goes to b0, rank 0 back to c0: 1/1 hits, 0 returns."""
    problem = _load("f5_ml_fault_return")
    plan, metrics = _plan(problem)
    assert _names(problem, plan) == ["c0", "b0"]
    assert (metrics.origin_hits, metrics.origin_candidates) == (1, 1)
    assert metrics.fault_returns == 0


def test_f5b_single_fault_pod_avoids_its_node_across_level1_domains() -> None:
    """f5b: the only fault pod's node a0 is in another rack than the free b0/b1."""
    problem = _load("f5b_ml_single_fault")
    plan, metrics = _plan(problem)
    assert _names(problem, plan) == ["b0"]
    assert metrics.fault_returns == 0


# --------------------------------------------------------------------------- variants


def test_several_fault_ranks_in_several_racks_use_the_spare_racks() -> None:
    """Four ranks under one switch, one per rack (level1=1, level2=4); fault ranks 1 and 3
    sit in racks of their own; two spare racks hold free nodes."""
    nodes = [_node(f"{r}0", r) for r in ("a", "b", "c", "d", "e", "f")]
    problem = _build(nodes, [_job("t", 4, "level1=1,level2=4", [1, 3])],
                     {"t": {0: "a0", 1: "b0", 2: "c0", 3: "d0"}})
    plan, metrics = _plan(problem)
    got = _names(problem, plan)
    assert got[0] == "a0" and got[2] == "c0"
    assert sorted(got[1::2]) == ["e0", "f0"]
    assert metrics.origin_hits == 2 and metrics.fault_returns == 0


def test_larger_groups_fault_nodes_left_for_last_in_a_fresh_schedule() -> None:
    """No usable history (every cached rank is a fault rank): a fresh level1=2 schedule of
    4 ranks takes the two racks without fault nodes, not the best-fit rack holding them."""
    nodes = [_node("a0", "ra"), _node("a1", "ra")]
    nodes += [_node(f"{r}{k}", r) for r in ("rb", "rc") for k in range(3)]
    problem = _build(nodes, [_job("t", 4, "level1=2,level2=4", [0, 1])],
                     {"t": {0: "a0", 1: "a1"}})
    plan, metrics = _plan(problem)
    got = _names(problem, plan)
    assert not {"a0", "a1"} & set(got)
    assert metrics.fault_returns == 0


def test_fault_node_is_never_banned_when_nothing_else_fits() -> None:
    """A single pod whose only usable node is its fault node still gets it (RFC: the
    preference is never a hard rule)."""
    nodes = [_node("a0", "r0"), _node("b0", "r1", free=0)]
    problem = _build(nodes, [_job("t", 1, "level1=1", [0])], {"t": {0: "a0"}})
    plan, metrics = _plan(problem)
    assert _names(problem, plan) == ["a0"]
    assert metrics.fault_returns == 1


def test_fault_node_used_by_another_rank_when_holding_it_back_loses_hits() -> None:
    """Rack ra holds ranks 0 and 3 (cached), rank 1's fault node a1 and one free node a2;
    rank 2 has no cache entry.  Without a1 the level1 group (4 ranks) cannot stay in ra and
    would move to rb with no hit; with it, rank 2 takes a1 and ranks 0 and 3 return."""
    nodes = [_node(f"a{k}", "ra") for k in range(4)]
    nodes += [_node(f"b{k}", "rb") for k in range(4)]
    problem = _build(nodes, [_job("t", 4, "level1=4", [1])],
                     {"t": {0: "a0", 1: "a1", 3: "a3"}})
    plan, metrics = _plan(problem)
    got = _names(problem, plan)
    assert got[0] == "a0" and got[3] == "a3"
    assert got[1] == "a2" and got[2] == "a1"
    assert metrics.origin_hits == 2 and metrics.fault_returns == 0


def test_batch_of_fault_jobs_keeps_every_fault_rank_off_its_node() -> None:
    """Two fault jobs in one batch under two switches: each fault rank lands on a spare
    node of its own switch, every healthy rank returns."""
    nodes = [_node(f"{r}0", r, "w0") for r in ("a", "b", "c", "d")]
    nodes += [_node(f"{r}0", r, "w1") for r in ("p", "q", "s")]
    jobs = [_job("big", 3, "level1=1,level2=3", [0], priority=5),
            _job("small", 2, "level1=1,level2=2", [1])]
    problem = _build(nodes, jobs, {"big": {0: "a0", 1: "b0", 2: "c0"},
                                   "small": {0: "p0", 1: "q0"}})
    plan, metrics = _plan(problem)
    big, small = _names(problem, plan, 0), _names(problem, plan, 1)
    assert big == ["d0", "b0", "c0"]
    assert small == ["p0", "s0"]
    assert metrics.origin_hits == 3 and metrics.fault_returns == 0
