"""Every answer stays valid at 16,384 nodes (a whole SuperCluster in one session).

One 16-job batch per family at 16,384 nodes (generator seed 37): greedy's answer, and the
``auto`` answer under a small deterministic time (the origin-first construction, then the
large neighbourhoods), and the answer of the search of larger batches (neighbourhoods
only, lean steps: :mod:`solver.model.focus`) run on them, pass the independent validator
and the contract of :func:`tests.solver.answers.assert_sound_answer`.  A stored 16,384-node
cluster answers deltas of each cheap tier and plans on the result validly.  Slow: the
batches alone take seconds to generate.
"""

from __future__ import annotations

import re

import pytest

from benchmarks.generators import FAMILIES, GenParams, generate
from models.check import check
from models.compiled import Problem, compile_scenario
from models.errors import InputError
from solver import phases
from solver.facade import solve
from solver.model import focus
from solver.service.state import Cluster, ClusterDelta
from tests.solver.answers import assert_sound_answer

NODES = 16384

pytestmark = pytest.mark.slow

_problems: dict[str, Problem] = {}


def _problem(family: str) -> Problem:
    if family not in _problems:
        _problems[family] = compile_scenario(
            generate(GenParams(family, nodes=NODES, seed=37, jobs=16)))
    return _problems[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_answers_are_valid_at_16384_nodes(family: str) -> None:
    problem = _problem(family)
    assert problem.num_nodes >= NODES
    result = solve(problem, engine="greedy")
    assert check(problem, result.placement) == []
    assert sum(job.placed for job in result.placement.jobs) > 0


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_answers_are_valid_at_16384_nodes(family: str) -> None:
    problem = _problem(family)
    if family == "a3":  # 16,416 nodes: lean steps
        assert focus.lean_groups(problem)
    result = solve(problem, engine="auto", time_limit=300.0, workers=1, seed=0,
                   deterministic_time=0.3)
    assert_sound_answer(problem, result)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "a3"])
def test_lean_neighbourhood_answers_are_valid_at_16384_nodes(
        family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the search of batches above 16,384 nodes (neighbourhoods only, lean steps), run on
    # the 16,384-node batches: every accepted step passed the validator, and so does the
    # answer.  The A3 batch has 16,416 nodes, so the ``auto`` test above already searches
    # it with lean steps (with the same budget, within which a hybrid search is its
    # neighbourhoods).
    monkeypatch.setattr(phases, "LNS_ONLY_PAIRS", 0)
    monkeypatch.setattr(focus, "LEAN_ABOVE_NODES", 8192)
    problem = _problem(family)
    assert phases.search_mode(problem) == "lns" and focus.lean_groups(problem)
    result = solve(problem, engine="auto", time_limit=300.0, workers=1, seed=0,
                   deterministic_time=0.3)
    assert_sound_answer(problem, result)
    steps = [int(m.group(1)) for n in result.notes
             if (m := re.match(r"large-neighbourhood search: ([0-9]+) steps", n))]
    assert steps and steps[0] > 0, result.notes  # lean steps ran within the budget


def test_a_stored_16384_node_cluster_takes_deltas_and_plans_validly() -> None:
    problem = _problem("a3")
    cluster = Cluster("big", problem)
    names = problem.node_names
    busy = next(n for n in range(problem.num_nodes) if problem.free[n] == problem.npus[n])
    info = cluster.apply(ClusterDelta.model_validate(
        {"node-updates": [{"name": names[busy], "free": 0}]}))
    assert info.last_update == "values"
    gone = problem.jobs[0].name
    info = cluster.apply(ClusterDelta.model_validate({"jobs-removed": [gone]}))
    assert info.last_update == "jobs" and info.jobs == len(problem.jobs) - 1
    # a job on a node that does not exist is refused, and the cluster is left as it was
    bad = problem.scenario.jobs[1].model_dump(by_alias=True, exclude_none=True, mode="json")
    bad = {**bad, "name": "ghost", "owner-uid": "ghost-uid",
           "running-ranks": {"0": "no-such-node"}}
    with pytest.raises(InputError, match="no-such-node"):
        cluster.apply(ClusterDelta.model_validate({"jobs-submitted": [bad]}))
    stored = cluster.snapshot.problem
    assert stored.free[busy] == 0 and gone not in stored.job_index
    result = solve(stored, engine="greedy")
    assert check(stored, result.placement) == []
