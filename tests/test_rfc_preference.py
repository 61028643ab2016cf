"""RFC fidelity of the origin preference (fault ranks, sub-healthy origins).

* The shared cases (``tests/data/rfc/``, copied from ``shared/cases/rfc-preference``): the
  greedy facts the RFC asks for (950, 850, ordinary; the multilevel greedy cases f5/f5b
  belong to the multilevel module and are checked here for CP-SAT only), and CP-SAT on
  every case: optimal, no BUG note, its objective equal to ``evaluate``.
* One variant per rule with other sizes, several fault ranks or batches.
* Properties: greedy never leaves a fault rank on its old node when moving it to another
  node, or swapping it with another rank of its job, gives a valid placement with no fewer
  hits and fewer fault returns (checked exactly, by enumerating those alternatives); and
  CP-SAT's reported objective always equals ``evaluate`` of the plan it returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.objective import Metrics, evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Scenario
from models.validation import InputError
from solver.engine import solve_cpsat
from solver.facade import solve
from solver.request import SolveRequest
from tests.strategies import problems

DATA = Path(__file__).resolve().parent / "data" / "rfc"
NOW = 1_764_400_000


# --------------------------------------------------------------------------- helpers
def load(name: str) -> Problem:
    return compile_scenario(load_scenario(DATA / f"{name}.yaml"))


def build(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
          cache: dict[str, dict[int, str]], **config: Any) -> Problem:
    """A scenario from plain dicts; ``cache`` maps owner -> rank -> node."""
    entries = [{"owner-uid": owner, "rank": r, "node": n, "updated": NOW - 60}
               for owner, ranks in cache.items() for r, n in sorted(ranks.items())]
    data = {"now": NOW, "config": {"prefer-previous-node": True, **config},
            "nodes": nodes, "jobs": jobs, "affinity-cache": {"entries": entries}}
    return compile_scenario(Scenario.model_validate(data))


def n950(name: str, sp: int, rack: int, free: int = 8, health: str = "healthy") -> dict[str, Any]:
    return {"name": name, "npus": 8, "free": free, "health": health, "super-pod-id": sp,
            "rack-id": rack}


def n850(name: str, sp: int, free: int = 8, health: str = "healthy") -> dict[str, Any]:
    return {"name": name, "npus": 8, "free": free, "health": health, "super-pod-id": sp}


def greedy(problem: Problem) -> tuple[Plan, Metrics]:
    """Greedy's plan, validated, and its metrics."""
    plan = greedy_plan(problem)
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    assert check(problem, placement) == []
    return plan, evaluate(problem, placement)


def names(problem: Problem, plan: Plan, j: int = 0) -> list[str] | None:
    nodes = plan.nodes[j]
    return None if nodes is None else [problem.node_names[int(n)] for n in nodes]


def exact_cpsat(problem: Problem) -> None:
    """CP-SAT (through the facade) is optimal, notes no BUG, and reports ``evaluate``."""
    result = solve(problem, engine="cpsat", time_limit=20.0, workers=1, seed=0,
                   deterministic_time=5.0)
    assert not [n for n in result.notes if n.startswith("BUG")], result.notes
    assert result.status is Status.OPTIMAL
    assert result.objective == evaluate(problem, result.placement).objective
    if result.engine == "cpsat":
        assert result.solver_objective == result.objective


# --------------------------------------------------------------------------- shared cases
# name -> (placed, hits, fault returns, sub-healthy nodes) expected of greedy; None: the
# greedy side is another module's (multilevel).
SHARED: dict[str, tuple[int, int, int, int] | None] = {
    "f1_950_fault_swap": (1, 2, 0, 0),
    "f2_950_single_fault": (1, 0, 1, 0),
    "f3_950_fault_window_steals": (1, 1, 0, 0),
    "f4_950_majority_busy": (1, 1, 0, 0),
    "f5_ml_fault_return": None,
    "f5b_ml_single_fault": None,
    "f6_850_subhealthy_origin_last": (1, 2, 0, 1),
    "f7_850_claim_before_health": (1, 2, 0, 0),
    "f8_ordinary_fault_forced_back": (1, 0, 0, 0),
}


@pytest.mark.parametrize("name", [k for k, v in SHARED.items() if v is not None])
def test_shared_case_greedy_facts(name: str) -> None:
    problem = load(name)
    _, metrics = greedy(problem)
    expected = SHARED[name]
    got = (metrics.placed_jobs, metrics.origin_hits, metrics.fault_returns,
           metrics.subhealthy_nodes)
    assert got == expected


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_case_cpsat_exact(name: str) -> None:
    exact_cpsat(load(name))


def test_f5_cpsat_keeps_the_fault_rank_off_its_node() -> None:
    problem = load("f5_ml_fault_return")
    result = solve(problem, engine="cpsat", time_limit=20.0, workers=1, seed=0,
                   deterministic_time=5.0)
    metrics = evaluate(problem, result.placement)
    assert (metrics.origin_hits, metrics.fault_returns) == (1, 0)
    assert result.status is Status.OPTIMAL and result.objective == metrics.objective


# --------------------------------------------------------------------------- 950 variants
def _rack_job(tasks: int, sp_nodes: int, tp_nodes: int, faults: list[int]) -> dict[str, Any]:
    return {"name": "j", "owner-uid": "u", "policy": "chip8-node8-ra64-sp", "tasks": tasks,
            "npu-per-task": 8, "sp-block": sp_nodes * 8, "ra-block": tp_nodes * 8,
            "fault-ranks": faults}


def test_f1_variant_swap_partner_from_another_window_keeps_every_hit() -> None:
    """tpBlock 4, one rack of 8: window 1 (ranks 4-7) is cached on x4-x7 and rank 7 is a
    fault rank, so its window has nothing but x7 for it; it swaps with the uncached rank 1
    of window 0, not with a cached rank of its own window (6 hits, 0 returns)."""
    nodes = [n950(f"x{i}", 0, 0) for i in range(8)]
    cache = {r: f"x{r}" for r in range(8) if r != 1}
    problem = build(nodes, [_rack_job(8, 8, 4, [7])], {"u": cache}, **{"super-pod-size": 64})
    plan, metrics = greedy(problem)
    assert (metrics.origin_hits, metrics.fault_returns) == (6, 0)
    assert names(problem, plan) == ["x0", "x7", "x2", "x3", "x4", "x5", "x6", "x1"]


def test_f1_variant_two_fault_ranks_trade_nodes() -> None:
    """tpBlock 4, one rack of 12; uncached ranks 0-3 take the four free nodes; ranks 7 and
    11 are fault ranks whose windows are otherwise cached: each takes the other's old node
    (6 hits, 0 returns)."""
    nodes = [n950(f"x{i}", 0, 0) for i in range(12)]
    cache = {r: f"x{r}" for r in range(4, 12)}
    problem = build(nodes, [_rack_job(12, 12, 4, [7, 11])], {"u": cache},
                    **{"super-pod-size": 64})
    plan, metrics = greedy(problem)
    assert (metrics.origin_hits, metrics.fault_returns) == (6, 0)
    got = names(problem, plan)
    assert got is not None and (got[7], got[11]) == ("x11", "x7")


def test_f2_variant_single_fault_rank_prefers_any_other_node() -> None:
    """A 4-NPU single task: its old node is the only least-idle one, but another node fits,
    so it goes there; alone, it returns (preferred away, never banned)."""
    nodes = [n950("a", 0, 0, free=4), n950("b", 0, 0, free=8)]
    job = {"name": "j", "owner-uid": "u", "policy": "chip8-node8-ra64-sp", "tasks": 1,
           "npu-per-task": 4, "fault-ranks": [0]}
    problem = build(nodes, [job], {"u": {0: "a"}}, **{"super-pod-size": 8})
    plan, metrics = greedy(problem)
    assert names(problem, plan) == ["b"] and metrics.fault_returns == 0
    alone = build(nodes[:1], [job], {"u": {0: "a"}}, **{"super-pod-size": 8})
    plan, metrics = greedy(alone)
    assert names(alone, plan) == ["a"] and metrics.fault_returns == 1


def test_f3_variant_moved_windows_never_take_origins() -> None:
    """tpBlock 1, two blocks of 2 in two super pods; in each block the first rank is a fault
    rank whose old node shares the smallest rack with the healthy rank's origin.  Each
    fault rank's window moves to the bigger rack of its super pod instead of taking the
    origin (2 hits, 0 returns)."""
    nodes = [n950("a0", 0, 0), n950("a1", 0, 0)] + [n950(f"c{i}", 0, 1) for i in range(3)]
    nodes += [n950("b0", 1, 2), n950("b1", 1, 2)] + [n950(f"d{i}", 1, 3) for i in range(3)]
    problem = build(nodes, [_rack_job(4, 2, 1, [0, 2])],
                    {"u": {0: "a0", 1: "a1", 2: "b0", 3: "b1"}}, **{"super-pod-size": 16})
    plan, metrics = greedy(problem)
    assert (metrics.origin_hits, metrics.fault_returns) == (2, 0)
    got = names(problem, plan)
    assert got is not None and (got[1], got[3]) == ("a1", "b1")
    assert got[0].startswith("c") and got[2].startswith("d")


def test_f4_variant_busy_origins_do_not_vote_in_a_batch() -> None:
    """Two jobs: the first (higher priority) returns to b0-b2 in super pod 1, the second
    job's block was cached on the same three nodes and on a3 in super pod 0.  Super pod 1
    could still hold the block, but its origins there are busy: the block follows its one
    free origin to super pod 0."""
    nodes = [n950(f"a{i}", 0, i // 2) for i in range(4)]
    nodes += [n950(f"b{i}", 1, 2 + i // 2) for i in range(8)]
    first = {"name": "first", "owner-uid": "u1", "policy": "chip8-node8-ra64-sp", "tasks": 3,
             "npu-per-task": 8, "sp-block": 8, "ra-block": 8, "priority": 5}
    second = {"name": "second", "owner-uid": "u2", "policy": "chip8-node8-ra64-sp",
              "tasks": 4, "npu-per-task": 8, "sp-block": 32, "ra-block": 16}
    cache = {"u1": {0: "b0", 1: "b1", 2: "b2"}, "u2": {0: "b0", 1: "b1", 2: "b2", 3: "a3"}}
    problem = build(nodes, [first, second], cache, **{"super-pod-size": 16})
    plan, metrics = greedy(problem)
    assert names(problem, plan, 0) == ["b0", "b1", "b2"]
    got = names(problem, plan, 1)
    assert got is not None and got[3] == "a3"
    assert metrics.per_job_hits["second"] == 1


# --------------------------------------------------------------------------- 850 variants
def test_f6_variant_each_rank_gets_its_own_subhealthy_origin() -> None:
    """spBlock 4 in a super pod of one healthy and four sub-healthy nodes; ranks 1 and 3
    were on sub-healthy s2 and s0: they get them back (ranks 2 take the remaining one)."""
    nodes = [n850("h0", 0)] + [n850(f"s{i}", 0, health="subhealthy") for i in range(4)]
    problem = build(nodes, [{"name": "j", "owner-uid": "u", "policy": "chip8-node8-sp",
                             "tasks": 4, "npu-per-task": 8, "sp-block": 32}],
                    {"u": {0: "h0", 1: "s2", 3: "s0"}}, **{"super-pod-size": 8})
    plan, metrics = greedy(problem)
    got = names(problem, plan)
    assert got is not None and (got[0], got[1], got[3]) == ("h0", "s2", "s0")
    assert (metrics.origin_hits, metrics.subhealthy_nodes) == (3, 3)


def test_f7_variant_claims_of_blocks_placed_elsewhere_do_not_block_health() -> None:
    """Three blocks of 2: block 0 returns to super pod 0; ranks 3 and 5 (blocks 1 and 2,
    which return to super pods 1 and 2) were on healthy a1, a2 of super pod 0.  Block 0
    takes a healthy node, not the sub-healthy a3."""
    nodes = [n850(f"a{i}", 0) for i in range(3)] + [n850("a3", 0, health="subhealthy")]
    nodes += [n850(f"b{i}", 1) for i in range(2)] + [n850(f"c{i}", 2) for i in range(2)]
    problem = build(nodes, [{"name": "j", "owner-uid": "u", "policy": "chip8-node8-sp",
                             "tasks": 6, "npu-per-task": 8, "sp-block": 16}],
                    {"u": {0: "a0", 2: "b0", 3: "a1", 4: "c0", 5: "a2"}},
                    **{"super-pod-size": 8})
    plan, metrics = greedy(problem)
    got = names(problem, plan)
    assert got is not None and got[0] == "a0" and got[1] in ("a1", "a2")
    assert (metrics.origin_hits, metrics.subhealthy_nodes) == (3, 0)


def test_850_fault_ranks_of_two_blocks_trade_nodes() -> None:
    """spBlock 1, both ranks fault ranks, each cached on the node left for the other: the
    safety net swaps them (a fault rank on its own node is not a hit to keep)."""
    nodes = [n850("n0", 1), n850("n1", 0), n850("n2", 0, free=0)]
    problem = build(nodes, [{"name": "j", "owner-uid": "u", "policy": "chip8-node8-sp",
                             "tasks": 2, "npu-per-task": 8, "sp-block": 8,
                             "fault-ranks": [0, 1]}],
                    {"u": {0: "n1", 1: "n0"}}, **{"super-pod-size": 8, "reserve-nodes": 0})
    plan, metrics = greedy(problem)
    assert names(problem, plan) == ["n0", "n1"] and metrics.fault_returns == 0


# --------------------------------------------------------------------------- ordinary
def test_f8_variant_fault_ranks_choose_before_uncached_ranks() -> None:
    """Six ranks of 4 NPUs; ranks 4 and 5 are fault ranks cached on n0 and n1 (8 free each),
    n2 and n3 have room for one rank each: the fault ranks take n2 and n3, the uncached
    ranks fill the old nodes (0 fault returns)."""
    nodes = [{"name": f"n{i}", "npus": 8, "free": 8 if i < 2 else 4, "health": "healthy"}
             for i in range(4)]
    problem = build(nodes, [{"name": "j", "owner-uid": "u", "policy": "chip8-node8",
                             "tasks": 6, "npu-per-task": 4, "fault-ranks": [4, 5]}],
                    {"u": {4: "n0", 5: "n1"}})
    plan, metrics = greedy(problem)
    got = names(problem, plan)
    assert got is not None and sorted(got[4:]) == ["n2", "n3"]
    assert metrics.fault_returns == 0


# --------------------------------------------------------------------------- properties
def _metrics(problem: Problem, plan: Plan) -> Metrics | None:
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    if check(problem, placement):
        return None
    return evaluate(problem, placement)


def better_local_alternative(problem: Problem, plan: Plan) -> list[int] | None:
    """A valid placement of job 0 that moves one fault rank off its old node (to any node,
    or by swapping with another rank of the job) with no fewer hits and fewer fault
    returns, or None."""
    nodes = plan.nodes[0]
    if nodes is None:
        return None
    job = problem.jobs[0]
    base = _metrics(problem, plan)
    assert base is not None
    for r in range(job.tasks):
        x = int(job.origin[r])
        if not job.fault[r] or x < 0 or int(nodes[r]) != x:
            continue
        options: list[np.ndarray] = []
        for n in range(problem.num_nodes):
            if n != x:
                alt = nodes.copy()
                alt[r] = n
                options.append(alt)
        for q in range(job.tasks):
            if q != r and int(nodes[q]) != x:
                alt = nodes.copy()
                alt[r], alt[q] = alt[q], alt[r]
                options.append(alt)
        for alt in options:
            trial = Plan.empty(problem)
            trial.nodes[0] = alt
            m = _metrics(problem, trial)
            if (m is not None and m.origin_hits >= base.origin_hits
                    and m.fault_returns < base.fault_returns):
                return [int(n) for n in alt]
    return None


ML_SHAPES = (("level1=1", 1), ("level1=2", 2), ("level1=1,level2=2", 2),
             ("level1=2,level2=4", 4))


@st.composite
def fault_scenarios(draw: st.DrawFn, families: tuple[str, ...] = ("ordinary", "850", "950")
                    ) -> Problem:
    """One job (ordinary, 850, 950 or multilevel) on a tiny cluster with sub-healthy and busy
    nodes, most ranks cached, one or two of the cached ranks listed as fault ranks."""
    family = draw(st.sampled_from(families))
    count = draw(st.integers(2, 7))
    health = st.sampled_from(["healthy"] * 5 + ["subhealthy"] * 2 + ["unhealthy"])
    nodes: list[dict[str, Any]] = []
    for i in range(count):
        node: dict[str, Any] = {"name": f"n{i}", "npus": 8, "health": draw(health)}
        if family == "ordinary":
            node["free"] = draw(st.sampled_from([0, 4, 8, 8]))
        else:
            node["free"] = draw(st.sampled_from([0, 8, 8, 8]))
            node["super-pod-id"] = draw(st.integers(0, 1))
            if family == "950":
                # racks 16 apart lie in different UB-memory domains
                node["rack-id"] = node["super-pod-id"] + draw(st.sampled_from([0, 2, 16]))
            if family == "multilevel":
                del node["super-pod-id"]
                node["labels"] = {"huawei.com/topotree": "default",
                                  "rack-id": f"r{draw(st.integers(0, 2))}",
                                  "switch-id": f"w{draw(st.integers(0, 1))}"}
        nodes.append(node)
    config: dict[str, Any] = {}
    if family == "ordinary":
        per_task = draw(st.sampled_from([4, 8]))
        tasks = draw(st.integers(1, 4))
        job: dict[str, Any] = {"policy": "chip8-node8", "tasks": tasks, "npu-per-task": per_task}
    elif family == "850":
        spb = draw(st.integers(1, 2))
        tasks = spb * draw(st.integers(1, 2))
        job = {"policy": "chip8-node8-sp", "tasks": tasks, "npu-per-task": 8,
               "sp-block": spb * 8,
               "super-pod-affinity": draw(st.sampled_from(["hard", "soft"]))}
        config = {"super-pod-size": 8, "reserve-nodes": draw(st.sampled_from([0, 1, 2]))}
    elif family == "multilevel":
        shape, top = draw(st.sampled_from(ML_SHAPES))
        tasks = top * draw(st.integers(1, 2))
        job = {"policy": "multilevel", "tasks": tasks, "npu-per-task": 8,
               "affinity-config": shape}
        config = {"resource-level-config": {"default": {"level1": {"label": "rack-id"},
                                                        "level2": {"label": "switch-id"}}}}
    else:
        tp = draw(st.sampled_from([1, 2]))
        spb = tp * draw(st.integers(1, 2))
        tasks = spb * draw(st.integers(1, 2))
        job = {"policy": "chip8-node8-ra64-sp", "tasks": tasks, "npu-per-task": 8,
               "sp-block": spb * 8, "ra-block": tp * 8,
               "super-pod-affinity": draw(st.sampled_from(["hard", "soft"])),
               "ub-memory": draw(st.booleans())}
        config = {"super-pod-size": 8}
    cache = {r: f"n{draw(st.integers(0, count - 1))}" for r in range(tasks)
             if draw(st.integers(0, 3))}
    assume(cache)
    faults = draw(st.lists(st.sampled_from(sorted(cache)), min_size=1, max_size=2, unique=True))
    job |= {"name": "j", "owner-uid": "u", "fault-ranks": sorted(faults)}
    try:
        return build(nodes, [job], {"u": cache}, **config)
    except InputError:
        assume(False)
        raise


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fault_scenarios())
def test_greedy_never_returns_a_fault_rank_needlessly(problem: Problem) -> None:
    """Exact on the neighbourhood of greedy's answer: single moves and swaps."""
    plan, metrics = greedy(problem)
    event(f"{problem.jobs[0].policy.value}: "
          f"{'placed' if metrics.placed_jobs else 'pending'}, "
          f"{'a fault return' if metrics.fault_returns else 'no fault return'}")
    assert better_local_alternative(problem, plan) is None


def assert_cpsat_exact(problem: Problem) -> None:
    """The raw CP-SAT answer (before the facade compares it with greedy): its objective
    is ``evaluate`` of its plan when optimal, and never above it."""
    weights = resolve_weights(problem, None)
    hint = greedy_plan(problem)
    outcome = solve_cpsat(SolveRequest(
        problem, hint, weights, time_limit=30.0, workers=1, seed=0, deterministic_time=3.0))
    assume(outcome.plan is not None)
    assert outcome.plan is not None and outcome.objective is not None
    assert not [n for n in outcome.notes if n.startswith("BUG")], outcome.notes
    placement = to_placement(problem, outcome.plan, engine="cpsat", status=Status.FEASIBLE)
    assert check(problem, placement) == []
    value = evaluate(problem, placement, weights).objective
    if outcome.status is Status.OPTIMAL:
        assert value == outcome.objective
    else:
        assert value >= outcome.objective


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=10, max_jobs=2))
def test_cpsat_objective_equals_evaluate(problem: Problem) -> None:
    assert_cpsat_exact(problem)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fault_scenarios(families=("ordinary", "850", "950", "multilevel")))
def test_cpsat_objective_equals_evaluate_with_fault_ranks(problem: Problem) -> None:
    assert_cpsat_exact(problem)
