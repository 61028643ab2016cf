"""vNPU deltas, fuzzed: after any sequence of accepted and refused deltas that
change vNPU chips and ``vnpu-jobs``, the stored problem passes full validation, equals a
fresh compile of its scenario in its vNPU view, and its greedy answer passes the
validator; a refused delta changes nothing; a delta that only updates nodes is accepted
exactly when the same scenario as a full body is.  In process (``apply_delta``): the
doors are tested in ``test_vnpu_stored_cluster.py``."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import scenario_from_data
from models.validation import InputError
from models.vnpu import compile_vnpu
from solver.facade import solve
from solver.service.state import ClusterDelta, apply_delta
from tests.solver.service.deltas import by_hand, fully_valid, stored_example

VNODES = ["vnpu-310p-1", "vnpu-310p-2", "vnpu-310p-3"]
_node = st.sampled_from([*VNODES, "train-1", "nope"])
_chip = st.fixed_dictionaries({"id": st.integers(0, 4)}, optional={
    "free-cores": st.integers(-1, 9), "free-cpus": st.integers(-1, 8),
    "segmented": st.booleans(), "dvpp": st.sampled_from(["yes", "no", "null", "maybe"]),
    "unstable": st.booleans()})
_templates = st.one_of(st.lists(st.sampled_from(["vir01", "vir02_1c", "vir04_3c", "vir99"]),
                                max_size=2), st.none())
_update = st.fixed_dictionaries({"name": _node}, optional={
    "vnpu-chips": st.one_of(st.lists(_chip, max_size=5), st.none()),
    "unfinished-templates": _templates,
    "free": st.integers(-1, 5), "health": st.sampled_from(["healthy", "subhealthy",
                                                           "unhealthy"])})
_job = st.fixed_dictionaries({
    "name": st.sampled_from(["infer-chat", "new-a", "new-b", "train-llm", "evil\x1b"]),
    "tasks": st.integers(0, 3)}, optional={
    "ai-cores": st.sampled_from([1, 2, 3, 4, 8, 10, 16]),
    "template": st.sampled_from(["vir01", "vir99"]),
    "owner-uid": st.sampled_from(["rs-chat-7c1e", "rs-new"]),
    "vnpu-dvpp": st.sampled_from(["yes", "no", "null"]),
    "vnpu-level": st.sampled_from(["low", "high"])})
_delta = st.fixed_dictionaries({}, optional={
    "node-updates": st.lists(_update, max_size=2),
    "vnpu-jobs-removed": st.lists(st.sampled_from(["infer-chat", "infer-ocr", "new-a",
                                                   "train-llm", "nope"]), max_size=2),
    "vnpu-jobs-submitted": st.lists(_job, max_size=2),
    "jobs-removed": st.lists(st.sampled_from(["train-llm", "infer-embed"]), max_size=1),
})
_node_delta = st.fixed_dictionaries({"node-updates": st.lists(_update, min_size=1,
                                                              max_size=2)})


def _view(problem: Problem) -> tuple[Any, ...]:
    view = compile_vnpu(problem)
    return (repr([(v.name, v.chips, sorted(v.unfinished), v.usable) for v in view.nodes]),
            [(j.name, j.tasks, j.origin, j.spec) for j in view.jobs], view.queue)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(deltas=st.lists(st.one_of(_delta, _node_delta), min_size=1, max_size=5))
def test_stored_vnpu_clusters_stay_valid_under_fuzzed_deltas(
        deltas: list[dict[str, Any]]) -> None:
    problem, lifecycle = stored_example("vnpu-inference")
    for data in deltas:
        before = problem.scenario.model_dump_json()
        hand = (by_hand(problem.scenario.to_dict(), data["node-updates"])
                if set(data) == {"node-updates"} else None)
        try:
            applied = apply_delta(problem, lifecycle, ClusterDelta.model_validate(data))
        except (InputError, ValidationError) as exc:
            text = str(exc) if isinstance(exc, ValidationError) else " ".join(exc.messages)
            assert "Traceback" not in text
            assert problem.scenario.model_dump_json() == before  # nothing changed
            if hand is not None:
                assert not fully_valid(hand), data  # a full body is refused too
            continue
        if hand is not None:
            assert fully_valid(hand), data
        stored = applied.problem
        scenario_from_data(stored.scenario.to_dict(), "stored")  # full validation
        assert _view(stored) == _view(compile_scenario(stored.scenario))
        result = solve(stored, engine="greedy")
        assert check(stored, result.placement) == []
        problem, lifecycle = stored, applied.lifecycle
