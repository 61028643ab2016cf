"""Built CP-SAT models reused between sessions (solver/model/reuse.py): a kept model is
handed back only when a fresh build would give the same proto, reuse never changes an
answer under a deterministic budget, a new job means a new build, and a stored cluster's
second plan on a real server reuses its model.  CP-SAT: 1 worker, seed 0, deterministic
budgets (the wall-clock limits are generous safety nets)."""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable

import numpy as np
import pytest
from ortools.sat.python import cp_model

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import HEALTHY, SUBHEALTHY, UNHEALTHY, Problem, compile_scenario
from models.io import scenario_from_data
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from solver.cpsat import add_hint, build_model, cached_build
from solver.engine import solve_cpsat
from solver.facade import solve
from solver.lns import _blockers, job_potential
from solver.model.focus import neighbourhood_mask, unit_keys
from solver.model.podscope import leaf_allows, node_keys, pod_scope
from solver.model.reuse import ModelCache, _fixed_part, step_digest
from solver.request import SolveRequest
from solver.reuse import SolveCache
from solver.service.app import ServiceConfig
from solver.service.client import PlanClient
from tests.solver.service.conftest import example, running_server

REUSED = "CP-SAT models: "


def _problem(family: str, nodes: int = 256, jobs: int = 4, seed: int = 1) -> Problem:
    return compile_scenario(generate_case(GenParams(family, nodes=nodes, seed=seed,
                                                    jobs=jobs)).scenario)


def _first_step(problem: Problem, plan: Plan, position: int = 0
                ) -> tuple[np.ndarray, dict[int, np.ndarray], frozenset[int]]:
    """The inputs of the large-neighbourhood search's first (or ``position``-th) step
    from ``plan``."""
    j = job_potential(problem, plan)[position][2]
    hood = [j, *_blockers(problem, plan, j)]
    fixed = {k: np.asarray(n) for k, n in enumerate(plan.nodes)
             if k not in hood and n is not None}
    skip = frozenset(k for k, n in enumerate(plan.nodes) if k not in hood and n is None)
    return neighbourhood_mask(problem, plan, hood, unit_keys(problem)), fixed, skip


def _proto(problem: Problem, plan: Plan, step: tuple[np.ndarray | None,
                                                      dict[int, np.ndarray] | None,
                                                      frozenset[int]]) -> bytes:
    keep, fixed, skip = step
    built = build_model(problem, resolve_weights(problem), plan, keep, fixed, skip)
    return str(built.model.proto).encode()


def _with_states(problem: Problem, free: np.ndarray, health: np.ndarray) -> Problem:
    return dataclasses.replace(problem, free=free, health=health)


def _cached(problem: Problem, cache: ModelCache, plan: Plan,
            step: tuple[np.ndarray | None, dict[int, np.ndarray] | None, frozenset[int]],
            ) -> tuple[bytes, bool]:
    """The proto ``cached_build`` gives for ``problem`` (hints cleared) and whether it
    was a kept one."""
    hits = cache.hits
    built = cached_build(cache, problem, resolve_weights(problem), plan, *step)
    built.model.clear_hints()
    built.model.hinted = None
    return str(built.model.proto).encode(), cache.hits > hits


@pytest.mark.parametrize("family", ["950", "multilevel", "a3", "850", "ordinary"])
def test_a_kept_model_is_the_model_a_fresh_build_gives(family: str) -> None:
    """Random deltas of free chips and health: whenever the cache hands back a kept model
    (re-weighted when the automatic weights moved), it is the proto a fresh build gives;
    kept models and new builds both occur."""
    problem = _problem(family)
    plan = greedy_plan(problem)
    step = _first_step(problem, plan)
    rng = random.Random(7)
    hits = misses = 0
    for trial in range(24):
        cache = ModelCache()
        _cached(problem, cache, plan, step)
        free, health = problem.free.copy(), problem.health.copy()
        for n in rng.sample(range(problem.num_nodes), 1 + trial % 3):
            if rng.random() < 0.6:
                health[n] = rng.choice([HEALTHY, SUBHEALTHY, UNHEALTHY])
            else:
                free[n] = rng.randint(0, int(problem.npus[n]))
        changed = _with_states(problem, free, health)
        proto, hit = _cached(changed, cache, plan, step)
        if hit:
            hits += 1
            assert proto == _proto(changed, plan, step), (family, trial)
        else:
            misses += 1
    # a node outside every step input turning sub-healthy: a hit (the weights move)
    seen = np.asarray(step[0]).copy()
    for nodes in plan.nodes:
        if nodes is not None:
            seen[np.asarray(nodes, dtype=np.int64)] = True
    for job in problem.jobs:
        seen[job.origin[job.origin >= 0]] = True
    quiet = np.flatnonzero(~seen & (problem.health == HEALTHY))
    if len(quiet):
        cache = ModelCache()
        _cached(problem, cache, plan, step)
        health = problem.health.copy()
        health[quiet[0]] = SUBHEALTHY
        changed = _with_states(problem, problem.free.copy(), health)
        proto, hit = _cached(changed, cache, plan, step)
        assert hit and proto == _proto(changed, plan, step)
        assert resolve_weights(changed) == resolve_weights(problem) or cache.reweighted == 1
        hits += 1
    assert misses > 0, (hits, misses)
    # on a3 at this size the kept units cover every node: nothing is outside
    assert hits > 0 or family == "a3", (hits, misses)


@pytest.mark.parametrize("family", ["950", "multilevel", "a3", "850"])
def test_a_node_under_a_fixed_job_changing_sub_health_keeps_the_model(family: str) -> None:
    """Nodes a fixed whole-node job uses turn sub-healthy (or healthy again): the kept
    model is handed back with its objective set again, the proto of a fresh build."""
    problem = _problem(family, jobs=6)
    plan = greedy_plan(problem)
    for position in range(len(problem.jobs)):
        step = _first_step(problem, plan, position)
        fixed = step[1]
        hosts = sorted({int(n) for j, nodes in fixed.items() if problem.jobs[j].whole_node
                        for n in nodes} - {int(n) for j, nodes in enumerate(plan.nodes)
                                           if nodes is not None and j not in fixed
                                           for n in nodes})
        if hosts:
            break
    assert hosts, "no step with a fixed whole-node job"
    rng = random.Random(3)
    for trial in range(4):
        cache = ModelCache()
        _cached(problem, cache, plan, step)
        health = problem.health.copy()
        for n in rng.sample(hosts, min(len(hosts), 1 + trial)):
            health[n] = SUBHEALTHY if health[n] == HEALTHY else HEALTHY
        changed = _with_states(problem, problem.free.copy(), health)
        proto, hit = _cached(changed, cache, plan, step)
        assert hit, (family, trial)
        assert cache.reweighted == 1
        assert proto == _proto(changed, plan, step), (family, trial)


def test_a_kept_model_hinted_with_the_same_plan_keeps_its_hints() -> None:
    """The hints of the same plan are not set again; another plan's are, and the proto
    is then the one a fresh build hinted with that plan gives."""
    problem = _problem("950")
    plan = greedy_plan(problem)
    step = _first_step(problem, plan)
    weights = resolve_weights(problem)
    cache = ModelCache()
    built = cached_build(cache, problem, weights, plan, *step)
    first = add_hint(built, plan)
    proto = str(built.model.proto)
    again = cached_build(cache, problem, weights, plan, *step)
    assert cache.hits == 1 and again.model is built.model
    assert add_hint(again, plan) == first and str(again.model.proto) == proto
    other = Plan([None] * len(problem.jobs), [None] * len(problem.jobs))
    add_hint(again, other)
    fresh = build_model(problem, weights, plan, *step)
    add_hint(fresh, other)
    assert str(again.model.proto) == str(fresh.model.proto)
    assert str(again.model.proto) != proto


def test_the_whole_batch_model_is_kept_only_for_an_unchanged_problem() -> None:
    problem = _problem("950")
    plan = greedy_plan(problem)
    full = (None, None, frozenset[int]())
    base = step_digest(problem, plan, *full)
    assert step_digest(dataclasses.replace(problem), plan, *full) == base
    health = problem.health.copy()
    health[int(np.flatnonzero(problem.health == HEALTHY)[-1])] = SUBHEALTHY
    assert step_digest(_with_states(problem, problem.free.copy(), health), plan,
                       *full) != base


def _sessions(family: str) -> list[Problem]:
    """A stored cluster's sessions: a node turns sub-healthy, free chips change, a
    node turns unhealthy, a job is added (the last)."""
    scenario = generate_case(GenParams(family, nodes=256, seed=1, jobs=4)).scenario
    problem = compile_scenario(scenario)
    out = [problem, dataclasses.replace(problem)]  # unchanged (the clock moved)
    health = problem.health.copy()
    health[int(np.flatnonzero(problem.health == HEALTHY)[-1])] = SUBHEALTHY
    out.append(_with_states(problem, problem.free.copy(), health))
    free = out[-1].free.copy()
    partly = np.flatnonzero((free > 0) & (free < problem.npus))
    if len(partly):
        free[int(partly[0])] -= 1
    out.append(_with_states(out[-1], free, health.copy()))
    health = health.copy()
    health[int(np.flatnonzero(problem.health == HEALTHY)[0])] = UNHEALTHY
    out.append(_with_states(out[-1], free.copy(), health))
    bigger = generate_case(GenParams(family, nodes=256, seed=1, jobs=5)).scenario
    out.append(compile_scenario(bigger))
    return out


@pytest.mark.parametrize("family,mode", [("950", "lns"), ("multilevel", "lns"),
                                         ("850", "full")])
def test_reuse_answers_as_a_cold_build_does(family: str, mode: str) -> None:
    """The same sequence of sessions with and without kept models: the same plan every
    session (deterministic budget), valid, scored as evaluate() scores it."""
    cache = ModelCache()
    hits = []
    for number, problem in enumerate(_sessions(family)):
        weights = resolve_weights(problem)
        greedy = greedy_plan(problem)
        answers = []
        # against a cache that keeps nothing: every model built (without one, a solve
        # keeps its own models for its repeated steps)
        for models in (cache, ModelCache(max_models=0)):
            if models is cache:
                models.new_session()
            before = cache.carried
            outcome = solve_cpsat(SolveRequest(
                problem, greedy, weights, time_limit=600.0, workers=1, seed=0,
                deterministic_time=1.0, warm_start=greedy, mode=mode, models=models))
            if models is cache:
                hits.append(cache.carried - before)
            else:
                assert models.hits == 0 and outcome.models is not None
                assert outcome.models.reused == 0 and outcome.models.built == models.builds
            assert outcome.plan is not None
            placement = to_placement(problem, outcome.plan, engine="cpsat",
                                     status=Status.FEASIBLE)
            assert check(problem, placement) == []
            if mode == "full":
                assert outcome.objective == evaluate(problem, outcome.plan.as_mapping(),
                                                     weights).objective
            answers.append([None if n is None else n.tolist() for n in outcome.plan.nodes])
        assert answers[0] == answers[1], (family, number)
    assert hits[1] > 0, hits  # the unchanged session reuses models of the first
    assert hits[-1] == 0, hits  # a new job: no model of an earlier session fits
    assert len(cache) <= cache.max_models


def test_the_cache_is_bounded() -> None:
    problem = _problem("950", jobs=2)
    plan = greedy_plan(problem)
    weights = resolve_weights(problem)
    cache = ModelCache(max_models=2)
    for keep_first in range(4):
        keep = np.zeros(problem.num_nodes, dtype=bool)
        keep[: 64 * (keep_first + 1)] = True
        key = cache.digest(problem, plan, keep, None, frozenset())
        assert key is not None
        cache.put(key, build_model(problem, weights, plan, keep), weights)
    assert len(cache) == 2 and cache.builds == 4
    small = ModelCache(max_variables=1)
    key = small.digest(problem, plan, None, None, frozenset())
    assert key is not None
    small.put(key, build_model(problem, weights, plan), weights)
    assert len(small) == 0  # larger than the whole bound: not kept


def test_a_new_job_is_noted_and_builds_every_model() -> None:
    scenario = example("superpod-850")
    cache = SolveCache()
    first = solve(compile_scenario(scenario), time_limit=60, seed=0, deterministic_time=0.3,
                  cache=cache)
    assert not any("model reuse:" in n for n in first.notes)
    same = solve(compile_scenario(scenario), time_limit=60, seed=0, deterministic_time=0.3,
                 cache=cache)
    assert _reused(same.notes) > 0 and not any("model reuse:" in n for n in same.notes)
    extra = scenario.jobs[-1].model_copy(update={"name": "added-job", "owner_uid": None})
    bigger = compile_scenario(scenario.model_copy(update={"jobs": [*scenario.jobs, extra]}))
    after = solve(bigger, time_limit=60, seed=0, deterministic_time=0.3, cache=cache)
    assert any("model reuse: the jobs changed" in n for n in after.notes), after.notes
    assert _reused(after.notes) == 0
    assert check(bigger, after.placement) == []


def _reused(notes: list[str]) -> int:
    for note in notes:
        if note.startswith(REUSED):
            return int(note[len(REUSED):].split()[0])
    return 0


def test_a_stored_clusters_second_plan_reuses_its_model_on_a_real_server() -> None:
    scenario = example("superpod-850")
    with running_server(ServiceConfig(warmup=False)) as (url, _), PlanClient(url) as client:
        client.put_cluster("models", scenario)
        first = client.plan_cluster("models", time_limit=5, deterministic_time=0.5)
        assert _reused(first.notes) == 0 and any(n.startswith(REUSED) for n in first.notes)
        second = client.plan_cluster("models", time_limit=5, deterministic_time=0.5)
        assert _reused(second.notes) > 0, second.notes
        assert second.objective is not None and first.objective is not None
        assert second.objective >= first.objective
        client.put_cluster("models", scenario)  # a new body: its models are dropped
        third = client.plan_cluster("models", time_limit=5, deterministic_time=0.5)
        assert _reused(third.notes) == 0, third.notes
        stored = compile_scenario(client.cluster_scenario("models"))
        assert check(stored, third) == []


def test_an_abandoned_search_drops_the_kept_models(
        stall_cpsat: Callable[[], threading.Event]) -> None:
    """A search that outlives its budget may still be reading a kept model: the cache is
    emptied, so no later session hints or solves that model meanwhile."""
    problem = compile_scenario(example("superpod-850"))
    cache = SolveCache()
    solve(problem, time_limit=60, seed=0, deterministic_time=0.3, cache=cache)
    assert len(cache.models) > 0
    release = stall_cpsat()
    try:
        result = solve(problem, engine="cpsat", time_limit=1.0, seed=0, cache=cache)
    finally:
        release.set()
    assert any("did not stop" in n for n in result.notes)
    assert len(cache.models) == 0
    assert check(problem, result.placement) == []


# ------------------------------------------------------- partly running jobs


def _partly_running(family: str, sessions: int, seed: int) -> tuple[Problem, int]:
    """The generated case with its largest whole-node job partly running: greedy's
    nodes of its first half of ranks (less one or two) keep running there, the other
    ranks are pending (blocks / windows / level groups without running ranks, and
    anchored groups with pending ranks), at pod level with ``sessions`` pending sessions;
    its cache entries stay (the stage rules read them)."""
    base = _problem(family)
    plan = greedy_plan(base)
    j = max((job for job in base.jobs if job.whole_node and job.tasks >= 2
             and plan.nodes[job.index] is not None), key=lambda job: job.tasks).index
    job, nodes = base.jobs[j], np.asarray(plan.nodes[j])
    rng = random.Random(seed)
    half = list(range(job.tasks // 2))
    running = sorted(set(half) - set(rng.sample(half, min(len(half) - 1, 1 + seed % 2))))
    data = base.scenario.to_dict()
    by_name = {n["name"]: n for n in data["nodes"]}
    for r in running:
        by_name[base.node_names[int(nodes[r])]]["free"] -= job.npu_per_task
    entry = data["jobs"][j]
    entry["running-ranks"] = {str(r): base.node_names[int(nodes[r])] for r in running}
    entry["fault-ranks"] = [r for r in entry.get("fault-ranks", []) if r not in running]
    entry["pod-rescheduling"] = True
    entry["pending-sessions"] = sessions
    return compile_scenario(scenario_from_data(data, "<partly running>")), j


def _step_of(problem: Problem, plan: Plan, j: int
             ) -> tuple[np.ndarray, dict[int, np.ndarray], frozenset[int]]:
    """A large-neighbourhood step re-placing job ``j`` and its blockers."""
    hood = [j, *_blockers(problem, plan, j)]
    fixed = {k: np.asarray(n) for k, n in enumerate(plan.nodes)
             if k not in hood and n is not None}
    skip = frozenset(k for k, n in enumerate(plan.nodes) if k not in hood and n is None)
    return neighbourhood_mask(problem, plan, hood, unit_keys(problem)), fixed, skip


@pytest.mark.parametrize("family,sessions", [("950", 0), ("950", 3), ("950", 6),
                                             ("850", 0), ("a3", 6), ("multilevel", 0)])
def test_a_kept_model_of_a_partly_running_job_is_a_fresh_builds(family: str,
                                                                 sessions: int) -> None:
    """Random deltas of free chips and health, drawn mostly from the nodes of the
    domains the partly running job's pending ranks may take (its scope), inside and
    outside the nodes the step reads one by one: whenever the cache hands back a kept
    model, it is the proto a fresh build gives (the whole-batch model and a
    large-neighbourhood step on the job)."""
    hits = misses = outside_hits = 0
    for seed in range(2):
        problem, j = _partly_running(family, sessions, seed)
        job = problem.jobs[j]
        plan = greedy_plan(problem)
        scope = pod_scope(problem, job)
        assert scope is not None, (family, seed)
        built = build_model(problem, resolve_weights(problem), plan)
        assert j in built.structure.pod and j not in built.pinned
        # nodes of the domains some pending leaf group may take, whatever their state
        leaf = scope.leaf
        pending_groups = [g for g in range(scope.groups(leaf)) if scope.pending_in(leaf, g)]
        domain_nodes = []
        for n in range(problem.num_nodes):
            keys = node_keys(problem, scope.kinds, scope.tree, n)
            if keys is not None and any(leaf_allows(scope, g, keys) for g in pending_groups):
                domain_nodes.append(n)
        running = {int(n) for n in job.running if n >= 0}
        classes = _fixed_part(problem)[1]
        domain_nodes = [n for n in domain_nodes if n not in running]
        assert domain_nodes
        # a narrow step: only the job's own nodes kept, every other job fixed (most of
        # the scope's nodes are then outside the nodes the step reads one by one)
        narrow = np.zeros(problem.num_nodes, dtype=bool)
        if plan.nodes[j] is not None:
            narrow[np.asarray(plan.nodes[j], dtype=np.int64)] = True
        fixed = {k: np.asarray(n) for k, n in enumerate(plan.nodes)
                 if k != j and n is not None}
        unplaced = frozenset(k for k, n in enumerate(plan.nodes) if k != j and n is None)
        for step in (_step_of(problem, plan, j), (narrow, fixed, unplaced)):
            keep = step[0]
            seen = keep.copy()
            for nodes in plan.nodes:
                if nodes is not None:
                    seen[np.asarray(nodes, dtype=np.int64)] = True
            for other in problem.jobs:
                seen[other.origin[other.origin >= 0]] = True
            rng = random.Random(11 + seed)
            for trial in range(12):
                cache = ModelCache()
                _cached(problem, cache, plan, step)
                free, health = problem.free.copy(), problem.health.copy()
                outside = [n for n in domain_nodes if not seen[n]]
                if trial % 4 == 1 and outside:
                    # scope nodes outside: sub-health toggled (the model reads only
                    # "unhealthy or not" there), or two of one topology class swap states
                    picked = rng.sample(outside, min(len(outside), 2))
                    if trial % 8 == 1:
                        for n in picked:
                            if health[n] != UNHEALTHY:
                                health[n] = SUBHEALTHY if health[n] == HEALTHY else HEALTHY
                    else:
                        a = picked[0]
                        same = [n for n in outside if classes[n] == classes[a] and n != a
                                and (free[n], health[n]) != (free[a], health[a])]
                        if same:
                            b = rng.choice(same)
                            picked = [a, b]
                            free[[a, b]] = free[[b, a]]
                            health[[a, b]] = health[[b, a]]
                else:
                    pool = domain_nodes if trial % 4 else list(range(problem.num_nodes))
                    picked = rng.sample(pool, min(len(pool), 1 + trial % 3))
                    for n in picked:
                        what = rng.random()
                        if what < 0.4:
                            health[n] = rng.choice([HEALTHY, SUBHEALTHY, UNHEALTHY])
                        elif what < 0.7:
                            free[n] = int(problem.npus[n])  # a whole free node there
                        else:
                            free[n] = rng.randint(0, int(problem.npus[n]))
                changed = _with_states(problem, free, health)
                proto, hit = _cached(changed, cache, plan, step)
                if hit:
                    hits += 1
                    assert proto == _proto(changed, plan, step), (family, seed, trial)
                    outside_hits += any(not seen[n] for n in picked
                                        if free[n] != problem.free[n]
                                        or health[n] != problem.health[n])
                else:
                    misses += 1
    assert misses > 0, (hits, misses)
    # kept models handed back after a change of a scope node the step does not read
    # one by one (the case this test is for)
    assert outside_hits > 0, (hits, misses)


def test_keeping_a_model_whose_bound_row_is_not_linear_leaves_it_solvable() -> None:
    # every job left out of the model: the objective is a constant, and CP-SAT makes the
    # bound row "objective <= best" a constant constraint, not a linear one; reading its
    # ``.linear`` (as the cache once did) turned it into an empty, infeasible linear row
    problem = _problem("950", nodes=64, jobs=2)
    weights = resolve_weights(problem)
    skip = frozenset(range(len(problem.jobs)))
    kept = ModelCache()
    for models in (None, kept, kept):  # built, kept, handed back
        built = cached_build(models, problem, weights, None, skip=skip)
        assert not built.model.proto.constraints[-1].has_linear()
        solver = cp_model.CpSolver()
        assert solver.solve(built.model) == cp_model.OPTIMAL
    assert kept.hits == 1
