"""CP-SAT's model of partly running A3/850, 950 and multilevel jobs.

The running ranks are fixed and anchor their groups; the pending ranks are decided within
the domains the stage allows (``solver.model.podscope``).  Per family: a case per stage
where CP-SAT keeps the pending ranks in the stage's domain and beats greedy when a better
answer exists there (another job's cached node that greedy's order hands to the repair),
a case where the stage's domain has no room (the job stays pending, never placed
elsewhere), and a property over random partly running jobs.  CP-SAT runs with one
worker, a fixed seed and a deterministic budget.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from solver.cpsat import build_model
from solver.engine import solve_cpsat
from solver.model.podscope import leaf_allows, node_keys, pod_scope
from solver.request import SolveRequest
from tests.models.builders import (
    ML_CONFIG,
    OLD,
    RACK_CONFIG,
    SP_CONFIG,
    a3_job,
    a3_nodes,
    entry,
    job,
    ml_cache,
    ml_e28,
    ml_job,
    ml_nodes,
    pod_node,
    problem,
    rack_cache,
    rack_job,
    rack_nodes,
    scenario,
    sp_cache,
    sp_job,
    sp_nodes,
)
from tests.solver.answers import assert_running_ranks_kept
from tests.solver.test_podlevel_properties import _partly_running
from tests.strategies import ALL_FAMILIES, problems


def _cpsat(p: Problem, optimal: bool = True) -> tuple[Plan, Plan]:
    """Greedy's plan and CP-SAT's (hinted with it), both checked: valid, running ranks
    kept, CP-SAT's objective equal to ``evaluate`` and at least greedy's (and proved
    optimal unless a job is left out of the model)."""
    weights = resolve_weights(p)
    greedy = greedy_plan(p)
    out = solve_cpsat(SolveRequest(
        p, greedy, weights, time_limit=60.0, workers=1, seed=0, deterministic_time=5.0,
        mode="full"))
    assert out.plan is not None
    assert out.status is (Status.OPTIMAL if optimal else Status.FEASIBLE)
    assert check(p, to_placement(p, out.plan, engine="cpsat", status=out.status)) == []
    assert out.objective == evaluate(p, out.plan.as_mapping(), weights).objective
    assert out.objective >= evaluate(p, greedy.as_mapping(), weights).objective
    _kept(p, out.plan, greedy)
    return greedy, out.plan


def _kept(p: Problem, plan: Plan, greedy: Plan) -> None:
    """Running ranks on their nodes; modelled jobs' pending ranks inside their scope
    (a soft job whose greedy answer spills is pinned to it, not modelled)."""
    modelled = build_model(p, resolve_weights(p), greedy).structure.pod
    assert_running_ranks_kept(p, plan)
    for view in p.jobs:
        nodes = plan.nodes[view.index]
        if nodes is None or not view.partly_running:
            continue
        fixed = view.running >= 0
        scope = modelled.get(view.index)
        if scope is None:
            continue
        size = scope.sizes[scope.leaf]
        for r in np.flatnonzero(~fixed).tolist():
            keys = node_keys(p, scope.kinds, scope.tree, int(nodes[r]))
            assert keys is not None and leaf_allows(scope, r // size, keys)


def _names(p: Problem, plan: Plan, j: int = 0) -> list[str] | None:
    nodes = plan.nodes[j]
    return None if nodes is None else [p.node_names[int(n)] for n in nodes]


def _modelled(p: Problem, j: int = 0) -> None:
    """The job is modelled (not pinned to greedy's answer)."""
    built = build_model(p, resolve_weights(p), greedy_plan(p))
    assert j in built.structure.pod and j not in built.pinned


def _other(owner: str = "v") -> dict[str, Any]:
    """A lower-priority one-node job whose cached node sits where the repair may go."""
    return job("o", "chip8-node8", tasks=1, npu=8, owner_uid=owner, priority=1)


# --------------------------------------------------------------------------- 950


@pytest.mark.parametrize("sessions", [0, 2])
def test_950_stage0_stays_in_the_old_rack_and_beats_greedy(sessions: int) -> None:
    # rank 3's old node r0n3 is down; rack 0 has r0n4..r0n7; job o cached r0n4
    p = problem(scenario(rack_nodes({"r0n0", "r0n1", "r0n2"}, {"r0n3"}),
                         [rack_job(sessions, priority=5), _other()], RACK_CONFIG,
                         cache=[*rack_cache(), entry("v", 0, "r0n4")]))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert _names(p, greedy, 1) == ["r0n5"]  # greedy's repair took o's cached node
    got = _names(p, plan)
    assert got is not None and got[3].startswith("r0n") and got[3] != "r0n4"
    assert _names(p, plan, 1) == ["r0n4"]


def test_950_stage3_another_rack_of_the_super_pod_and_beats_greedy() -> None:
    busy = {f"r0n{i}" for i in range(8) if i != 3}
    p = problem(scenario(rack_nodes(busy, {"r0n3"}), [rack_job(3, priority=5), _other()],
                         RACK_CONFIG, cache=[*rack_cache(), entry("v", 0, "r1n0")]))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert _names(p, greedy) == ["r0n0", "r0n1", "r0n2", "r1n0"]
    got = _names(p, plan)
    assert got is not None and got[3].startswith("r1n") and got[3] != "r1n0"
    assert _names(p, plan, 1) == ["r1n0"]


@pytest.mark.parametrize("sessions", [0, 3])
def test_950_no_room_in_the_stage_domain_leaves_the_job_pending(sessions: int) -> None:
    # stage 0: rack 0 full (rack 1 has room); stage 3: super pod 0 full (super pod 1 has)
    busy = {f"r0n{i}" for i in range(8) if i != 3}
    if sessions >= 3:
        busy |= {f"r1n{i}" for i in range(8)}
    p = problem(scenario(rack_nodes(busy, {"r0n3"}), [rack_job(sessions)], RACK_CONFIG,
                         cache=rack_cache()))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert greedy.nodes[0] is None and plan.nodes[0] is None
    # stage 0: the window (rank 3 alone) keeps its old rack; stage 3: the block keeps the
    # super pod of its running ranks (an anchor, not a stage rule)
    stage = " and its stage allows (pending-sessions 0: same rack as the old nodes)"
    assert plan.reasons[0] == (
        "pod-level rescheduling of job 'r': 1 pending rank, but the domains its running "
        f"ranks hold{stage if sessions < 3 else ''} have 0 free whole 8-NPU nodes")


@pytest.mark.parametrize(("sessions", "healthy"), [(0, True), (0, False), (3, True)])
def test_950_fault_node_healthy_again(sessions: int, healthy: bool) -> None:
    # rack 0's only free node is rank 3's old node: stage 0 returns there when it is
    # healthy (a counted fault return) and fails when it is not; stage 3 leaves the rack
    busy = {f"r0n{i}" for i in range(8) if i != 3}
    p = problem(scenario(rack_nodes(busy, set() if healthy else {"r0n3"}),
                         [rack_job(sessions)], RACK_CONFIG, cache=rack_cache()))
    greedy, plan = _cpsat(p)
    got = _names(p, plan)
    if sessions >= 3:
        assert got is not None and got[3].startswith("r1n")
    elif healthy:
        assert got is not None and got[3] == "r0n3"
        assert evaluate(p, plan.as_mapping()).fault_returns == 1
    else:
        assert got is None
    mine = _names(p, greedy)
    assert (mine is None) == (got is None)
    assert mine is None or got is None or [n[:2] for n in mine] == [n[:2] for n in got]


@pytest.mark.parametrize("sessions", [6, 12])
def test_950_stage6_and_job_level_free_block_goes_anywhere(sessions: int) -> None:
    # block 1 (ranks 4..7) lost every pod; its old super pod 1 is full: from 6 sessions
    # (and at job level) it may go to super pod 0
    old = {r: f"r0n{r}" if r < 4 else f"r8n{r - 4}" for r in range(8)}
    busy = {old[r] for r in range(4)} | {f"r8n{i}" for i in range(8)}
    data = rack_job(sessions, tasks=8, pending=(5, 4, 6, 7), old=old)
    p = problem(scenario(rack_nodes(busy), [data], RACK_CONFIG,
                         cache=rack_cache(old, tasks=8)))
    _modelled(p)
    _, plan = _cpsat(p)
    got = _names(p, plan)
    assert got is not None and all(n[:2] in ("r0", "r1") for n in got[4:])


def test_950_stage3_free_block_keeps_its_old_super_pod() -> None:
    # below 6 sessions the block without running ranks stays in its old super pod 1,
    # which is full: pending (stage 6 above places it in super pod 0)
    old = {r: f"r0n{r}" if r < 4 else f"r8n{r - 4}" for r in range(8)}
    busy = {old[r] for r in range(4)} | {f"r8n{i}" for i in range(8)}
    data = rack_job(3, tasks=8, pending=(5, 4, 6, 7), old=old)
    p = problem(scenario(rack_nodes(busy), [data], RACK_CONFIG,
                         cache=rack_cache(old, tasks=8)))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert greedy.nodes[0] is None and plan.nodes[0] is None


# --------------------------------------------------------------------------- 850 / A3


@pytest.mark.parametrize("sessions", [0, 3, 6, 12])
def test_850_repair_stays_in_the_block_super_pod_and_beats_greedy(sessions: int) -> None:
    # rank 5 (block 1: n8..n11, super pod 1) lost its pod; job o cached n12
    busy = {n for r, n in OLD.items() if r != 5}
    data = sp_job([5], [5], sessions=sessions) | {"priority": 5}
    p = problem(scenario(sp_nodes(busy, {"n9"}), [data, _other()], SP_CONFIG,
                         cache=[*sp_cache(), entry("v", 0, "n12")]))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert (_names(p, greedy) or [])[5] == "n12"
    got = _names(p, plan)
    assert got is not None and got[5] in {f"n{i}" for i in range(12, 16)}
    assert _names(p, plan, 1) == ["n12"]


def test_850_no_room_in_the_super_pod_leaves_the_job_pending() -> None:
    busy = {n for r, n in OLD.items() if r != 5} | {f"n{i}" for i in range(12, 16)}
    p = problem(scenario(sp_nodes(busy, {"n9"}), [sp_job([5], [5])], SP_CONFIG,
                         cache=sp_cache()))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert greedy.nodes[0] is None and plan.nodes[0] is None


@pytest.mark.parametrize("healthy", [True, False])
def test_850_fault_node_healthy_again(healthy: bool) -> None:
    # super pod 1's only free node is rank 5's old node n9: taken back when healthy (a
    # counted fault return), else the job stays pending
    busy = {n for r, n in OLD.items() if r != 5} | {"n12", "n13", "n14", "n15"}
    p = problem(scenario(sp_nodes(busy, set() if healthy else {"n9"}), [sp_job([5], [5])],
                         SP_CONFIG, cache=sp_cache()))
    _modelled(p)
    greedy, plan = _cpsat(p)
    got, greedy_got = _names(p, plan), _names(p, greedy)
    assert (greedy_got[5] if greedy_got else None) == (got[5] if got else None)
    if healthy:
        assert got is not None and got[5] == "n9"
        assert evaluate(p, plan.as_mapping()).fault_returns == 1
    else:
        assert got is None


def test_a3_repair_stays_in_the_block_super_pod_and_beats_greedy() -> None:
    # A3 (16-NPU nodes, blocks of 4): rank 2 (block 0, super pod 0) lost its pod; job o
    # cached n4, the first free node of super pod 0
    other = job("o", "chip2-node16", tasks=1, npu=16, owner_uid="v", priority=1)
    p = problem(scenario(a3_nodes(), [a3_job(priority=5), other], SP_CONFIG,
                         cache=[*sp_cache(), entry("v", 0, "n4")]))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert (_names(p, greedy) or [])[2] == "n4"
    got = _names(p, plan)
    assert got is not None and got[2] in {f"n{i}" for i in range(5, 8)}
    assert _names(p, plan, 1) == ["n4"]


def test_a3_running_ranks_in_two_super_pods_are_not_modelled() -> None:
    # a block whose running ranks span two super pods cannot be completed: not modelled,
    # greedy's answer (none) stands
    running = {0: "n0", 1: "n8"}
    data = job("t", "chip8-node8-sp", tasks=4, npu=8, sp_block=32, pod_rescheduling=True,
               running_ranks=running)
    p = problem(scenario(sp_nodes(set(running.values())), [data], SP_CONFIG))
    assert pod_scope(p, p.jobs[0]) is None
    greedy, plan = _cpsat(p, optimal=False)  # left out of the model: no proof
    assert greedy.nodes[0] is None and plan.nodes[0] is None


# --------------------------------------------------------------------------- multilevel

def _ml_batch(sessions: int) -> Problem:
    """Level1 groups of 2: ranks 0,1 ran on a0,a1 (w0), ranks 2,3 on b0,b1 (w1); b1 is
    down; w1 has b2, b3 free and job o cached b2."""
    switches = {"a0": "w0", "a1": "w0", "b0": "w1", "b1": "w1", "b2": "w1", "b3": "w1",
                "c0": "w2", "c1": "w2"}
    nodes = ml_nodes(switches, set(switches) - {"a0", "a1", "b0", "b1"})
    return problem(scenario(nodes, [ml_job((3,), sessions, priority=5), _other()], ML_CONFIG,
                            cache=[*ml_cache(), entry("v", 0, "b2")]))


@pytest.mark.parametrize("sessions", [0, 6, 12])
def test_multilevel_repair_inside_the_group_beats_greedy(sessions: int) -> None:
    p = _ml_batch(sessions)
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert (_names(p, greedy) or [])[3] == "b2"
    assert _names(p, plan) == ["a0", "a1", "b0", "b3"]
    assert _names(p, plan, 1) == ["b2"]


def test_multilevel_no_room_in_the_group_leaves_the_job_pending() -> None:
    p = ml_e28({"a2", "c0", "c1"}, (3,))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert greedy.nodes[0] is None and plan.nodes[0] is None


def test_multilevel_escalated_group_goes_under_the_root() -> None:
    p = ml_e28({"a2", "c0", "c1"}, (2, 3), sessions=6)
    _modelled(p)
    _, plan = _cpsat(p)
    got = _names(p, plan)
    assert got is not None and got[:2] == ["a0", "a1"] and set(got[2:]) == {"c0", "c1"}


# --------------------------------------------------------------------------- property


@settings(max_examples=40, deadline=None)
@given(problem=problems(families=ALL_FAMILIES, max_nodes=24, max_jobs=3),
       seed=st.integers(0, 2**31 - 1), sessions=st.sampled_from([0, 2, 3, 5, 6, 12]),
       pod=st.booleans())
def test_cpsat_never_moves_a_running_rank(problem: Problem, seed: int, sessions: int,
                                          pod: bool) -> None:
    partly = _partly_running(problem, seed, sessions, pod)
    assume(partly is not None)
    assert partly is not None
    weights = resolve_weights(partly)
    greedy = greedy_plan(partly)
    out = solve_cpsat(SolveRequest(
        partly, greedy, weights, time_limit=60.0, workers=1,
        seed=random.Random(seed).randint(0, 9), deterministic_time=2.0))
    assert out.plan is not None
    assert check(partly, to_placement(partly, out.plan, engine="cpsat",
                                      status=out.status)) == []
    _kept(partly, out.plan, greedy)
    event("modelled" if build_model(partly, weights, greedy).structure.pod else "not modelled")
    value = evaluate(partly, out.plan.as_mapping(), weights).objective
    if out.status is Status.OPTIMAL:
        assert out.objective == value
        if out.hint_objective is not None:  # the warm start was representable (see
            # tests/solver/test_trimmed_levels.py for greedy's nodes the model lacks)
            assert value >= evaluate(partly, greedy.as_mapping(), weights).objective


# --------------------------------------------------------------------------- recovery


def test_without_prefer_previous_node_no_uncounted_fault_return() -> None:
    # prefer-previous-node false: the model counts no hits, so the post-pass must not
    # put rank 6 on its cached n10 when that forces fault rank 5 back onto n9 (super pod
    # 1 has only n9 and n10 free); CP-SAT's objective equals evaluate and beats greedy's
    # fault return
    busy = {n for r, n in OLD.items() if r not in (5, 6)} | {"n12", "n13", "n14", "n15"}
    config = dict(SP_CONFIG, **{"prefer-previous-node": False})
    p = problem(scenario(sp_nodes(busy), [sp_job([5, 6], [5])], config, cache=sp_cache()))
    _modelled(p)
    greedy, plan = _cpsat(p)
    assert evaluate(p, greedy.as_mapping()).fault_returns == 1
    assert evaluate(p, plan.as_mapping()).fault_returns == 0
    assert (_names(p, plan) or [])[5:7] == ["n10", "n9"]


def test_ordinary_job_without_prefer_previous_node_no_uncounted_fault_return() -> None:
    # the same for an ordinary job: rank 1's cached node is not chased
    data = job("o", "chip8-node8", tasks=2, npu=8, owner_uid="u", fault_ranks=[0])
    p = problem(scenario([pod_node("x"), pod_node("y")], [data],
                         {"prefer-previous-node": False},
                         cache=[entry("u", 0, "x"), entry("u", 1, "y")]))
    _, plan = _cpsat(p)
    assert _names(p, plan) == ["y", "x"]
