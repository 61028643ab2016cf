"""The last answer as the next session's warm start (solver/reuse.py, solve(cache=)):
translated by names, kept only where still valid, never worse than a cold solve, and
used by the service for stored clusters (real server on loopback)."""

from __future__ import annotations

import numpy as np

from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Health, Scenario
from solver.doors import example_path
from solver.facade import greedy_plan, solve
from solver.model.podscope import within_scope
from solver.reuse import SolveCache
from solver.service.app import ServiceConfig
from solver.service.client import PlanClient
from tests.solver.service.conftest import running_server

NOTE = "the previous session's answer"


def _scenario(name: str = "superpod-850") -> Scenario:
    return load_scenario(example_path(name))


def _ranks(problem: Problem, plan: object) -> dict[str, dict[int, str]]:
    placement = to_placement(problem, plan, engine="x", status=Status.FEASIBLE)  # type: ignore[arg-type]
    return {j.name: {int(r): n for r, n in j.ranks.items()} for j in placement.jobs
            if j.placed}


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
    bad = {victim_nodes[min(victim_nodes)]}
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
        assert not bad & set(kept.get(victim_job, {}).values())
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


# --------------------------------------------------------------- partly running jobs


def _partly(sessions: int, cache_node: str | None = None) -> Problem:
    """The 950 job whose block 1 lost every pod (:func:`rack_block_lost`), compiled."""
    from tests.models.builders import problem, rack_block_lost

    return problem(rack_block_lost(sessions))


def _solve(problem: Problem, cache: SolveCache) -> object:
    return solve(problem, engine="cpsat", time_limit=30, workers=1, seed=0,
                 deterministic_time=0.5, cache=cache)


def test_a_partly_running_jobs_pending_ranks_are_recalled_by_rank() -> None:
    """A partly running job lists only its pending ranks (4..7 here, not 0..3): they
    are remembered by rank id and recalled around the running ranks."""
    problem = _partly(6)
    cache = SolveCache()
    first = _solve(problem, cache)
    assert first.plan.nodes[0] is not None  # type: ignore[attr-defined]
    assert sorted(cache.placed["r"]) == [4, 5, 6, 7]
    recalled = cache.recall(problem, greedy_plan(problem))
    assert recalled is not None and recalled.nodes[0] is not None
    assert [problem.node_names[int(n)] for n in recalled.nodes[0][:4]] == [
        "r0n0", "r0n1", "r0n2", "r0n3"]
    second = _solve(problem, cache)
    assert any(NOTE in n for n in second.notes)  # type: ignore[attr-defined]
    assert check(problem, second.placement) == []  # type: ignore[attr-defined]


def test_a_recalled_answer_that_breaks_the_jobs_stage_now_is_not_used() -> None:
    """Session 1 at 6 pending sessions places block 1 in super pod 0 (allowed from 6);
    the job's stage drops to 3 (its pods were recreated, the count restarted): block 1
    must stay in its old super pod 1, which is full.  The validator accepts the
    remembered answer (it does not know the stage rules) and it scores higher than
    anything allowed, so without the stage check the session would return it."""
    cache = SolveCache()
    first = _solve(_partly(6), cache)
    assert first.plan.nodes[0] is not None  # type: ignore[attr-defined]
    now = _partly(3)
    remembered = cache._nodes(now, now.jobs[0])
    assert remembered is None  # the stage rule: block 1's old super pod only
    stale = _partly(6)
    kept = cache._nodes(stale, stale.jobs[0])
    assert kept is not None and not within_scope(now, now.jobs[0], kept)
    assert check(now, to_placement(now, Plan([kept], [None]), engine="x",
                                   status=Status.FEASIBLE)) == []  # the validator accepts
    assert cache.recall(now, greedy_plan(now)) is None
    second = _solve(now, cache)
    assert second.plan.nodes[0] is None  # type: ignore[attr-defined]
    assert not any(NOTE in n for n in second.notes)  # type: ignore[attr-defined]


def test_a_stored_clusters_job_whose_stage_dropped_is_not_given_its_last_answer() -> None:
    """The same on a real server: the job is replaced by a PATCH (removed and submitted
    again with 3 pending sessions); the cluster's next plan does not return the
    remembered answer the validator would accept."""
    from tests.models.builders import rack_block_lost

    data = rack_block_lost(6)
    with running_server(ServiceConfig(warmup=False)) as (url, _), PlanClient(url) as client:
        client.put_cluster("stage", data)
        first = client.plan_cluster("stage", engine="cpsat", time_limit=10,
                                    deterministic_time=0.5)
        assert first.jobs[0].placed
        again = dict(data["jobs"][0], **{"pending-sessions": 3})
        client.patch_cluster("stage", {"jobs-removed": ["r"], "jobs-submitted": [again]})
        second = client.plan_cluster("stage", engine="cpsat", time_limit=10,
                                     deterministic_time=0.5)
        assert not second.jobs[0].placed, second.jobs[0]
        assert not any(NOTE in n for n in second.notes)
        assert check(compile_scenario(client.cluster_scenario("stage")), second) == []


def test_within_scope_keeps_running_ranks_and_refuses_unmodelled_jobs() -> None:
    from tests.models.builders import SP_CONFIG, job, problem, scenario, sp_nodes

    p = _partly(6)
    nodes = greedy_plan(p).nodes[0]
    assert nodes is not None and within_scope(p, p.jobs[0], np.asarray(nodes))
    moved = np.asarray(nodes, dtype=np.int64).copy()
    moved[0] = p.node_index["r1n0"]  # a running rank elsewhere
    assert not within_scope(p, p.jobs[0], moved)
    # a block whose running ranks span two super pods: not modelled, never within
    running = {0: "n0", 1: "n8"}
    data = job("t", "chip8-node8-sp", tasks=4, npu=8, sp_block=32, pod_rescheduling=True,
               running_ranks=running)
    q = problem(scenario(sp_nodes(set(running.values())), [data], SP_CONFIG))
    full = np.asarray([q.node_index[n] for n in ("n0", "n8", "n1", "n9")])
    assert not within_scope(q, q.jobs[0], full)
