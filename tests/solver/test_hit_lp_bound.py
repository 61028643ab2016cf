"""The origin-hit LP bound (:mod:`solver.bounds.hit_lp`, the gaps of 950 batches).

Valid: never below the optimum CP-SAT proves on small generated super-pod-family
batches (950, 850, A3, soft jobs included).  Useful: strictly below "every reachable
origin hit" where windows compete for racks, and it lowers a search's looser bound.
"""

from __future__ import annotations

import pytest

from benchmarks.generators import GenParams, generate
from heuristics.greedy import greedy_plan
from models.compiled import Problem, compile_scenario
from models.objective import achievable_hits, evaluate, resolve_weights
from models.placement import Status
from solver.bounds.hit_lp import objective_bound, origin_hit_lp, tighten_bound
from solver.facade import solve
from solver.request import CpsatOutcome, SolveRequest

#: (family, nodes, jobs, seed, soft_prob): CP-SAT proves each within 5 deterministic s
CASES = [("950", 64, 4, 0, 0.1), ("950", 64, 4, 3, 0.1), ("950", 64, 4, 5, 0.1),
         ("950", 128, 6, 1, 0.1), ("950", 128, 6, 5, 0.1), ("950", 128, 4, 2, 0.5),
         ("850", 64, 4, 3, 0.1), ("850", 128, 6, 3, 0.1), ("850", 128, 4, 1, 0.5),
         ("a3", 64, 4, 0, 0.1)]


def _generated(family: str, nodes: int, jobs: int, seed: int,
               soft_prob: float = 0.1) -> Problem:
    return compile_scenario(generate(GenParams(family=family, nodes=nodes, seed=seed,
                                               jobs=jobs, soft_prob=soft_prob)))


def _every_origin(problem: Problem) -> int:
    """The bound before: every job placed, every reachable origin hit."""
    weights = resolve_weights(problem)
    return int(sum(weights.job_placed)) + weights.origin_hit * sum(
        achievable_hits(problem, job) for job in problem.jobs)


@pytest.mark.parametrize(("family", "nodes", "jobs", "seed", "soft"), CASES,
                         ids=lambda v: str(v))
def test_bound_is_never_below_the_proven_optimum(family: str, nodes: int, jobs: int,
                                                 seed: int, soft: float) -> None:
    problem = _generated(family, nodes, jobs, seed, soft)
    result = solve(problem, engine="cpsat", time_limit=60.0, workers=1, seed=0,
                   deterministic_time=5.0)
    assert result.status is Status.OPTIMAL
    hits = origin_hit_lp(problem)
    assert hits is not None and hits >= result.metrics.origin_hits - 1e-6
    bound = objective_bound(problem, resolve_weights(problem))
    assert bound is not None and result.objective <= bound <= _every_origin(problem)


def test_bound_is_tighter_than_every_reachable_origin_hit() -> None:
    # 950, 64 nodes, 4 jobs, seed 5: optimum 195,345; every reachable origin 243,015
    problem = _generated("950", 64, 4, 5)
    bound = objective_bound(problem, resolve_weights(problem))
    assert bound is not None and bound < _every_origin(problem)
    tighter = sum(1 for family, nodes, jobs, seed, soft in CASES
                  if (b := objective_bound(p := _generated(family, nodes, jobs, seed, soft),
                                           resolve_weights(p))) is not None
                  and b < _every_origin(p))
    assert tighter >= 5


def test_the_search_bound_is_lowered_only_when_looser() -> None:
    problem = _generated("950", 64, 4, 5)
    weights = resolve_weights(problem)
    plan = greedy_plan(problem)
    value = evaluate(problem, plan.as_mapping(), weights).objective
    lp = objective_bound(problem, weights)
    assert lp is not None
    loose = _every_origin(problem)

    def tightened(bound: int | None, status: Status = Status.FEASIBLE) -> CpsatOutcome:
        outcome = CpsatOutcome(plan, status, value, bound, 0.0)
        return tighten_bound(SolveRequest(problem, plan, weights, time_limit=60.0), outcome)

    assert tightened(loose).bound == lp and tightened(loose).lp_bound == lp
    assert tightened(lp - 1).bound == lp - 1  # a tighter search bound stays
    assert tightened(None).bound is None  # a run without a bound gets none
    assert tightened(value, Status.OPTIMAL).bound == value
    # no time left after the search: nothing computed
    outcome = CpsatOutcome(plan, Status.FEASIBLE, value, loose, 0.0)
    kept = tighten_bound(SolveRequest(problem, plan, weights, time_limit=0.0), outcome)
    assert kept.bound == loose and kept.lp_bound is None
