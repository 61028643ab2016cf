"""The origin-first construction (a second CP-SAT warm start, not an upstream strategy)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.generators import GenParams, generate
from heuristics.greedy import greedy_plan
from heuristics.origin_first import origin_first_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.errors import OutOfTime
from models.objective import evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Family, Scenario
from tests.strategies import scenarios

NOW = 1764400000


@pytest.mark.parametrize("family", ["a3", "850", "950", "ordinary", "multilevel"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plans_are_valid_and_keep_other_jobs(family: str, seed: int) -> None:
    problem = compile_scenario(generate(GenParams(family=family, nodes=256, seed=seed,
                                                  jobs=4)))
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    for job in problem.jobs:
        redone = job.family in (Family.ORDINARY, Family.MULTILEVEL) or (
            job.family in (Family.SUPERPOD, Family.RACK) and job.whole_node
            and not job.ub_memory)
        kept, before = plan.nodes[job.index], base.nodes[job.index]
        if not redone and before is not None:
            assert kept is not None and np.array_equal(kept, before)
        if base.nodes[job.index] is not None:  # a placed job stays placed
            assert plan.nodes[job.index] is not None


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mixed_batches_stay_valid(data: st.DataObject) -> None:
    """On any batch the construction's answer is valid and places every job greedy did."""
    problem = compile_scenario(data.draw(scenarios()))
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    for j, nodes in enumerate(base.nodes):
        if nodes is not None:
            assert plan.nodes[j] is not None


def _ordinary_batch(first_tasks: int) -> Scenario:
    """Job A (queue first, 2 ranks, no cache) and job B (2 ranks cached on n2, n3).

    Nodes n0..n3 have 8 free chips each and the upstream score ties them, so greedy gives
    A the first two nodes in name order; with n0, n1 taken by another tenant A takes n2,
    n3 and B loses both its hits.  Origin-first pins B's ranks first.
    """
    nodes = [{"name": f"n{i}", "npus": 8, "free": 0 if i < 2 else 8} for i in range(6)]
    return Scenario.model_validate({
        "now": NOW, "nodes": nodes,
        "affinity-cache": {"entries": [{"owner-uid": "b", "rank": r, "node": n,
                                        "updated": NOW}
                                       for r, n in enumerate(["n2", "n3"])]},
        "jobs": [
            {"name": "A", "owner-uid": "a", "policy": "chip8-node8", "tasks": first_tasks,
             "npu-per-task": 8, "priority": 10},
            {"name": "B", "owner-uid": "b", "policy": "chip8-node8", "tasks": 2,
             "npu-per-task": 8},
        ],
    })


def test_ordinary_cached_ranks_return_before_other_jobs_fill_the_cluster() -> None:
    problem = compile_scenario(_ordinary_batch(2))
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    assert evaluate(problem, base.as_mapping()).origin_hits == 0
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2
    b = problem.job_index["B"]
    assert [problem.node_names[int(n)] for n in plan.nodes[b]] == ["n2", "n3"]  # type: ignore[union-attr]


def test_ordinary_pins_are_released_when_an_earlier_job_would_not_fit() -> None:
    # A needs all four free nodes: pinning B's origins would leave A without room, so B's
    # pins are released and the answer keeps both jobs as greedy placed them (B unplaced)
    problem = compile_scenario(_ordinary_batch(4))
    base = greedy_plan(problem)
    a, b = problem.job_index["A"], problem.job_index["B"]
    assert base.nodes[a] is not None and base.nodes[b] is None
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    assert plan.nodes[a] is not None and plan.nodes[b] is None


def test_a_passed_deadline_stops_the_construction() -> None:
    problem = compile_scenario(_ordinary_batch(2))
    with pytest.raises(OutOfTime):
        origin_first_plan(problem, greedy_plan(problem), deadline=time.perf_counter() - 1.0)


@pytest.mark.parametrize("family", ["a3", "950"])
def test_a_passed_deadline_stops_a_job_between_its_blocks(family: str) -> None:
    # one A3 job of a 65,536-node batch took 35-40 ms of CPU between the construction's
    # deadline checks (one per job): the job's own loops over its blocks and windows,
    # each looking at every super pod or rack for room, check it too
    from heuristics.origin_first import _place_job

    problem = compile_scenario(generate(GenParams(family=family, nodes=256, seed=1,
                                                  jobs=6)))
    wanted = {int(n) for job in problem.jobs for n in job.preferred if n >= 0}
    stopped = 0
    for job in problem.jobs:
        if not job.rules.in_super_pod or not job.whole_node or job.soft:
            continue
        free = problem.free.copy()
        placed = _place_job(problem, job, free, wanted)
        try:
            again = _place_job(problem, job, free, wanted, deadline=time.perf_counter() - 1)
        except OutOfTime:
            stopped += 1
            continue
        assert (placed is None and again is None) or (
            placed is not None and again is not None and (placed == again).all())
    assert stopped > 0


def _names(problem: Problem, plan: Plan, j: int) -> list[str]:
    """The nodes of placed job ``j``, by name."""
    nodes = plan.nodes[j]
    assert nodes is not None, f"job {j} is not placed"
    return [problem.node_names[int(n)] for n in nodes]


def _two_racks(names: list[str], busy: set[str], owner: str, cached: list[str],
               jobs: list[dict[str, Any]],
               config: dict[str, Any] | None = None) -> Problem:
    """Eight 8-NPU nodes in super pod 0, ``names[:4]`` in rack 0 and ``names[4:]`` in
    rack 1, ``busy`` ones full; ``owner``'s rank r cached on ``cached[r]``; ``jobs``."""
    nodes = [{"name": name, "npus": 8, "free": 0 if name in busy else 8, "super-pod-id": 0,
              "rack-id": 0 if k < 4 else 1} for k, name in enumerate(names)]
    return compile_scenario(Scenario.model_validate({
        "now": NOW, "config": config or {"super-pod-size": 16, "reserve-nodes": 0},
        "nodes": nodes,
        "affinity-cache": {"entries": [{"owner-uid": owner, "rank": r, "node": n,
                                        "updated": NOW} for r, n in enumerate(cached)]},
        "jobs": jobs,
    }))


def _lettered_pods(names: list[str], busy: set[str], owner: str, cached: list[str],
                   jobs: list[dict[str, Any]]) -> Problem:
    """8-NPU nodes in super pods of four by the first letter of their names (``p*`` in
    pod 0, ``q*`` in pod 1, ...), ``busy`` ones full; ``owner``'s rank r cached on
    ``cached[r]``; ``jobs``."""
    letters = sorted({name[0] for name in names})
    nodes = [{"name": name, "npus": 8, "free": 0 if name in busy else 8,
              "super-pod-id": letters.index(name[0])} for name in names]
    return compile_scenario(Scenario.model_validate({
        "now": NOW, "config": {"super-pod-size": 4, "reserve-nodes": 0}, "nodes": nodes,
        "affinity-cache": {"entries": [{"owner-uid": owner, "rank": r, "node": n,
                                        "updated": NOW} for r, n in enumerate(cached)]},
        "jobs": jobs,
    }))


def test_windows_with_most_origins_go_home_first() -> None:
    # Rack 0 has three free nodes: a0 (window 0's only free origin; a1 is taken) and b0,
    # b1 (window 1's origins).  Greedy fills window 0 first and spends b0 on it (1 hit);
    # origin first returns window 1 whole and sends window 0 to rack 1 (2 hits).
    problem = _two_racks(["a0", "a1", "b0", "b1", "x0", "x1", "x2", "x3"], {"a1"}, "u",
                         ["a0", "a1", "b0", "b1"], [
        {"name": "J", "owner-uid": "u", "policy": "chip8-node8-ra64-sp", "tasks": 4,
         "npu-per-task": 8, "sp-block": 32, "ra-block": 16}], {"super-pod-size": 16})
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    assert evaluate(problem, base.as_mapping()).origin_hits == 1
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2
    names_of = [problem.node_names[int(n)] for n in plan.nodes[0]]  # type: ignore[union-attr]
    assert names_of[2:] == ["b0", "b1"]


def test_a_left_out_job_gets_a_second_pass_that_places_it_first() -> None:
    # Rack 0 (a0..a3) is the only whole rack; rack 1 has two free nodes (x0, x1).  Job A
    # (queue first, windows of one node) ran on a0, a1 and goes home first, which breaks
    # rack 0, so job B (one window of a whole rack) is left out.  The second pass places
    # B first (rack 0) and A on rack 1: both placed, which scores better than A's hits.
    problem = _two_racks(["a0", "a1", "a2", "a3", "x0", "x1", "x2", "x3"], {"x2", "x3"}, "a",
                         ["a0", "a1"], [
        {"name": "A", "owner-uid": "a", "policy": "chip8-node8-ra64-sp", "tasks": 2,
         "npu-per-task": 8, "sp-block": 16, "ra-block": 8, "priority": 10},
        {"name": "B", "owner-uid": "b", "policy": "chip8-node8-ra64-sp", "tasks": 4,
         "npu-per-task": 8, "sp-block": 32, "ra-block": 32}])
    plan = origin_first_plan(problem, greedy_plan(problem))
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    a, b = problem.job_index["A"], problem.job_index["B"]
    assert sorted(_names(problem, plan, b)) == ["a0", "a1", "a2", "a3"]
    assert sorted(_names(problem, plan, a)) == ["x0", "x1"]


def test_950_windows_without_origins_spare_the_nodes_other_jobs_prefer() -> None:
    # Rack 0 has three free nodes nobody prefers (c0..c2), rack 1 two (d0, d1), on which
    # job B's two ranks (windows of one node) ran.  Job A (queue first, one window of two
    # nodes, no cache) fits rack 1 best and took both of B's nodes (0 hits); the spare
    # pass sends it to rack 0 and B goes home (2 hits).
    problem = _two_racks(["c0", "c1", "c2", "c3", "d0", "d1", "d2", "d3"],
                         {"c3", "d2", "d3"}, "b", ["d0", "d1"], [
        {"name": "A", "owner-uid": "a", "policy": "chip8-node8-ra64-sp", "tasks": 2,
         "npu-per-task": 8, "sp-block": 16, "ra-block": 16, "priority": 10},
        {"name": "B", "owner-uid": "b", "policy": "chip8-node8-ra64-sp", "tasks": 2,
         "npu-per-task": 8, "sp-block": 16, "ra-block": 8}])
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    a, b = problem.job_index["A"], problem.job_index["B"]
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2
    assert sorted(_names(problem, plan, b)) == ["d0", "d1"]
    assert set(_names(problem, plan, a)) <= {"c0", "c1", "c2"}
    assert evaluate(problem, base.as_mapping()).origin_hits < 2


def test_super_pod_blocks_without_origins_spare_the_pods_other_jobs_ran_on() -> None:
    # Super pod 0 has two free nodes (p0, p1), on which job B's block of two ran; super
    # pod 1 three (q0..q2).  Job A (queue first, one block of two nodes, no cache) fits
    # both once and goes to the fuller, lower pod 0, taking B's nodes (0 hits); the spare
    # pass sends A to pod 1 and B goes home (2 hits).  A search still starts from the
    # first pass's plan (a super-pod batch: from the spare plan the search can end lower).
    problem = _lettered_pods(
        ["p0", "p1", "p2", "p3", "q0", "q1", "q2", "q3"], {"p2", "p3", "q3"}, "b",
        ["p0", "p1"], [
            {"name": "A", "owner-uid": "a", "policy": "chip8-node8-sp", "tasks": 2,
             "npu-per-task": 8, "sp-block": 16, "priority": 10},
            {"name": "B", "owner-uid": "b", "policy": "chip8-node8-sp", "tasks": 2,
             "npu-per-task": 8, "sp-block": 16}])
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    a, b = problem.job_index["A"], problem.job_index["B"]
    assert sorted(_names(problem, plan, b)) == ["p0", "p1"]
    assert set(_names(problem, plan, a)) <= {"q0", "q1", "q2"}
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2
    assert evaluate(problem, base.as_mapping()).origin_hits < 2
    start = origin_first_plan(problem, base, search_start=True)
    assert sorted(_names(problem, start, a)) == ["p0", "p1"]


def test_a_soft_job_goes_home_as_a_hard_one() -> None:
    # A soft 950 job (two ranks, windows of one node) ran on a0 and a1; the base plan has
    # it on x0 and x1, as greedy's soft fallback puts a job with no regard for its cache.
    # The construction re-places it block by block like a hard job: both ranks home.
    problem = _two_racks(["a0", "a1", "a2", "a3", "x0", "x1", "x2", "x3"], set(), "s",
                         ["a0", "a1"], [
        {"name": "S", "owner-uid": "s", "policy": "chip8-node8-ra64-sp", "tasks": 2,
         "npu-per-task": 8, "sp-block": 16, "ra-block": 8, "super-pod-affinity": "soft"}])
    s = problem.job_index["S"]
    assert problem.jobs[s].soft
    base = Plan([np.array([problem.node_index["x0"], problem.node_index["x1"]],
                          dtype=np.int32)], [None])
    assert check(problem, to_placement(problem, base, engine="base", status=Status.GREEDY)) == []
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    assert _names(problem, plan, s) == ["a0", "a1"]
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2


def test_a_soft_job_no_super_pod_holds_keeps_its_base_answer() -> None:
    # Soft job S (one block of four nodes) fits no super pod whole (three free nodes in
    # pods 0 and 1, two in pod 2, where hard job H is), so the base plan spills it over
    # p0, p1, q0, q1.  H (queue first) ran on p0, p1: in queue order H goes home and S
    # finds neither a super pod nor its old nodes.  S stays placed, on its base nodes
    # (the pass that places left-out jobs first keeps them for it).
    problem = _lettered_pods(
        ["p0", "p1", "p2", "p3", "q0", "q1", "q2", "q3", "r0", "r1", "r3"],
        {"p3", "q3", "r3"}, "h", ["p0", "p1"], [
            {"name": "H", "owner-uid": "h", "policy": "chip8-node8-sp", "tasks": 2,
             "npu-per-task": 8, "sp-block": 16, "priority": 10},
            {"name": "S", "owner-uid": "s", "policy": "chip8-node8-sp", "tasks": 4,
             "npu-per-task": 8, "sp-block": 32, "super-pod-affinity": "soft"}])
    h, s = problem.job_index["H"], problem.job_index["S"]
    index = problem.node_index
    base = Plan([None, None], [None, None])
    base.nodes[h] = np.array([index["r0"], index["r1"]], dtype=np.int32)
    base.nodes[s] = np.array([index[n] for n in ["p0", "p1", "q0", "q1"]], dtype=np.int32)
    assert check(problem, to_placement(problem, base, engine="base", status=Status.GREEDY)) == []
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    assert _names(problem, plan, s) == ["p0", "p1", "q0", "q1"]
