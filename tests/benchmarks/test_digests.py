"""The behaviour-identity digests (benchmarks.digests): stable on the same code, and they
notice a changed answer and a changed model."""

from __future__ import annotations

import copy

from benchmarks.digests import EXAMPLES, case_digests, compare
from models.io import load_scenario


def test_digests_repeat_and_notice_changes() -> None:
    scenario = load_scenario(EXAMPLES / "ordinary-8npu.yaml")
    first = {"case": case_digests(scenario, 0.2)}
    again = {"case": case_digests(scenario, 0.2)}
    assert compare(first, again) == []
    assert first["case"]["greedy"]["protos"] == []
    assert len(first["case"]["cpsat"]["protos"]) >= 1
    changed = copy.deepcopy(first)
    changed["case"]["auto"]["answer"] = "0" * 16
    changed["case"]["cpsat"]["protos"][0] = "f" * 16
    lines = compare(first, changed)
    assert any("auto: answer" in line for line in lines)
    assert any("cpsat: protos differ" in line for line in lines)


def test_a_different_model_gives_different_proto_digests() -> None:
    scenario = load_scenario(EXAMPLES / "ordinary-8npu.yaml")
    short = case_digests(scenario, 0.2)
    nodes = [scenario.nodes[0].model_copy(update={"free": 4}), *scenario.nodes[1:]]
    smaller = scenario.model_copy(update={"nodes": nodes})
    other = case_digests(smaller, 0.2)
    assert short["cpsat"]["protos"] != other["cpsat"]["protos"]
