"""What a solve does with the budget its neighbourhoods leave when they converge.

The neighbourhood search converges when no step on a job and the jobs holding its cached
nodes improves; a job whose cached nodes are free but whose super pod lacks room for the
rest of its group still misses them.  The wide steps (:func:`solver.lns.wide_hood`) then
re-place it with the jobs in those super pods.  CP-SAT runs with 1 worker and a fixed
seed under deterministic budgets; the wall-clock limits are only generous safety nets.
"""

from __future__ import annotations

import itertools
import threading
from functools import partial

import numpy as np
import pytest

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from solver.cpsat import solve_step
from solver.engine import solve_cpsat
from solver.lns import MAX_WIDE_BLOCKERS, _blockers, large_neighbourhood_search, wide_hood
from solver.model.focus import unit_keys
from solver.phases import FULL_MIN_DETERMINISTIC
from solver.request import CpsatOutcome, SolveRequest


@pytest.fixture(scope="module")
def batch_850() -> Problem:
    # 4 jobs on 256 Atlas 850 nodes: the neighbourhoods converge at 130,917 after 8 steps
    # (0.0004 deterministic s); the 32-rank job still misses cached nodes of super pods
    # that hold a 2-rank job which holds none of them
    return compile_scenario(generate_case(GenParams("850", nodes=256, seed=10,
                                                    jobs=4)).scenario)


def _request(problem: Problem, deterministic_time: float, mode: str) -> SolveRequest:
    greedy = greedy_plan(problem)
    return SolveRequest(problem, greedy, resolve_weights(problem), time_limit=120.0,
                        workers=1, seed=0, deterministic_time=deterministic_time,
                        warm_start=greedy, mode=mode)


def _narrow_answer(problem: Problem) -> tuple[Plan, int]:
    """The answer of the neighbourhoods alone, searched until they converge."""
    request = _request(problem, 100.0, "lns")
    result = large_neighbourhood_search(
        problem, request.anchor, request.weights, search_end=float("inf"),
        deterministic_time=100.0, solve_step=partial(solve_step, request),
        stopped=threading.Event())
    assert result.stopped_by == "converged"
    return result.plan, result.objective


def _valid_objective(problem: Problem, outcome: CpsatOutcome) -> int:
    assert outcome.plan is not None
    assert check(problem, to_placement(problem, outcome.plan, engine="cpsat",
                                       status=Status.FEASIBLE)) == []
    return evaluate(problem, outcome.plan.as_mapping(), resolve_weights(problem)).objective


def test_the_budget_left_after_the_neighbourhoods_converge_improves_the_answer(
        batch_850: Problem) -> None:
    # a budget far below what the whole-batch phase needs: before, the neighbourhoods'
    # answer was returned with almost all of it unused
    _, narrow = _narrow_answer(batch_850)
    outcome = solve_cpsat(_request(batch_850, 1.0, "hybrid"))
    assert FULL_MIN_DETERMINISTIC > 1.0  # the whole-batch phase does not run
    assert outcome.phases[0].startswith("neighbourhoods: converged")
    assert outcome.phases[-1].startswith("whole batch: not run")
    assert _valid_objective(batch_850, outcome) > narrow
    assert outcome.deterministic_seconds is not None and outcome.deterministic_seconds < 1.0


def test_wide_steps_keep_the_anytime_rule(batch_850: Problem) -> None:
    # budgets that cut the wide steps at different places: each run's steps are the first
    # steps of the next one's, and no answer is worse than a shorter budget's
    runs = [solve_cpsat(_request(batch_850, d, "lns")) for d in (0.0005, 0.002, 1.0)]
    answers = [_valid_objective(batch_850, run) for run in runs]
    assert answers == sorted(answers)
    steps = [[(r.job, r.hood, r.outcome, r.objective) for r in run.steps] for run in runs]
    for shorter, longer in itertools.pairwise(steps):
        assert longer[:len(shorter)] == shorter
    assert runs[-1].phases[-1].startswith("wide neighbourhoods: converged")
    # no wide step runs twice on the same incumbent (it would answer the same again)
    narrow_steps = int(runs[-1].phases[0].split(", ")[1].split()[0])
    seen: set[frozenset[int]] = set()
    for record in runs[-1].steps[narrow_steps:]:
        assert frozenset(record.hood) not in seen
        seen = set() if record.outcome == "improved" else seen | {frozenset(record.hood)}


def test_a_wide_hood_adds_the_jobs_in_the_units_of_the_missed_cached_nodes(
        batch_850: Problem) -> None:
    plan, _ = _narrow_answer(batch_850)
    units = unit_keys(batch_850)
    widened = 0
    for job in batch_850.jobs:
        narrow = [job.index, *_blockers(batch_850, plan, job.index)]
        hood = wide_hood(batch_850, plan, narrow, units)
        assert hood[:len(narrow)] == narrow and len(set(hood)) == len(hood)
        assert len(hood) <= max(len(narrow), 1 + MAX_WIDE_BLOCKERS)
        nodes = plan.nodes[job.index]
        missed = (job.origin >= 0) & ~job.fault
        if nodes is not None:
            missed &= np.asarray(nodes) != job.origin
        targets = set(units[job.origin[missed]].tolist()) - {-1}
        for k in hood[len(narrow):]:
            others = plan.nodes[k]
            assert others is not None
            assert targets & set(units[np.asarray(others)].tolist())
        widened += len(hood) > len(narrow)
    assert widened  # the batch has a job whose wide hood is larger
