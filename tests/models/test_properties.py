"""Properties over random valid scenarios of every family (``tests.strategies``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.check import Rule, Violation, check
from models.compiled import UNHEALTHY, Problem, compile_scenario
from models.io import dump_data, parse_text, scenario_from_data
from models.objective import evaluate, resolve_weights
from models.scenario import Family, Scenario
from models.validation import InputError
from tests.strategies import (
    ALL_FAMILIES,
    arbitrary_placements,
    plan_to_placement,
    random_plan,
    scenarios,
    valid_placements,
)


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@given(scenario=scenarios())
def test_scenarios_round_trip_unchanged(fmt: str, scenario: Scenario) -> None:
    text = dump_data(scenario.to_dict(), fmt)
    again = scenario_from_data(parse_text(text, f"<{fmt}>"), f"<{fmt}>")
    assert again == scenario
    assert again.to_dict() == scenario.to_dict()


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=[f.value for f in ALL_FAMILIES])
@given(data=st.data())
def test_every_family_compiles(family: Family, data: st.DataObject) -> None:
    scenario = data.draw(scenarios(families=[family], min_jobs=1))
    problem = compile_scenario(scenario)
    assert {job.family for job in problem.jobs} == {family}
    _assert_consistent(problem)


@given(problem=scenarios().map(compile_scenario))
def test_mixed_scenarios_compile(problem: Problem) -> None:
    _assert_consistent(problem)


def _assert_consistent(problem: Problem) -> None:
    count = problem.num_nodes
    assert sorted(problem.natural_order.tolist()) == list(range(count))
    assert (problem.natural_order[problem.natural_pos] == np.arange(count)).all()
    assert sorted(problem.queue) == list(range(len(problem.jobs)))
    priorities = [problem.jobs[j].priority for j in problem.queue]
    assert priorities == sorted(priorities, reverse=True)
    for job in problem.jobs:
        assert job.origin.shape == (job.tasks,) and job.fault.shape == (job.tasks,)
        assert ((job.origin >= -1) & (job.origin < count)).all()
        if job.family in (Family.SUPERPOD, Family.RACK):
            assert job.sp_block >= 1 and job.tasks % job.sp_block == 0
        if job.family is Family.RACK:
            assert job.tp_block >= 1 and job.sp_block % job.tp_block == 0
        if job.family is Family.MULTILEVEL:
            assert job.whole_node and job.tasks % job.levels[-1] == 0
        live = problem.live.get(job.owner_uid or "", {})
        for rank in range(job.tasks):
            expected = problem.node_index[live[rank]] if rank in live else -1
            assert job.origin[rank] == expected
    resolve_weights(problem)


@given(data=st.data())
def test_check_never_crashes_on_arbitrary_placements(data: st.DataObject) -> None:
    problem = compile_scenario(data.draw(scenarios()))
    answer = data.draw(arbitrary_placements(problem))
    violations = check(problem, answer)
    assert all(isinstance(v, Violation) and v.rule in set(Rule) for v in violations)
    assert all(v.message for v in violations)


@given(data=st.data())
def test_valid_placements_pass_check_and_measure_sanely(data: st.DataObject) -> None:
    problem = compile_scenario(data.draw(scenarios()))
    answer = data.draw(valid_placements(problem))
    assert check(problem, answer) == []
    m = evaluate(problem, answer)
    placed = [jp for jp in answer.jobs if jp.placed]
    assert m.placed_jobs == len(placed)
    assert 0 <= m.origin_hits <= m.achievable_origin_hits <= m.origin_candidates
    assert m.fault_returns <= sum(int(((j.origin >= 0) & j.fault).sum()) for j in problem.jobs)
    used = {n for jp in placed for n in jp.ranks.values()}
    assert m.subhealthy_nodes <= len(used)
    assert min(m.fragment_score, m.reserve_used, m.affinity_spill) >= 0
    w = resolve_weights(problem)
    expected = (sum(w.job_placed[problem.job_index[jp.name]] for jp in placed)
                + w.origin_hit * m.origin_hits - w.fault_return * m.fault_returns
                - w.affinity_spill * m.affinity_spill - w.subhealthy * m.subhealthy_nodes
                - w.reserve * m.reserve_used - w.fragment * m.fragment_score)
    assert m.objective == expected
    for jp in placed:
        assert jp.origin_hits == m.per_job_hits[jp.name]
    for n in used:
        assert problem.health[problem.node_index[n]] != UNHEALTHY


@settings(max_examples=40)
@given(data=st.data())
def test_automatic_weights_are_lexicographic(data: st.DataObject) -> None:
    """Between any two valid placements: more placement weight wins; at equal placement
    weight, more origin hits win, whatever the lower terms do."""
    problem = compile_scenario(data.draw(scenarios(max_jobs=3)))
    rng = data.draw(st.randoms(use_true_random=False))
    first = plan_to_placement(problem, random_plan(problem, rng))
    second = plan_to_placement(problem, random_plan(problem, rng, place_probability=0.6))
    w = resolve_weights(problem)

    def key(answer: Any) -> tuple[int, int]:
        m = evaluate(problem, answer, w)
        weight = sum(w.job_placed[problem.job_index[jp.name]] for jp in answer.jobs if jp.placed)
        return weight, m.origin_hits if problem.prefer_previous_node else 0

    a, b = key(first), key(second)
    oa, ob = evaluate(problem, first, w).objective, evaluate(problem, second, w).objective
    if a > b:
        assert oa > ob
    elif b > a:
        assert ob > oa


# --------------------------------------------------------------------------- bad input

_JUNK = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["", "x", "-1", "level1=0"]),
                  st.lists(st.integers(-1, 2), max_size=2), st.just({"k": "v"}), st.booleans(),
                  st.floats(allow_nan=True))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@given(data=st.data())
def test_corrupted_documents_are_refused_with_messages(data: st.DataObject) -> None:
    """Any corruption of a valid document loads, or is refused with an InputError whose
    messages name the file; never another exception."""
    doc = data.draw(scenarios(max_nodes=12, max_jobs=2)).to_dict()
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = data.draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(data.draw(_JUNK))
    try:
        problem = compile_scenario(scenario_from_data(doc, "corrupt.yaml"))
    except InputError as exc:
        assert exc.messages
        assert all(m.startswith("corrupt.yaml: ") for m in exc.messages)
    else:
        check(problem, data.draw(arbitrary_placements(problem)))


@settings(max_examples=40)
@given(data=st.data())
def test_placements_built_without_revalidation_are_valid_documents(
    data: st.DataObject,
) -> None:
    """``to_placement`` skips pydantic validation; its output must still be a document
    that validation accepts unchanged (same JSON after a round trip)."""
    from models.placement import PlacementFile

    problem = compile_scenario(data.draw(scenarios()))
    answer = data.draw(valid_placements(problem))
    dumped = answer.to_dict()
    again = PlacementFile.model_validate(dumped)
    assert again.to_dict() == dumped
    assert json.loads(json.dumps(dumped)) == dumped
