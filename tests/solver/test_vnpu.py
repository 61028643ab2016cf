"""CP-SAT on vNPU jobs: chip-level model, objective equal to ``evaluate()``, warm start from
greedy, the facade joining vNPU and other jobs; hypothesis over mixed clusters."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heuristics.vnpu import greedy_vnpu
from models.check import check
from models.compiled import Problem
from models.objective import evaluate, resolve_weights
from models.placement import PlacementFile, Status
from models.vnpu import VnpuPlan, vnpu_job_placements, vnpu_objective
from solver.facade import solve
from solver.model.vnpu import solve_vnpu_cpsat
from tests.models.builders import entry, job, node, problem
from tests.models.test_vnpu import doc, vjob, vnode_row


def vnpu_only(prob: Problem, plan: VnpuPlan) -> PlacementFile:
    return PlacementFile.model_construct(engine="t", jobs=vnpu_job_placements(prob, plan))


def run_cpsat(prob: Problem) -> tuple[VnpuPlan, int, Status | None]:
    weights = resolve_weights(prob)
    outcome = solve_vnpu_cpsat(prob, weights, greedy_vnpu(prob), time_limit=10.0, workers=1,
                               seed=0, deterministic_time=5.0)
    assert outcome.plan is not None and outcome.objective is not None
    return outcome.plan, outcome.objective, outcome.status


def score(prob: Problem, plan: VnpuPlan) -> int:
    w = resolve_weights(prob)
    return vnpu_objective(prob, plan, w.vnpu_placed, w.origin_hit, w.subhealthy)


def test_cpsat_places_what_greedy_cannot() -> None:
    """Greedy's least-free-first puts the 1-core slice on the only node with an untouched
    chip; CP-SAT sends it to the roomier cut node and places the whole card too."""
    cut = vnode_row("v2", npus=2, chips=[{"id": 0, "free-cores": 6, "free-cpus": 5,
                                          "segmented": True},
                                         {"id": 1, "free-cores": 6, "free-cpus": 5,
                                          "segmented": True}])
    prob = problem(doc([vnode_row("v1", npus=1), cut], [vjob("a", cores=1),
                                                        vjob("b", cores=8)]))
    greedy = greedy_vnpu(prob)
    assert greedy.nodes[1] is None
    plan, objective, status = run_cpsat(prob)
    assert status is Status.OPTIMAL
    assert plan.nodes[0] == [1] and plan.nodes[1] == [0]
    placement = vnpu_only(prob, plan)
    assert check(prob, placement) == []
    assert objective == score(prob, plan) == evaluate(prob, placement).objective
    assert objective > score(prob, greedy)


def test_objective_equals_evaluate_with_hits_downgrade_and_subhealthy() -> None:
    sub = vnode_row("v1", npus=1, chips=[{"id": 0, "free-cores": 2, "free-cpus": 1,
                                          "segmented": True}])
    sub["health"] = "subhealthy"
    # b (a slice) and c (a whole card) may not share v3 (order-free one-template rule)
    nodes = [sub, vnode_row("v2", npus=1), vnode_row("v3", kind="910B3", npus=2),
             vnode_row("v4", kind="910B3", npus=1)]
    jobs = [vjob("a", tasks=2, cores=2, vnpu_level="high", owner_uid="ua"),
            vjob("b", cores=5), vjob("c", cores=20, priority=3)]
    prob = problem(doc(nodes, jobs, cache=[entry("ua", 0, "v1"), entry("ua", 1, "v2")]))
    plan, objective, status = run_cpsat(prob)
    assert status is Status.OPTIMAL
    placement = vnpu_only(prob, plan)
    assert check(prob, placement) == []
    metrics = evaluate(prob, placement)
    assert objective == metrics.objective
    assert metrics.placed_jobs == 3 and metrics.origin_hits == 2
    assert plan.downgraded[0] == [0]  # (2,2) fits v1 only downgraded: the hit is worth it
    assert objective >= score(prob, greedy_vnpu(prob))


def test_facade_joins_vnpu_and_ordinary_jobs() -> None:
    data = doc([node("o1"), node("o2"), vnode_row("v1", npus=2), vnode_row("v2", npus=2)],
               [vjob("infer", tasks=3, cores=4), vjob("card", cores=16)],
               jobs=[job("train", tasks=2, npu=8)])
    prob = problem(data)
    for engine in ("greedy", "auto", "cpsat"):
        result = solve(prob, engine=engine, time_limit=10.0, workers=1, seed=0,
                       deterministic_time=2.0)
        assert check(prob, result.placement) == []
        metrics = evaluate(prob, result.placement)
        assert result.objective == metrics.objective == result.placement.objective
        assert metrics.placed_jobs == 3
        assert {j.name for j in result.placement.jobs} == {"infer", "card", "train"}
        card = result.placement.job("card")
        assert card is not None and len(card.chips["0"]) == 2
        if engine == "greedy":
            assert result.status is Status.GREEDY
    only = problem(doc([vnode_row("v1", npus=1)], [vjob("a", cores=2)]))
    result = solve(only, engine="auto", time_limit=5.0, workers=1, seed=0)
    assert check(only, result.placement) == [] and result.metrics.placed_jobs == 1


# ----------------------------------------------------------------- hypothesis

KINDS = [("Ascend310P", [1, 2, 4, 8, 16]), ("910B3", [5, 10, 20]), ("910B4", [5, 10])]


@st.composite
def mixed_clusters(draw: st.DrawFn) -> dict[str, Any]:
    """Small clusters of ordinary and vNPU nodes with random chip states, jobs and cache."""
    nodes: list[dict[str, Any]] = [node(f"o{i}", free=draw(st.sampled_from([0, 4, 8])))
                                   for i in range(draw(st.integers(0, 2)))]
    kind, sizes = draw(st.sampled_from(KINDS))
    full = {"Ascend310P": (8, 7), "910B3": (20, 6), "910B4": (20, 6)}[kind]
    for i in range(draw(st.integers(1, 3))):
        chips = []
        for c in range(draw(st.integers(1, 2))):
            cut = draw(st.booleans())
            cores = draw(st.integers(0, full[0])) if cut else full[0]
            cpus = draw(st.integers(0, full[1])) if cut else full[1]
            chips.append({"id": c, "free-cores": cores, "free-cpus": cpus, "segmented": cut,
                          "dvpp": draw(st.sampled_from(["yes", "null", "no"])) if cut else "yes",
                          "unstable": draw(st.booleans()) if cut else False})
        row = vnode_row(f"v{i}", kind=kind, npus=len(chips), chips=chips)
        row["health"] = draw(st.sampled_from(["healthy", "healthy", "subhealthy", "unhealthy"]))
        nodes.append(row)
    vjobs = []
    cache = []
    names = [n["name"] for n in nodes]
    for j in range(draw(st.integers(1, 3))):
        tasks = draw(st.integers(1, 3))
        extra: dict[str, Any] = {}
        if kind == "Ascend310P":
            extra["vnpu_level"] = draw(st.sampled_from(["low", "high"]))
            cores = draw(st.sampled_from(sizes))
            if cores == 4:
                extra["vnpu_dvpp"] = draw(st.sampled_from(["null", "yes", "no"]))
        else:
            cores = draw(st.sampled_from(sizes))
        vjobs.append(vjob(f"j{j}", tasks=tasks, cores=cores, owner_uid=f"u{j}",
                          priority=draw(st.integers(0, 1)), **extra))
        for r in range(tasks):
            if draw(st.booleans()):
                cache.append(entry(f"u{j}", r, draw(st.sampled_from(names))))
    jobs = [job("t", tasks=1, npu=4)] if nodes[0]["name"].startswith("o") else []
    return doc(nodes, vjobs, jobs=jobs, cache=cache)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mixed_clusters())
def test_every_answer_is_valid_and_scored_exactly(data: dict[str, Any]) -> None:
    prob = problem(data)
    greedy = greedy_vnpu(prob)
    greedy_placement = vnpu_only(prob, greedy)
    assert [v for v in check(prob, greedy_placement) if v.job != "t"] == []
    result = solve(prob, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                   deterministic_time=1.0)
    assert check(prob, result.placement) == []
    assert result.objective == evaluate(prob, result.placement).objective
    plan, objective, _ = run_cpsat(prob)
    placement = vnpu_only(prob, plan)
    assert [v for v in check(prob, placement) if v.job != "t"] == []
    assert objective == score(prob, plan) >= score(prob, greedy)
    if not prob.jobs:
        assert objective == evaluate(prob, placement).objective


def test_model_not_built_when_the_budget_cannot_pay_for_it() -> None:
    """Building cannot be interrupted: a budget below twice the estimated build time keeps
    greedy's vNPU answer, with a note (the facade still returns a valid placement)."""
    prob = problem(doc([vnode_row("v1", npus=2)], [vjob("a", cores=1)]))
    outcome = solve_vnpu_cpsat(prob, resolve_weights(prob), greedy_vnpu(prob),
                               time_limit=1e-6)
    assert outcome.plan is None and "not built" in outcome.notes[0]
    result = solve(prob, engine="cpsat", time_limit=0.01, workers=1, seed=0)
    assert check(prob, result.placement) == [] and result.metrics.placed_jobs == 1


def test_model_building_is_cancelled_at_the_deadline(monkeypatch: Any) -> None:
    """Building checks the budget at checkpoints: past it, greedy's answer stays (here a
    deadline already passed when building starts)."""
    import solver.model.vnpu as vnpu_model
    from solver.model.cancel import CancelToken

    monkeypatch.setattr(vnpu_model, "CancelToken", lambda deadline: CancelToken(deadline - 1e6))
    prob = problem(doc([vnode_row("v1", npus=2)], [vjob("a", cores=1)]))
    outcome = solve_vnpu_cpsat(prob, resolve_weights(prob), greedy_vnpu(prob), time_limit=5.0)
    assert outcome.plan is None and "cancelled" in outcome.notes[0]
