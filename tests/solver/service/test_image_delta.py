"""Image locality: a node's images change by a values-tier delta, and the
patched problem equals a fresh compile of the new scenario."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from models.compiled import Problem, compile_scenario
from models.scenario import Scenario
from solver.service.state import ClusterDelta
from tests.solver.service.conftest import generated
from tests.solver.service.deltas import apply


def _with_images(scenario: Scenario) -> Scenario:
    data = scenario.model_dump(by_alias=True, mode="json", exclude_none=True)
    data["nodes"][0]["images"] = {"llm:1": 30.0, "cv:2": 12.0}
    data["nodes"][1]["images"] = {"llm:1": 30.0}
    for job in data["jobs"]:
        job["image"] = {"name": "llm:1", "size-gb": 30.0}
    return Scenario.model_validate(data)


def _apply(problem: Problem, delta: dict) -> tuple[Problem, str]:
    applied = apply(problem, delta)
    return applied.problem, applied.tier


def _same_holders(a: Problem, b: Problem) -> None:
    assert sorted(a.image_holders) == sorted(b.image_holders)
    for name, nodes in a.image_holders.items():
        assert np.array_equal(nodes, b.image_holders[name]), name


def test_images_are_a_values_tier_change_patched_like_a_fresh_compile() -> None:
    scenario = _with_images(generated("850", 64, 2))
    problem = compile_scenario(scenario)
    names = [n.name for n in scenario.nodes]
    delta = {"node-updates": [{"name": names[0], "images": {"cv:2": 12.0}},
                              {"name": names[5], "images": {"llm:1": 30.0, "new:3": 1.5}},
                              {"name": names[6], "free": 0, "images": {}}]}
    patched, tier = _apply(problem, delta)
    assert tier == "values"
    fresh = compile_scenario(patched.scenario)
    _same_holders(patched, fresh)
    assert patched.image_holders["llm:1"].tolist() == [1, 5]
    assert patched.image_holders["new:3"].tolist() == [5]
    assert patched.scenario.nodes[0].images == {"cv:2": 12.0}
    mask = patched.image_mask("llm:1")
    assert mask is not None and mask[[1, 5]].all() and int(mask.sum()) == 2
    # the original problem is untouched
    assert problem.image_holders["llm:1"].tolist() == [0, 1]


def test_a_bad_image_size_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        ClusterDelta.model_validate({"node-updates": [{"name": "n", "images": {"x": -1}}]})
    assert "node-updates.0.images.x" in str(caught.value)
    # a feasible one passes the same door
    assert ClusterDelta.model_validate(
        {"node-updates": [{"name": "n", "images": {"x": 1}}]}).node_updates[0].images == {"x": 1}
