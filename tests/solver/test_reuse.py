"""The last answer as the next session's warm start (solver/reuse.py, solve(cache=)):
translated by names, kept only where still valid, never worse than a cold solve, and
used by the service for stored clusters (real server on loopback)."""

from __future__ import annotations

from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.placement import Status
from models.plan import to_placement
from models.scenario import Health, Scenario
from solver.doors import example_path
from solver.facade import greedy_plan, solve
from solver.reuse import SolveCache
from solver.service.app import ServiceConfig
from solver.service.client import PlanClient
from tests.solver.service.conftest import running_server

NOTE = "the previous session's answer"


def _scenario(name: str = "superpod-850") -> Scenario:
    return load_scenario(example_path(name))


def _ranks(problem: Problem, plan: object) -> dict[str, tuple[str, ...]]:
    placement = to_placement(problem, plan, engine="x", status=Status.FEASIBLE)  # type: ignore[arg-type]
    return {j.name: tuple(j.ranks[str(r)] for r in range(len(j.ranks)))
            for j in placement.jobs if j.placed}


def test_the_last_answer_is_recalled_by_names_after_reindexing() -> None:
    scenario = _scenario()
    problem = compile_scenario(scenario)
    cache = SolveCache()
    first = solve(problem, engine="auto", time_limit=5, seed=0, deterministic_time=1.0,
                  cache=cache)
    assert cache.placed and cache.engine == first.engine
    # the same cluster with its nodes listed the other way round: every index moves
    reordered = compile_scenario(scenario.model_copy(
        update={"nodes": list(reversed(scenario.nodes))}))
    recalled = cache.recall(reordered, greedy_plan(reordered))
    assert recalled is not None
    assert _ranks(reordered, recalled) == {name: nodes for name, nodes in cache.placed.items()}
    assert check(reordered, to_placement(reordered, recalled, engine="x",
                                         status=Status.FEASIBLE)) == []


def test_jobs_on_nodes_that_went_bad_come_from_the_fallback() -> None:
    scenario = _scenario()
    problem = compile_scenario(scenario)
    cache = SolveCache()
    solve(problem, engine="auto", time_limit=5, seed=0, deterministic_time=1.0, cache=cache)
    victim_job, victim_nodes = next(iter(cache.placed.items()))
    bad = set(victim_nodes[:1])
    changed = scenario.model_copy(update={"nodes": [
        n.model_copy(update={"health": Health.UNHEALTHY}) if n.name in bad else n
        for n in scenario.nodes]})
    problem2 = compile_scenario(changed)
    fallback = greedy_plan(problem2)
    recalled = cache.recall(problem2, fallback)
    if recalled is not None:  # other jobs kept; the victim is not on the bad node
        placement = to_placement(problem2, recalled, engine="x", status=Status.FEASIBLE)
        assert check(problem2, placement) == []
        kept = _ranks(problem2, recalled)
        assert not bad & set(kept.get(victim_job, ()))
    result = solve(problem2, engine="auto", time_limit=5, seed=0, deterministic_time=1.0,
                   cache=cache)
    assert check(problem2, result.placement) == []
    cold = solve(problem2, engine="auto", time_limit=5, seed=0, deterministic_time=1.0)
    assert result.objective >= cold.objective


def test_a_warm_session_is_never_worse_than_a_cold_one() -> None:
    for name in ("superpod-850", "ordinary-8npu"):
        problem = compile_scenario(_scenario(name))
        cache = SolveCache()
        cold = solve(problem, engine="auto", time_limit=5, seed=0, deterministic_time=0.5)
        solve(problem, engine="auto", time_limit=5, seed=0, deterministic_time=0.5,
              cache=cache)
        warm = solve(problem, engine="auto", time_limit=5, seed=0, deterministic_time=0.5,
                     cache=cache)
        assert any(NOTE in n for n in warm.notes), warm.notes
        assert cache.sessions == 2 and cache.reused == 1
        assert warm.objective >= cold.objective
        assert check(problem, warm.placement) == []


def test_greedy_only_solves_leave_the_cache_alone() -> None:
    problem = compile_scenario(_scenario())
    cache = SolveCache()
    solve(problem, engine="greedy", cache=cache)
    assert cache.placed == {} and cache.recall(problem, greedy_plan(problem)) is None


def test_a_stored_cluster_continues_from_its_last_answer_on_a_real_server() -> None:
    scenario = _scenario()
    with running_server(ServiceConfig(warmup=False)) as (url, _), PlanClient(url) as client:
        client.put_cluster("warm", scenario)
        first = client.plan_cluster("warm", time_limit=3, deterministic_time=0.5)
        assert not any(NOTE in n for n in first.notes)
        second = client.plan_cluster("warm", time_limit=3, deterministic_time=0.5)
        assert any(NOTE in n for n in second.notes), second.notes
        assert second.objective is not None and first.objective is not None
        assert second.objective >= first.objective
        node = scenario.nodes[0].name
        client.patch_cluster("warm", {"node-updates": [{"name": node,
                                                         "health": "unhealthy"}]})
        third = client.plan_cluster("warm", time_limit=3, deterministic_time=0.5)
        stored = compile_scenario(client.cluster_scenario("warm"))
        assert check(stored, third) == []
        client.put_cluster("warm", scenario)  # a new body: nothing to continue from
        fourth = client.plan_cluster("warm", time_limit=3, deterministic_time=0.5)
        assert not any(NOTE in n for n in fourth.notes)
