"""A stored cluster with vNPU nodes: a value delta keeps them closed to other jobs, as a
fresh compile does."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from heuristics.lifecycle import CacheLifecycle
from heuristics.vnpu import greedy_vnpu
from models.check import check
from models.compiled import Problem, compile_scenario
from models.errors import InputError
from models.vnpu import compile_vnpu
from solver.facade import solve
from solver.service.state import ClusterDelta, apply_delta
from solver.service.worker import compact_delta
from tests.solver.service.deltas import apply, stored_example


def test_value_delta_on_a_vnpu_node_keeps_it_full_for_other_jobs() -> None:
    problem, _ = stored_example("vnpu-inference")
    applied = apply(problem, {"node-updates": [
        {"name": "vnpu-310p-1", "free": 3, "health": "subhealthy"},
        {"name": "train-1", "free": 5}]})
    assert applied.tier == "values"
    fresh = compile_scenario(applied.problem.scenario)
    assert applied.problem.free.tolist() == fresh.free.tolist()
    at = problem.node_index["vnpu-310p-1"]
    assert applied.problem.free[at] == 0 and applied.problem.free[problem.node_index[
        "train-1"]] == 5


# --------------------------------------------------------------------------- vNPU:
# a PATCH changes a vNPU node's chips and the vnpu-jobs, by the full body's rules


def _stored() -> tuple[Problem, CacheLifecycle]:
    return stored_example("vnpu-inference")


def _apply(data: dict[str, Any]) -> Any:
    return apply(_stored()[0], data)


def test_a_chip_delta_reaches_the_vnpu_view_and_the_greedy_plan() -> None:
    problem, lifecycle = _stored()
    before = greedy_vnpu(problem)
    # vnpu-310p-1's four chips all cut down to one free AI core: 4-core slices go elsewhere
    chips = [{"id": c, "free-cores": 1, "free-cpus": 1, "segmented": True, "dvpp": "null"}
             for c in range(4)]
    applied = apply_delta(problem, lifecycle, ClusterDelta.model_validate({"node-updates": [
        {"name": "vnpu-310p-1", "vnpu-chips": chips, "unfinished-templates": ["vir01"]}]}))
    assert applied.tier == "jobs"
    node = applied.problem.scenario.nodes[problem.node_index["vnpu-310p-1"]]
    assert node.vnpu is not None and node.vnpu.unfinished_templates == ["vir01"]
    assert [c.free_cores for c in node.vnpu.chips or []] == [1, 1, 1, 1]
    view = compile_vnpu(applied.problem)
    assert [c.free_cores for c in view.nodes[view.position[node_at(problem, "vnpu-310p-1")]]
            .chips] == [1, 1, 1, 1]
    fresh = compile_scenario(applied.problem.scenario)  # the same cluster as a full body
    after = greedy_vnpu(applied.problem)
    assert after.nodes == greedy_vnpu(fresh).nodes and after.chips == greedy_vnpu(fresh).chips
    at = problem.node_index["vnpu-310p-1"]
    assert any(at in (nodes or []) for nodes in before.nodes)
    assert not any(at in (nodes or []) for nodes in after.nodes)
    # the stored problem is untouched
    untouched = problem.scenario.nodes[at].vnpu
    assert untouched is not None and untouched.chips is None


def node_at(problem: Problem, name: str) -> int:
    return problem.node_index[name]


def test_vnpu_jobs_are_added_removed_and_replaced() -> None:
    applied = _apply({
        "vnpu-jobs-removed": ["infer-rerank", "infer-ocr"],
        "vnpu-jobs-submitted": [
            {"name": "infer-ocr", "owner-uid": "rs-ocr-2f90", "tasks": 1, "ai-cores": 4,
             "vnpu-dvpp": "yes", "image-size-gb": 25},  # replaced: one replica now
            {"name": "infer-asr", "tasks": 2, "ai-cores": 1}]})
    assert applied.tier == "jobs"
    jobs = {j.name: j for j in applied.problem.scenario.vnpu_jobs}
    assert list(jobs) == ["infer-chat", "infer-embed", "infer-ocr", "infer-asr"]
    assert jobs["infer-ocr"].tasks == 1
    view = compile_vnpu(applied.problem)
    assert [j.name for j in view.jobs] == list(jobs)
    # the replaced job keeps its cache view: rank 0 of rs-ocr-2f90 was on vnpu-310p-3
    assert view.jobs[view.job_index["infer-ocr"]].origin == (
        applied.problem.node_index["vnpu-310p-3"],)
    placement = solve(applied.problem, engine="greedy").placement
    assert check(applied.problem, placement) == []
    assert {jp.name for jp in placement.jobs} >= set(jobs)


@pytest.mark.parametrize(("delta", "words"), [
    ({"node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [
        {"id": 0, "free-cores": 9}]}]}, ["vnpu-310p-1", "free-cores", "exceeds"]),
    ({"node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [{"id": 0}, {"id": 0}]}]},
     ["vnpu-310p-1", "vnpu.chips", "more than once"]),
    ({"node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [
        {"id": c} for c in range(5)]}]}, ["vnpu-310p-1", "5 chips listed"]),
    ({"node-updates": [{"name": "vnpu-310p-1", "unfinished-templates": ["vir99"]}]},
     ["vnpu-310p-1", "unfinished-templates", "vir99"]),
    ({"node-updates": [{"name": "vnpu-310p-1", "unfinished-templates": None}]},
     ["node-updates[0].unfinished-templates"]),
    ({"node-updates": [{"name": "train-1", "vnpu-chips": [{"id": 0}]}]},
     ["node-updates[0].vnpu-chips", "train-1", "not a vNPU node"]),
    ({"node-updates": [{"name": "vnpu-310p-1", "vnpu-chips": [{"id": 0, "dvpp": "maybe"}]}]},
     ["node-updates", "dvpp"]),
    ({"vnpu-jobs-submitted": [{"name": "bad", "tasks": 1, "ai-cores": 3}]},
     ["vnpu job 'bad'", "[1,2,4,8,10]"]),
    ({"vnpu-jobs-submitted": [{"name": "infer-chat", "tasks": 1, "ai-cores": 1}]},
     ["infer-chat", "duplicate"]),
    ({"vnpu-jobs-submitted": [{"name": "train-llm", "tasks": 1, "ai-cores": 1}]},
     ["train-llm", "duplicate"]),
    ({"vnpu-jobs-removed": ["nope"]}, ["vnpu-jobs-removed[0]", "nope", "not pending"]),
    ({"vnpu-jobs-removed": ["train-llm"]}, ["vnpu-jobs-removed[0]", "use jobs-removed"]),
    ({"jobs-removed": ["infer-chat"]}, ["jobs-removed[0]", "use vnpu-jobs-removed"]),
])
def test_a_bad_vnpu_delta_is_refused_and_changes_nothing(delta: dict[str, Any],
                                                         words: list[str]) -> None:
    problem, lifecycle = _stored()
    before = problem.scenario.model_dump_json()
    with pytest.raises((InputError, ValidationError)) as info:
        apply_delta(problem, lifecycle, ClusterDelta.model_validate(delta))
    text = (" ".join(info.value.messages) if isinstance(info.value, InputError)
            else str(info.value))
    assert all(w in text for w in words), text
    assert problem.scenario.model_dump_json() == before


def test_the_replay_log_form_keeps_the_vnpu_fields() -> None:
    delta = ClusterDelta.model_validate({
        "node-updates": [{"name": "vnpu-310p-2", "vnpu-chips": [{"id": 0, "free-cores": 2}],
                          "unfinished-templates": []}],
        "vnpu-jobs-removed": ["infer-rerank"],
        "vnpu-jobs-submitted": [{"name": "infer-asr", "tasks": 2, "ai-cores": 1}]})
    again = ClusterDelta.model_validate_json(compact_delta(delta))
    assert again == delta
