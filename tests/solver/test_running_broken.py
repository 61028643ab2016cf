"""A partly running job whose running ranks already break a hard rule of
its own (a rack window in two racks, a block in two super pods, a UB-memory job in two
domains, a multilevel group in two domains, a rank outside the job's super pods, racks or
topotree) can never be completed.  Every engine leaves it pending with a reason naming
the broken rule and places the other jobs; before, greedy's answer for such a job failed
the validator and every engine ended in an internal error.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from models.check import check, running_rank_violations
from models.compiled import Problem, compile_scenario
from models.io import scenario_from_data
from models.validation import InputError
from solver.facade import solve
from tests.models.builders import job, pod_node, problem, scenario
from tests.solver.answers import assert_pod_level_answers
from tests.strategies import ALL_FAMILIES, problems, running_ranks_document

ENGINES = ("greedy", "cpsat", "auto")
OTHER = job("other", "chip8-node8")
TREES = {"default": {"level1": {"label": "rack"}, "level2": {"label": "sw"}}}


def _pods() -> list[dict[str, Any]]:
    """Super pod 0: racks 0, 1 and 17 (UB-memory domain 1); super pod 1: rack 2; ``x``
    in no super pod, ``y`` in super pod 0 but no rack.  ``*-n0`` run ranks (free 0)."""
    out = []
    for name, pod, rack, count in (("r0", 0, 0, 4), ("r1", 0, 1, 4), ("u", 0, 17, 1),
                                   ("p1", 1, 2, 2), ("x", None, None, 1), ("y", 0, None, 1)):
        for i in range(count):
            out.append(pod_node(f"{name}-n{i}", pod, rack, free=0 if i == 0 else 8))
    return out


def _ml_nodes() -> list[dict[str, Any]]:
    rows = (("a0", {"rack": "r0", "sw": "s0"}, 0), ("a1", {"rack": "r0", "sw": "s0"}, 8),
            ("b0", {"rack": "r1", "sw": "s0"}, 0), ("b1", {"rack": "r1", "sw": "s0"}, 8),
            ("c0", {"sw": "s0"}, 0),
            ("d0", {"huawei.com/topotree": "other", "rack": "r0", "sw": "s0"}, 0),
            ("e0", {"rack": "r2", "sw": "s0"}, 8), ("e1", {"rack": "r2", "sw": "s0"}, 8))
    return [pod_node(name, labels=labels, free=free) for name, labels, free in rows]


def _rack(running: dict[str, str], sp_block: int = 32, **extra: Any) -> dict[str, Any]:
    return job("train", "chip8-node8-ra64-sp", tasks=4, sp_block=sp_block, ra_block=16,
               pod_rescheduling=True, running_ranks=running, **extra)


#: (case, scenario builder, the rule the reason names)
CASES: dict[str, tuple[Any, str]] = {
    # rack window 0 fully running, in racks 0 and 1
    "950-window-in-two-racks": (lambda s: scenario(
        _pods(), [_rack({"0": "r0-n0", "1": "r1-n0"}, pending_sessions=s), OTHER],
        {"super-pod-size": 16, "reserve-nodes": 0}), "rack-window"),
    "950-block-in-two-super-pods": (lambda s: scenario(
        _pods(), [_rack({"0": "r0-n0", "1": "p1-n0"}, sp_block=16, pending_sessions=s),
                  OTHER], {"super-pod-size": 16, "reserve-nodes": 0}), "super-pod"),
    "950-rank-in-no-rack": (lambda s: scenario(
        _pods(), [_rack({"0": "r0-n0", "2": "y-n0"}, pending_sessions=s), OTHER],
        {"super-pod-size": 16, "reserve-nodes": 0}), "rack-window"),
    "950-rank-in-no-super-pod": (lambda s: scenario(
        _pods(), [_rack({"0": "r0-n0", "2": "x-n0"}, pending_sessions=s), OTHER],
        {"super-pod-size": 16, "reserve-nodes": 0}), "super-pod"),
    "950-ub-memory-two-domains": (lambda s: scenario(
        _pods(), [_rack({"0": "r0-n0", "2": "u-n0"}, ub_memory=True, pending_sessions=s),
                  OTHER], {"super-pod-size": 16, "reserve-nodes": 0}), "ub-memory"),
    "850-rank-in-no-super-pod": (lambda s: scenario(
        _pods(), [job("train", "chip8-node8-sp", tasks=4, sp_block=32, pod_rescheduling=True,
                      pending_sessions=s, running_ranks={"0": "r0-n0", "1": "x-n0"}), OTHER],
        {"super-pod-size": 16, "reserve-nodes": 0}), "super-pod"),
    "multilevel-group-in-two-racks": (lambda s: scenario(
        _ml_nodes(), [job("train", "multilevel", tasks=4, affinity_config="level1=2,level2=4",
                          pod_rescheduling=True, pending_sessions=s,
                          running_ranks={"0": "a0", "1": "b0"}), OTHER],
        {"resource-level-config": TREES}), "multilevel"),
    "multilevel-rank-without-label": (lambda s: scenario(
        _ml_nodes(), [job("train", "multilevel", tasks=4, affinity_config="level1=2,level2=4",
                          pod_rescheduling=True, pending_sessions=s,
                          running_ranks={"0": "a0", "2": "c0"}), OTHER],
        {"resource-level-config": TREES}), "topotree"),
}


@pytest.mark.parametrize("sessions", [0, 3, 6])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_running_ranks_that_break_a_rule_leave_the_job_pending(case: str, engine: str,
                                                                sessions: int) -> None:
    build, rule = CASES[case]
    p = problem(build(sessions))
    result = solve(p, engine=engine, time_limit=20.0, workers=1, seed=0,
                   deterministic_time=2.0)
    assert check(p, result.placement) == []
    by_name = {j.name: j for j in result.placement.jobs}
    assert not by_name["train"].placed
    reason = by_name["train"].reason or ""
    assert "running ranks already break a hard rule" in reason and f"[{rule}]" in reason
    assert by_name["other"].placed


def test_a_soft_950_job_may_keep_a_window_across_racks() -> None:
    """With ``super-pod-affinity: soft`` windows may span racks: nothing is broken."""
    p = problem(scenario(_pods(), [_rack({"0": "r0-n0", "1": "r1-n0"},
                                         super_pod_affinity="soft"), OTHER],
                         {"super-pod-size": 16, "reserve-nodes": 0}))
    assert running_rank_violations(p, 0) == []
    result = solve(p, engine="greedy", time_limit=20.0, workers=1, seed=0)
    assert check(p, result.placement) == []
    assert all(j.placed for j in result.placement.jobs)


def _arbitrary_running(p: Problem, seed: int, sessions: int) -> Problem | None:
    """One whole-node job of ``p`` with running ranks on arbitrary free whole nodes of
    its size (drawn without regard to its structure); ``None`` when none can."""
    rng = random.Random(seed)
    chosen = [v for v in p.jobs if v.tasks >= 2 and v.whole_node]
    if not chosen:
        return None
    view = rng.choice(chosen)
    nodes = [n for n in range(p.num_nodes)
             if p.npus[n] == view.npu_per_task and p.free[n] == p.npus[n]]
    count = min(rng.randint(1, view.tasks - 1), len(nodes))
    if count == 0:
        return None
    running = dict(zip(sorted(rng.sample(range(view.tasks), count)), rng.sample(nodes, count),
                       strict=True))  # on whole free nodes of the job's size: now full
    data = running_ranks_document(p, view.index, running, sessions=sessions, pod=True)
    try:
        return compile_scenario(scenario_from_data(data, "<hypothesis>"), "<hypothesis>")
    except InputError:
        return None


@settings(max_examples=30, deadline=None)
@given(p=problems(families=ALL_FAMILIES, max_nodes=20, max_jobs=3),
       seed=st.integers(0, 2**31 - 1), sessions=st.sampled_from([0, 3, 6, 12]))
def test_arbitrary_running_ranks_never_make_an_invalid_answer(p: Problem, seed: int,
                                                              sessions: int) -> None:
    partly = _arbitrary_running(p, seed, sessions)
    assume(partly is not None)
    assert partly is not None
    for result in assert_pod_level_answers(partly, time_limit=10.0, deterministic_time=1.0):
        for view in partly.jobs:
            if view.partly_running and running_rank_violations(partly, view.index):
                answer = result.placement.jobs[view.index]
                assert not answer.placed
                assert "running ranks already break a hard rule" in (answer.reason or "")
