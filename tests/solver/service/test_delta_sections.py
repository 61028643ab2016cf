"""Whole sections in a delta (running jobs, config, the affinity cache), and the delta of
two scenarios (:func:`solver.service.scenario_diff.scenario_delta`) that turns the first
into the second exactly."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.compiled import compile_scenario
from models.kube import import_dumps
from models.scenario import Scenario
from models.validation import InputError
from solver.service.scenario_diff import scenario_delta
from solver.service.state import Cluster, ClusterDelta

DUMPS = Path(__file__).resolve().parents[3] / "models/kube/examples"
EXAMPLES = ("superpod-850/t0", "superpod-850/t1", "rack-950", "multilevel")


@functools.cache
def _scenario(seed: int = 0) -> Scenario:
    """The import of a bundled dump (running jobs, pending jobs, cache entries)."""
    return import_dumps([str(DUMPS / EXAMPLES[seed % len(EXAMPLES)])],
                        now=1_764_400_000).scenario


def _cluster(scenario: Scenario) -> Cluster:
    return Cluster("c", compile_scenario(scenario, "<test>"))


def _apply(scenario: Scenario, target: Scenario) -> dict[str, Any]:
    cluster = _cluster(scenario)
    delta = scenario_delta(scenario, target)
    if delta is not None:
        cluster.apply(ClusterDelta.model_validate(delta))
    return cluster.snapshot.problem.scenario.to_dict()


def test_running_jobs_are_removed_submitted_and_replaced() -> None:
    scenario = _scenario()
    assert scenario.running
    first = scenario.running[0]
    cluster = _cluster(scenario)
    moved = first.model_dump(by_alias=True, mode="json", exclude_none=True)
    cluster.apply(ClusterDelta.model_validate({"running-removed": [first.name],
                                               "running-submitted": [moved]}))
    names = [r.name for r in cluster.snapshot.problem.scenario.running]
    assert names[-1] == first.name and len(names) == len(scenario.running)
    version = cluster.snapshot.version
    with pytest.raises(InputError, match="running job 'nope' does not exist"):
        cluster.apply(ClusterDelta.model_validate({"running-removed": ["nope"]}))
    with pytest.raises(InputError, match="exists already"):
        cluster.apply(ClusterDelta.model_validate({"running-submitted": [moved]}))
    assert cluster.snapshot.version == version  # refused: unchanged


def test_the_cache_section_is_replaced_with_its_own_times() -> None:
    scenario = _scenario()
    node = scenario.nodes[0].name
    section = {"ttl-seconds": 600, "entries": [
        {"owner-uid": "u1", "rank": 0, "node": node, "updated": 100},
        {"owner-uid": "u1", "rank": 1, "node": node, "updated": 50, "previous": node}]}
    cluster = _cluster(scenario)
    cluster.apply(ClusterDelta.model_validate({"affinity-cache": section}))
    stored = cluster.snapshot.problem.scenario.to_dict()["affinity-cache"]
    assert stored == section  # per-entry times kept (a cache event would stamp the owner)
    with pytest.raises(InputError):
        cluster.apply(ClusterDelta.model_validate({"affinity-cache": {"entries": [
            {"owner-uid": "u1", "rank": 0, "node": "no-such-node"}]}}))
    assert cluster.snapshot.problem.scenario.to_dict()["affinity-cache"] == section


def test_config_is_replaced_and_a_replaced_node_keeps_its_cache() -> None:
    scenario = _scenario()
    node = scenario.nodes[2]
    entry = {"owner-uid": "u9", "rank": 0, "node": node.name, "updated": 7}
    cluster = _cluster(scenario)
    cluster.apply(ClusterDelta.model_validate({"affinity-cache": {"entries": [entry]}}))
    config = scenario.config.model_dump(by_alias=True, mode="json", exclude_none=True)
    config["reserve-nodes"] = 5
    info = cluster.apply(ClusterDelta.model_validate({
        "config": config, "nodes-removed": [node.name],
        "nodes-added": [node.model_dump(by_alias=True, mode="json", exclude_none=True)]}))
    assert info.last_update == "structure"
    stored = cluster.snapshot.problem.scenario
    assert stored.config.reserve_nodes == 5
    assert [e.node for e in stored.affinity_cache.entries] == [node.name]


def _mutated(scenario: Scenario, data: st.DataObject) -> Scenario:
    out = copy.deepcopy(scenario.to_dict())
    nodes = out["nodes"]
    for node in nodes:
        change = data.draw(st.sampled_from(["none", "none", "free", "health", "labels",
                                            "super-pod", "images", "drop"]))
        if change == "free":
            node["free"] = data.draw(st.integers(0, node["free"]))
        elif change == "health":
            node["health"] = data.draw(st.sampled_from(["healthy", "unhealthy",
                                                        "subhealthy"]))
        elif change == "labels":
            node["labels"] = {"rack": data.draw(st.sampled_from(["a", "b"]))}
        elif change == "super-pod":
            node.pop("super-pod-id", None)
        elif change == "images":
            node["images"] = {"img": 20.0}
    running_nodes = {n for r in out.get("running", []) for n in r["ranks"].values()}
    cached = {e["node"] for e in out["affinity-cache"]["entries"]}
    kept = [n for n in nodes if n["name"] in running_nodes | cached
            or not data.draw(st.booleans(), label="drop node")]
    out["nodes"] = kept
    jobs = out["jobs"]
    if jobs and data.draw(st.booleans()):
        jobs.insert(0, jobs.pop())  # reordered
    if jobs and data.draw(st.booleans()):
        jobs.pop(data.draw(st.integers(0, len(jobs) - 1)))
    if out.get("running") and data.draw(st.booleans()):
        out["running"].pop(0)
    entries = out["affinity-cache"]["entries"]
    if entries and data.draw(st.booleans()):
        entries[0]["updated"] = entries[0]["updated"] + 1
    out["now"] = (out.get("now") or 0) + data.draw(st.integers(0, 5))
    return Scenario.model_validate(out)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data(), seed=st.integers(0, len(EXAMPLES) - 1))
def test_the_delta_of_two_scenarios_turns_one_into_the_other(data: st.DataObject,
                                                             seed: int) -> None:
    scenario = _scenario(seed)
    target = _mutated(scenario, data)
    assert _apply(scenario, target) == target.to_dict()
    assert scenario_delta(target, target) is None
