"""Property test: a random partly running job never moves a running rank, and
every answer of both engines passes the validator with CP-SAT's objective = evaluate.

A random valid placement of a random scenario is drawn; a random proper subset of one
placed job's ranks becomes ``running-ranks`` (their chips leave ``free``), with a random
stage.  The remaining ranks can be completed (the drawn placement does it), though an
engine may still leave the job pending with a reason.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from models.compiled import Problem, compile_scenario
from models.io import scenario_from_data
from tests.solver.answers import assert_pod_level_answers
from tests.strategies import ALL_FAMILIES, problems, random_plan, running_ranks_document


def _partly_running(problem: Problem, seed: int, sessions: int, pod: bool) -> Problem | None:
    rng = random.Random(seed)
    mapping = random_plan(problem, rng, place_probability=1.0)
    chosen = [j for j, ranks in mapping.items() if problem.jobs[j].tasks >= 2]
    if not chosen:
        return None
    j = rng.choice(chosen)
    job = problem.jobs[j]
    count = rng.randint(1, job.tasks - 1)
    ranks = sorted(rng.sample(range(job.tasks), count))
    data = running_ranks_document(problem, j, {r: mapping[j][r] for r in ranks},
                                  sessions=sessions, pod=pod)
    return compile_scenario(scenario_from_data(data, "<hypothesis>"), "<hypothesis>")


@settings(max_examples=40, deadline=None)
@given(problem=problems(families=ALL_FAMILIES, max_nodes=24, max_jobs=3),
       seed=st.integers(0, 2**31 - 1), sessions=st.sampled_from([0, 2, 3, 5, 6, 12]),
       pod=st.booleans())
def test_running_ranks_never_move_and_answers_are_valid(problem: Problem, seed: int,
                                                         sessions: int, pod: bool) -> None:
    partly = _partly_running(problem, seed, sessions, pod)
    assume(partly is not None)
    assert partly is not None
    for result in assert_pod_level_answers(partly, time_limit=10.0, deterministic_time=2.0):
        for view in partly.jobs:
            if result.plan.nodes[view.index] is None or not view.partly_running:
                continue
            fixed = view.running >= 0
            listed = {int(r) for r in result.placement.jobs[view.index].ranks}
            assert listed == set(np.flatnonzero(~fixed).tolist())
