"""The multilevel origin-first passes (part of the origin-first warm start)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from benchmarks.generators import GenParams, generate
from heuristics import origin_first
from heuristics.greedy import greedy_plan
from heuristics.multilevel.first import better_ranks, multilevel_pass
from heuristics.multilevel.guided import guided_layout
from heuristics.multilevel.ranks import relabel_ranks
from heuristics.origin_first import origin_first_plan
from heuristics.state import ClusterState
from models.check import check
from models.compiled import Problem, compile_scenario
from models.errors import OutOfTime
from models.objective import evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Scenario
from models.search_size import search_size
from tests.models.builders import node_indices, one_job_plan

NOW = 1764400000
CONFIG = {"resource-level-config": {"default": {
    "level1": {"label": "rack"}, "level2": {"label": "switch"}}}}


def _node(name: str, rack: str) -> dict[str, Any]:
    return {"name": name, "npus": 16, "free": 16, "labels": {"rack": rack, "switch": "s0"}}


def _problem(cache: list[tuple[str, int, str]], jobs: list[dict[str, Any]]) -> Problem:
    """Racks r0 = {a0, a1} and r1 = {b0, b1} under one switch."""
    return compile_scenario(Scenario.model_validate({
        "now": NOW, "config": CONFIG,
        "nodes": [_node("a0", "r0"), _node("a1", "r0"), _node("b0", "r1"), _node("b1", "r1")],
        "affinity-cache": {"entries": [{"owner-uid": uid, "rank": r, "node": n,
                                        "updated": NOW} for uid, r, n in cache]},
        "jobs": [{"policy": "multilevel", "npu-per-task": 16, **job} for job in jobs],
    }))


def _names(problem: Problem, plan: Plan) -> list[list[str]]:
    return [[problem.node_names[int(n)] for n in nodes] if nodes is not None else []
            for nodes in plan.nodes]


def _valid(problem: Problem, plan: Plan) -> bool:
    return check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []


def test_a_job_with_origins_goes_home_before_an_earlier_job_without() -> None:
    # A (priority 10, no history) comes first in the queue and greedy gives it rack r0,
    # where B's two ranks ran; origin first places B first (r0, 2 hits) and A on r1
    problem = _problem([("uid-b", 0, "a0"), ("uid-b", 1, "a1")], [
        {"name": "A", "owner-uid": "uid-a", "tasks": 2, "affinity-config": "level1=2",
         "priority": 10},
        {"name": "B", "owner-uid": "uid-b", "tasks": 2, "affinity-config": "level1=2"}])
    base = greedy_plan(problem)
    assert evaluate(problem, base.as_mapping()).origin_hits == 0
    plan = origin_first_plan(problem, base)
    assert _valid(problem, plan)
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2
    assert _names(problem, plan) == [["b0", "b1"], ["a0", "a1"]]


def test_holding_back_later_jobs_origins_keeps_them_free() -> None:
    # X (2 origins: rank 0 on b0, rank 1 on a0) goes first and follows rank 0 to r1,
    # taking b1 where Y's one rank ran (1 hit in all); with b1 held back X takes r0
    # (rank 1 home on a0) and Y returns to b1 (2 hits)
    problem = _problem([("uid-x", 0, "b0"), ("uid-x", 1, "a0"), ("uid-y", 0, "b1")], [
        {"name": "Y", "owner-uid": "uid-y", "tasks": 1, "affinity-config": "level1=1",
         "priority": 10},
        {"name": "X", "owner-uid": "uid-x", "tasks": 2, "affinity-config": "level1=2"}])
    base = greedy_plan(problem)
    free = multilevel_pass(problem, base, hold_back=False)
    held = multilevel_pass(problem, base, hold_back=True)
    assert _valid(problem, free) and _valid(problem, held)
    assert evaluate(problem, free.as_mapping()).origin_hits == 1
    assert evaluate(problem, held.as_mapping()).origin_hits == 2
    assert _names(problem, held) == [["b1"], ["a1", "a0"]]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("nodes", [64, 256])
def test_generated_batches_valid_deterministic_and_never_worse(seed: int, nodes: int) -> None:
    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=nodes, seed=seed,
                                                  jobs=6)))
    base = greedy_plan(problem)
    for hold_back in (False, True):
        one = multilevel_pass(problem, base, hold_back)
        two = multilevel_pass(problem, base, hold_back)
        assert _valid(problem, one)
        assert _names(problem, one) == _names(problem, two)
    plan = origin_first_plan(problem, base)
    assert _valid(problem, plan)
    assert (evaluate(problem, plan.as_mapping()).objective
            >= evaluate(problem, base.as_mapping()).objective)
    assert _names(problem, plan) == _names(problem, origin_first_plan(problem, base))


def test_the_construction_leaves_no_reference_cycle() -> None:
    # what the construction builds is freed by reference counting as soon as it is
    # dropped: a cycle (a nested function calling itself through its closure) waits for
    # the cyclic collector instead, whose pass over one 32,768-node construction's
    # 300,000 such objects cost 0.2 s of CPU at the end of a solve, past its deadline
    import gc

    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=256, seed=0,
                                                  jobs=6)))
    base = greedy_plan(problem)
    origin_first_plan(problem, base)  # the problem's derived values are cached from here
    gc.collect()
    gc.disable()
    try:
        origin_first_plan(problem, base)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_relabelling_swaps_whole_groups_and_ranks_inside_a_group() -> None:
    # greedy's order puts group 0 on r0 and group 1 on r1; the ranks ran the other way
    # round (rank 0 on b1, rank 1 on b0, rank 2 on a0, rank 3 on a1): swapping the two
    # level1 groups and the two ranks of group 0 returns all four
    problem = _problem([("u", 0, "b1"), ("u", 1, "b0"), ("u", 2, "a0"), ("u", 3, "a1")], [
        {"name": "J", "owner-uid": "u", "tasks": 4, "affinity-config": "level1=2"}])
    job = problem.jobs[0]
    nodes = node_indices(problem, ["a0", "a1", "b0", "b1"])
    plan = one_job_plan(problem, 0, relabel_ranks(job, nodes))
    assert _valid(problem, plan)
    assert _names(problem, plan) == [["b1", "b0", "a0", "a1"]]
    assert evaluate(problem, plan.as_mapping()).origin_hits == 4
    assert (better_ranks(job, nodes) == plan.nodes[0]).all()


def test_relabelling_moves_a_fault_rank_off_its_old_node() -> None:
    # rank 0 is a fault rank that ran on a0, rank 3 ran on a1: greedy's order returns
    # rank 0 to a0 and misses rank 3; exchanging the two groups fixes both
    problem = compile_scenario(Scenario.model_validate({
        "now": NOW, "config": CONFIG,
        "nodes": [_node("a0", "r0"), _node("a1", "r0"), _node("b0", "r1"), _node("b1", "r1")],
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": 0, "node": "a0", "updated": NOW},
            {"owner-uid": "u", "rank": 3, "node": "a1", "updated": NOW}]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "multilevel", "tasks": 4,
                  "npu-per-task": 16, "affinity-config": "level1=2", "fault-ranks": [0]}],
    }))
    job = problem.jobs[0]
    nodes = node_indices(problem, ["a0", "a1", "b0", "b1"])
    plan = one_job_plan(problem, 0, better_ranks(job, nodes))
    assert _valid(problem, plan)
    assert _names(problem, plan) == [["b0", "b1", "a0", "a1"]]
    metrics = evaluate(problem, plan.as_mapping())
    assert (metrics.origin_hits, metrics.fault_returns) == (1, 0)


def test_guided_layout_sends_each_group_to_its_cached_nodes() -> None:
    # group 0 ran on r1, group 1 on r0: each group returns to its rack, every rank to its
    # node; with a1 busy r0 holds no group of 2 and the layout is refused
    problem = _problem([("u", 0, "b1"), ("u", 1, "b0"), ("u", 2, "a0"), ("u", 3, "a1")], [
        {"name": "J", "owner-uid": "u", "tasks": 4, "affinity-config": "level1=2"}])
    job = problem.jobs[0]
    layout = guided_layout(problem, job, ClusterState.initial(problem))
    assert layout is not None
    plan = one_job_plan(problem, 0, layout)
    assert _valid(problem, plan)
    assert _names(problem, plan) == [["b1", "b0", "a0", "a1"]]
    busy = ClusterState.initial(problem)
    busy.free[list(problem.node_names).index("a1")] = 0
    assert guided_layout(problem, job, busy) is None  # r0 holds no group of 2 any more


@pytest.mark.parametrize("seed", range(4))
def test_guided_passes_are_valid_and_deterministic(seed: int) -> None:
    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=256, seed=seed,
                                                  jobs=6)))
    base = greedy_plan(problem)
    for hold_back in (False, True):
        for guided in (False, True):
            one = multilevel_pass(problem, base, hold_back, guided=guided)
            assert _valid(problem, one)
            assert _names(problem, one) == _names(
                problem, multilevel_pass(problem, base, hold_back, guided=guided))


def test_a_passed_deadline_stops_the_passes_and_keeps_the_base() -> None:
    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=256, seed=1,
                                                  jobs=6)))
    base = greedy_plan(problem)
    with pytest.raises(OutOfTime):
        multilevel_pass(problem, base, False, deadline=time.perf_counter() - 1.0)
    job = next(job for job in problem.jobs
               if guided_layout(problem, job, ClusterState.initial(problem)) is not None)
    assert guided_layout(problem, job, ClusterState.initial(problem),
                         deadline=time.perf_counter() - 1.0) is None


def test_a_deadline_passed_during_a_pass_skips_scoring_its_plan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # scoring and checking a pass's plan cost as much as a short pass (about 8 ms of CPU
    # at 32,768 nodes): past the deadline the construction stops before them
    import heuristics.multilevel.first as first

    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=256, seed=1,
                                                  jobs=6)))
    base = greedy_plan(problem)
    clock = [0.0]
    relabel = first.relabel_plan

    def slow_relabel(problem: Problem, plan: Plan) -> Plan:
        clock[0] = 10.0  # the first pass ends after the deadline
        return relabel(problem, plan)

    scored: list[Plan] = []
    improves = origin_first._improves
    monkeypatch.setattr(first, "relabel_plan", slow_relabel)
    monkeypatch.setattr(origin_first.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(origin_first, "_improves",
                        lambda *a: scored.append(a[1]) or improves(*a))
    best, start = origin_first._multilevel_plans(problem, base, 5.0, None)
    assert scored == [] and best is base and start is base
    origin_first._multilevel_plans(problem, base, None, None)  # no deadline: all scored
    assert len(scored) == len(origin_first.MULTILEVEL_PASSES)


@pytest.mark.parametrize("old_start", [True, False])
def test_small_multilevel_batches_search_from_the_older_start(
        old_start: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # full-mode batches: CP-SAT starts from the construction without its multilevel part
    # (solver.phases.FULL_MODEL_OLD_START); the construction stays the fallback.  The
    # facade chooses that start and hands it to the search, from the one construction it
    # ran (the search builds none of its own)
    import heuristics.origin_first as origin_first
    import solver.engine as engine
    import solver.phases as phases
    from heuristics.greedy import greedy_plan
    from models.objective import evaluate, resolve_weights
    from solver.facade import solve
    from solver.request import SolveRequest

    problem = _problem([("uid-b", 0, "a0"), ("uid-b", 1, "a1")], [
        {"name": "A", "owner-uid": "uid-a", "tasks": 2, "affinity-config": "level1=2",
         "priority": 10},
        {"name": "B", "owner-uid": "uid-b", "tasks": 2, "affinity-config": "level1=2"}])
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    blocks = origin_first.origin_first_plan(problem, greedy, weights=weights, multilevel=False)
    whole = origin_first.origin_first_plan(problem, greedy, weights=weights)
    starts: list[Any] = []
    constructions: list[int] = []
    real = engine.solve_cpsat
    real_block_plan = origin_first._block_plan

    def spy(request: SolveRequest) -> Any:
        starts.append(request.warm_start)
        return real(request)

    def counted(*args: Any, **kwargs: Any) -> Any:
        constructions.append(1)
        return real_block_plan(*args, **kwargs)

    monkeypatch.setattr(engine, "solve_cpsat", spy)
    monkeypatch.setattr(origin_first, "_block_plan", counted)
    monkeypatch.setattr(phases, "FULL_MODEL_OLD_START", old_start)
    result = solve(problem, engine="cpsat", time_limit=20.0, workers=1, seed=0)
    assert result.origin_first_objective is not None
    assert result.metrics.origin_hits == 2
    assert len(constructions) == 1  # the construction ran once
    expected = blocks if old_start else whole
    assert starts[0] is not None
    assert [None if n is None else n.tolist() for n in starts[0].nodes] == [
        None if n is None else n.tolist() for n in expected.nodes]
    beat = (evaluate(problem, blocks.as_mapping(), weights).objective
            > evaluate(problem, greedy.as_mapping(), weights).objective)
    assert ("warm start: the origin-first construction beat greedy" in result.notes) is (
        old_start and beat)


def test_the_smallest_jobs_first_pass_is_part_of_the_construction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # multilevel, 256 nodes, 6 jobs, seed 3: placing the large jobs first (most reachable
    # origins first) keeps a small job off the level domains of its cached nodes; the
    # guided pass that places the jobs of fewest ranks first wins more than every older
    # pass, and the construction (which re-places the other jobs first) keeps it: 13,739
    # more than the construction without that pass
    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=256, seed=3,
                                                  jobs=6)))
    base = greedy_plan(problem)
    older = max(evaluate(problem, multilevel_pass(problem, base, hold_back,
                                                  guided=guided).as_mapping()).objective
                for hold_back in (False, True) for guided in (False, True))
    smallest = multilevel_pass(problem, base, False, guided=True, smallest_first=True)
    assert _valid(problem, smallest)
    assert evaluate(problem, smallest.as_mapping()).objective > older
    # where the multilevel model is small the pass gives the answer, not
    # the search's start (the start of the older passes) ...
    assert not origin_first.smallest_first_pays(problem)
    default = origin_first_plan(problem, base)
    default_start = origin_first_plan(problem, base, search_start=True)
    # ... and where it is large, both
    monkeypatch.setattr(origin_first, "SMALLEST_FIRST_MIN_PAIRS",
                        search_size(problem).tree_pairs)
    plan = origin_first_plan(problem, base)
    assert _valid(problem, plan) and _valid(problem, default)
    assert _names(problem, origin_first_plan(problem, base, search_start=True)) == _names(
        problem, plan)
    assert _names(problem, default) == _names(problem, plan)
    monkeypatch.setattr(origin_first, "MULTILEVEL_PASSES", tuple(
        p for p in origin_first.MULTILEVEL_PASSES if not p[2]))
    without = origin_first_plan(problem, base)
    assert _names(problem, default_start) == _names(problem, without)
    assert (evaluate(problem, plan.as_mapping()).objective
            > evaluate(problem, without.as_mapping()).objective)


def test_where_the_smallest_jobs_first_pass_pays_it_runs_before_the_relabelling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a deadline that falls after the first pass keeps what that pass found: where the
    # smallest-first pass is the search's start (it pays) it is that pass's plan, not the
    # base plan (the relabelling, first before, is where the deadline falls here)
    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=256, seed=3,
                                                  jobs=6)))
    base = greedy_plan(problem)
    smallest = multilevel_pass(problem, base, False, guided=True, smallest_first=True)
    monkeypatch.setattr(origin_first, "SMALLEST_FIRST_MIN_PAIRS",
                        search_size(problem).tree_pairs)

    def deadline_passed(*_: object) -> Plan:
        raise OutOfTime

    monkeypatch.setattr("heuristics.multilevel.first.relabel_plan", deadline_passed)
    plan = origin_first_plan(problem, base)
    assert _names(problem, plan) == _names(problem, smallest) != _names(problem, base)
