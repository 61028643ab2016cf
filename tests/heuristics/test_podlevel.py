"""Pod-level rescheduling (partly running jobs): one handmade case per family and
stage, upstream's worked examples (reference E23, E28) as expected facts, through greedy
and CP-SAT alike (every answer valid, running ranks never moved, CP-SAT's objective equal
to ``evaluate``).
"""

from __future__ import annotations

from typing import Any

import pytest

from heuristics.greedy import greedy_plan
from heuristics.podlevel import rack_stage
from models.check import check
from models.compiled import Problem
from models.objective import evaluate
from models.placement import Status
from models.plan import to_placement
from solver.facade import solve
from tests.models.builders import (
    OLD,
    RACK_CONFIG,
    SP_CONFIG,
    a3_job,
    a3_nodes,
    entry,
    job,
    ml_e28,
    pod_node,
    problem,
    rack_block_lost,
    rack_cache,
    rack_job,
    rack_nodes,
    scenario,
    sp_cache,
    sp_job,
    sp_nodes,
)
from tests.solver.answers import assert_pod_level_answers


def _names(p: Problem, j: int = 0) -> list[str] | None:
    plan = greedy_plan(p)
    nodes = plan.nodes[j]
    assert check(p, to_placement(p, plan, engine="greedy", status=Status.GREEDY)) == []
    if nodes is None:
        return None
    return [p.node_names[int(n)] for n in nodes]


def _reason(p: Problem, j: int = 0) -> str:
    plan = greedy_plan(p)
    assert plan.nodes[j] is None
    return plan.reasons[j] or ""


def _both_engines(p: Problem) -> None:
    """Greedy and CP-SAT: valid, running ranks kept, CP-SAT's objective = evaluate."""
    assert_pod_level_answers(p, time_limit=20)


# --------------------------------------------------------------------------- ordinary


def _ordinary(fault: bool, **extra: Any) -> Problem:
    nodes = [pod_node("n0", free=0), pod_node("n1", free=0), pod_node("n2"), pod_node("n3")]
    data = job("o", "chip8-node8", tasks=3, npu=8, owner_uid="u", pod_rescheduling=True,
               running_ranks={0: "n0", 1: "n1"}, fault_ranks=[2] if fault else [], **extra)
    return problem(scenario(nodes, [data], cache=[entry("u", 2, "n2")]))


def test_ordinary_evicted_rank_returns_to_its_node() -> None:
    p = _ordinary(fault=False)
    assert _names(p) == ["n0", "n1", "n2"]
    _both_engines(p)


@pytest.mark.parametrize("sessions", [0, 12])
def test_ordinary_fault_rank_goes_elsewhere_at_every_stage(sessions: int) -> None:
    p = _ordinary(fault=True, pending_sessions=sessions)
    assert _names(p) == ["n0", "n1", "n3"]
    _both_engines(p)


# --------------------------------------------------------------------------- 850 / A3

def test_850_stage0_fault_pod_is_repaired_in_its_super_pod() -> None:
    busy = {n for r, n in OLD.items() if r != 5}
    p = problem(scenario(sp_nodes(busy, {"n9"}), [sp_job([5], [5])], SP_CONFIG,
                         cache=sp_cache()))
    got = _names(p)
    assert got is not None and got[5] == "n12"  # same super pod as block 1's running ranks
    assert [got[r] for r in range(8) if r != 5] == [OLD[r] for r in range(8) if r != 5]
    _both_engines(p)


def test_850_fault_node_healthy_again_is_avoided_while_another_is_free() -> None:
    busy = {n for r, n in OLD.items() if r != 5}
    p = problem(scenario(sp_nodes(busy), [sp_job([5], [5])], SP_CONFIG, cache=sp_cache()))
    assert (_names(p) or [])[5] == "n12"
    only_old = sp_nodes(busy | {"n12", "n13", "n14", "n15"})
    p2 = problem(scenario(only_old, [sp_job([5], [5])], SP_CONFIG, cache=sp_cache()))
    assert (_names(p2) or [])[5] == "n9"  # the only free node of the super pod
    _both_engines(p2)


def test_850_evicted_pod_returns_to_its_node() -> None:
    busy = {n for r, n in OLD.items() if r != 6}
    p = problem(scenario(sp_nodes(busy), [sp_job([6], [])], SP_CONFIG, cache=sp_cache()))
    got = _names(p)
    assert got is not None and got[6] == OLD[6]
    metrics = evaluate(p, greedy_plan(p).as_mapping())
    assert (metrics.origin_hits, metrics.origin_candidates) == (1, 1)


def test_850_no_room_in_the_super_pod_leaves_the_job_pending() -> None:
    busy = {n for r, n in OLD.items() if r != 5} | {"n12", "n13", "n14", "n15"}
    p = problem(scenario(sp_nodes(busy, {"n9"}), [sp_job([5], [5])], SP_CONFIG,
                         cache=sp_cache()))
    assert "selectNodeFromOriginVSuperPod failed, unschedulable" in _reason(p)
    _both_engines(p)


def test_850_stage6_deleted_block_returns_to_its_origin_super_pod() -> None:
    # from 6 sessions the rescheduler deleted the whole logical super pod of the fault
    busy = {OLD[r] for r in range(4)}
    p = problem(scenario(sp_nodes(busy, {"n9"}), [sp_job([4, 5, 6, 7], [5], 6)],
                         SP_CONFIG, cache=sp_cache()))
    got = _names(p)
    assert got is not None
    assert got[4:8] == ["n8", "n12", "n10", "n11"]
    _both_engines(p)


def test_850_stage6_deleted_block_moves_when_its_super_pod_is_full() -> None:
    busy = {OLD[r] for r in range(4)} | {f"n{i}" for i in range(8, 16)}
    p = problem(scenario(sp_nodes(busy), [sp_job([4, 5, 6, 7], [5], 6)], SP_CONFIG,
                         cache=sp_cache()))
    assert _names(p) == ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"]
    _both_engines(p)


def test_a3_pod_level_repair() -> None:
    p = problem(scenario(a3_nodes(), [a3_job()], SP_CONFIG, cache=sp_cache()))
    assert (_names(p) or [])[2] == "n4"
    _both_engines(p)


def test_running_ranks_in_two_super_pods_cannot_be_completed() -> None:
    busy = {"n0", "n1", "n8"}
    data = job("t", "chip8-node8-sp", tasks=4, npu=8, sp_block=32,
               running_ranks={0: "n0", 1: "n1", 2: "n8"})
    p = problem(scenario(sp_nodes(busy), [data], SP_CONFIG))
    assert "sit in super pods [0, 1]" in _reason(p)
    _both_engines(p)


# --------------------------------------------------------------------------- 950

def test_rack_stage_thresholds() -> None:
    for sessions, stage in ((0, 0), (2, 0), (3, 3), (5, 3), (6, 6), (11, 6), (12, 6)):
        p = problem(scenario(rack_nodes({"r0n0", "r0n1", "r0n2"}, {"r0n3"}),
                             [rack_job(sessions)], RACK_CONFIG, cache=rack_cache()))
        assert rack_stage(p.jobs[0]) == stage


def test_950_stage0_same_rack_as_the_fault_node() -> None:
    # E23 getSameRackNodes: the fault position takes a free node of its old rack
    p = problem(scenario(rack_nodes({"r0n0", "r0n1", "r0n2"}, {"r0n3"}),
                         [rack_job(0)], RACK_CONFIG, cache=rack_cache()))
    assert (_names(p) or [])[3] == "r0n4"
    _both_engines(p)


def test_950_stage0_full_rack_fails_even_with_room_in_the_super_pod() -> None:
    busy = {f"r0n{i}" for i in range(8) if i != 3}
    p = problem(scenario(rack_nodes(busy, {"r0n3"}), [rack_job(0)], RACK_CONFIG,
                         cache=rack_cache()))
    assert "is invalid" in _reason(p)
    _both_engines(p)


def test_950_stage3_another_rack_of_the_same_super_pod() -> None:
    # E23 getAnotherRackNodes: the old rack is full, another rack of the super pod serves
    busy = {f"r0n{i}" for i in range(8) if i != 3}
    p = problem(scenario(rack_nodes(busy, {"r0n3"}), [rack_job(3)], RACK_CONFIG,
                         cache=rack_cache()))
    assert (_names(p) or [])[3] == "r1n0"
    _both_engines(p)


def test_950_stage3_keeps_the_fault_rack_when_it_has_room() -> None:
    p = problem(scenario(rack_nodes({"r0n0", "r0n1", "r0n2"}, {"r0n3"}),
                         [rack_job(3)], RACK_CONFIG, cache=rack_cache()))
    assert (_names(p) or [])[3] == "r0n4"


def test_950_stage3_whole_super_pod_full_fails() -> None:
    busy = {f"r{k}n{i}" for k in (0, 1) for i in range(8) if (k, i) != (0, 3)}
    p = problem(scenario(rack_nodes(busy, {"r0n3"}), [rack_job(3)], RACK_CONFIG,
                         cache=rack_cache()))
    assert "there is no enough nodes for whole rack schedule" in _reason(p)
    _both_engines(p)


def test_950_window_with_running_ranks_stays_in_its_rack() -> None:
    # tpBlock 2: rank 3's window partner (rank 2) runs in rack 0
    p = problem(scenario(rack_nodes({"r0n0", "r0n1", "r0n2"}, {"r0n3"}),
                         [rack_job(3, ra_block=16)], RACK_CONFIG, cache=rack_cache()))
    assert (_names(p) or [])[3] == "r0n4"
    _both_engines(p)


def test_950_stage3_deleted_window_moves_to_another_rack() -> None:
    # from 3 sessions the tp-block (window of ranks 2, 3) was deleted; its rack is full
    busy = {f"r0n{i}" for i in range(8) if i not in (2, 3)}
    p = problem(scenario(rack_nodes(busy, {"r0n3"}), [rack_job(3, ra_block=16,
                                                                   pending=(3, 2))],
                         RACK_CONFIG, cache=rack_cache()))
    got = _names(p)
    assert got is not None and {got[2][:2], got[3][:2]} in ({"r0"}, {"r1"})
    assert got[2][:2] == got[3][:2]
    _both_engines(p)


def test_950_stage6_deleted_block_is_placed_by_the_strategies() -> None:
    p = problem(rack_block_lost(6))
    got = _names(p)
    assert got is not None and all(n.startswith("r0") or n.startswith("r1") for n in got[4:])
    _both_engines(p)


# --------------------------------------------------------------------------- multilevel

def test_multilevel_e28_pod_repair_inside_its_level1_group() -> None:
    p = ml_e28({"a2", "b2", "c0", "c1"}, (3,))
    assert _names(p) == ["a0", "a1", "b0", "b2"]
    _both_engines(p)


def test_multilevel_e28_no_room_in_the_group_does_not_move_running_pods() -> None:
    p = ml_e28({"a2", "c0", "c1"}, (3,))
    assert "pod-level rescheduling of job 'm' failed" in _reason(p)
    _both_engines(p)


def test_multilevel_e28_escalated_group_is_rescheduled_under_the_root() -> None:
    # from 6 sessions the rescheduler deleted rank 3's whole level1 group (b0 and b1)
    p = ml_e28({"a2", "c0", "c1"}, (2, 3), sessions=6)
    assert _names(p) == ["a0", "a1", "c0", "c1"]
    _both_engines(p)


def test_950_stage0_fault_rank_stays_in_its_rack_when_only_its_old_node_is_free() -> None:
    # rack 0's only free node is rank 3's old node (healthy again): same-rack stage keeps
    # it there (a counted fault return) rather than leaving the rack
    busy = {f"r0n{i}" for i in range(8) if i != 3}
    p = problem(scenario(rack_nodes(busy), [rack_job(0)], RACK_CONFIG, cache=rack_cache()))
    assert (_names(p) or [])[3] == "r0n3"
    p3 = problem(scenario(rack_nodes(busy), [rack_job(3)], RACK_CONFIG, cache=rack_cache()))
    assert (_names(p3) or [])[3] == "r1n0"  # stage 3: another rack of the super pod


def test_cpsat_places_an_ordinary_repair_jointly_with_the_batch() -> None:
    # greedy places the higher-priority job first, on n2 (natural order), where the
    # repaired rank ran; CP-SAT models the pending rank and swaps them (one more hit)
    nodes = [pod_node("n0", free=0), pod_node("n2"), pod_node("n3")]
    first = job("a", "chip8-node8", tasks=1, npu=8, priority=5)
    repaired = job("o", "chip8-node8", tasks=2, npu=8, owner_uid="u", pod_rescheduling=True,
                   running_ranks={0: "n0"})
    p = problem(scenario(nodes, [first, repaired], cache=[entry("u", 1, "n2")]))
    greedy = solve(p, engine="greedy", time_limit=20, workers=1, seed=0)
    assert greedy.metrics.origin_hits == 0
    best = solve(p, engine="cpsat", time_limit=20, workers=1, seed=0)
    assert best.metrics.origin_hits == 1
    assert best.placement.jobs[1].ranks == {"1": "n2"}
    _both_engines(p)
