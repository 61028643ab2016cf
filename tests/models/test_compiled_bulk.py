"""The compiled view built in bulk equals the node-by-node construction.

:func:`models.compiled.compile_scenario` reads the node attributes column by column and
the multilevel trees label by label; ``_reference`` below is the node-by-node construction
it replaced, kept here as the definition the fast code must match.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from benchmarks.generators import FAMILIES, GenParams, generate
from models.compiled import Problem, compile_scenario, natural_key
from models.documents import paused_gc
from models.io import scenario_from_data, scenario_model
from models.scenario import DEFAULT_TOPOTREE, TOPOTREE_LABEL, Health, Scenario
from models.validation import validate_scenario
from tests.models.builders import job, node, scenario

_HEALTH = {Health.HEALTHY: 0, Health.SUBHEALTHY: 1, Health.UNHEALTHY: 2}


def _reference(sc: Scenario) -> dict[str, Any]:
    """The node arrays and trees, computed one node at a time."""
    nodes = sc.nodes
    names = [n.name for n in nodes]
    out: dict[str, Any] = {
        "names": tuple(names),
        "npus": [n.npus for n in nodes],
        "free": [0 if n.vnpu is not None else n.free for n in nodes],
        "health": [_HEALTH[n.health] for n in nodes],
        "super_pod": [n.super_pod_id if n.super_pod_id is not None and n.super_pod_id >= 0
                      else -1 for n in nodes],
        "rack": [n.rack_id if n.rack_id is not None and n.rack_id >= 0 else -1
                 for n in nodes],
        "natural_order": sorted(range(len(nodes)), key=lambda i: natural_key(names[i])),
        "trees": {},
    }
    tree_names = list(sc.config.resource_level_config)
    out["node_tree"] = [tree_names.index(t) if t in tree_names else -1
                        for t in (n.labels.get(TOPOTREE_LABEL, DEFAULT_TOPOTREE)
                                  for n in nodes)]
    for name, levels in sc.config.resource_level_config.items():
        labels = [levels[f"level{i}"].label for i in range(1, len(levels) + 1)]
        member, missing = [], []
        raw: list[list[str | None]] = [[None] * len(nodes) for _ in labels]
        for n, item in enumerate(nodes):
            inside = item.labels.get(TOPOTREE_LABEL, DEFAULT_TOPOTREE) == name
            complete = inside
            for i, label in enumerate(labels):
                value = item.labels.get(label) if inside else None
                if inside and value is None:
                    complete = False
                    missing.append((item.name, label))
                raw[i][n] = value
            member.append(complete)
        values = [sorted({v for v in column if v is not None}, key=natural_key)
                  for column in raw]
        out["trees"][name] = {
            "labels": tuple(labels), "member": member, "missing": tuple(missing),
            "level_values": tuple(tuple(v) for v in values),
            "level_value": [[-1 if v is None else values[i].index(v) for v in column]
                            for i, column in enumerate(raw)],
        }
    return out


def _assert_same(problem: Problem) -> None:
    ref = _reference(problem.scenario)
    assert problem.node_names == ref["names"]
    for key in ("npus", "free", "health", "super_pod", "rack", "natural_order",
                "node_tree"):
        assert getattr(problem, key).tolist() == ref[key], key
    assert problem.natural_pos[problem.natural_order].tolist() == list(range(problem.num_nodes))
    assert problem.npus.dtype == np.int32 and problem.health.dtype == np.int8
    assert problem.super_pod.dtype == np.int32 and problem.rack.dtype == np.int32
    assert set(problem.trees) == set(ref["trees"])
    for name, view in problem.trees.items():
        want = ref["trees"][name]
        assert view.labels == want["labels"]
        assert view.member.tolist() == want["member"]
        assert view.missing == want["missing"]
        assert view.level_values == want["level_values"]
        assert [arr.tolist() for arr in view.level_value] == want["level_value"]


@pytest.mark.parametrize("family", FAMILIES)
def test_generated_clusters_compile_as_node_by_node(family: str) -> None:
    problem = compile_scenario(generate(GenParams(family, nodes=1024, seed=3, jobs=4)))
    _assert_same(problem)


def test_edge_cases_compile_as_node_by_node() -> None:
    levels = {"level1": {"label": "rack"}, "level2": {"label": "switch"}}
    nodes = [
        node("n10", 16, labels={"rack": "r2", "switch": "s1"}, health="subhealthy"),
        node("n9", 16, labels={"rack": "r10", "switch": "s1"}, super_pod_id=-3, rack_id=4),
        node("n2", 16, labels={"rack": "r2"}, health="unhealthy"),  # lacks level2
        node("n1", 16, labels={"switch": "s0", TOPOTREE_LABEL: "other"}, super_pod_id=7),
        node("x", 16, labels={TOPOTREE_LABEL: "absent", "rack": "r1"}),
        node("v0", 8, vnpu={"chip-kind": "910B3"}),
        node("n01", 16, free=0, labels={"rack": 5, "switch": True}),  # numbers as labels
    ]
    data = scenario(nodes, [job("j", policy="multilevel", tasks=1, npu=16,
                                affinity_config="level1=1")],
                    config={"resource-level-config": {DEFAULT_TOPOTREE: levels,
                                                      "other": levels}})
    problem = compile_scenario(scenario_from_data(data))
    _assert_same(problem)
    assert problem.trees[DEFAULT_TOPOTREE].missing == (("n2", "switch"), ("v0", "rack"),
                                                       ("v0", "switch"))
    assert problem.free[problem.node_index["v0"]] == 0


def test_no_nodes_compile() -> None:
    problem = compile_scenario(Scenario())
    assert problem.num_nodes == 0 and problem.super_pod.tolist() == []


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_gc_restores_the_collector(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(RuntimeError), paused_gc():
            assert not gc.isenabled()
            raise RuntimeError("inside")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def _with_errors() -> Scenario:
    """Valid nodes; a cache entry and a running rank naming a node that does not exist."""
    data = scenario([node("n0"), node("n1", free=4), node("n2", super_pod_id=1)],
                    [job("a", running_ranks={"0": "ghost"}, tasks=2, pod_rescheduling=True)],
                    cache=[{"owner-uid": "u", "rank": 0, "node": "nowhere"}])
    return scenario_model(data)


def test_checked_nodes_give_the_same_messages_when_the_nodes_hold() -> None:
    sc = _with_errors()
    shapes, messages = validate_scenario(sc)
    names = {n.name: i for i, n in enumerate(sc.nodes)}
    again = validate_scenario(sc, checked_nodes=names)
    assert messages and any("ghost" in m for m in messages)
    assert any("nowhere" in m for m in messages)
    assert again == (shapes, messages)


def test_node_rules_are_reported_node_by_node() -> None:
    data = scenario([node("n0"), node("n0"), node("n1", free=9)])
    _, messages = validate_scenario(scenario_model(data))
    assert any("node 'n0': field 'name': duplicate node name (node #1)" in m for m in messages)
    assert any("node 'n1': field 'free': free 9 must be between 0 and npus (8)" in m
               for m in messages)
