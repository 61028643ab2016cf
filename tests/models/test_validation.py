"""Input validation: every rule, one valid and one invalid file each (YAML and JSON).

Each invalid file must be refused with a message that names the file, the job / node /
item, and the field; upstream's rejection texts (reference §1.7, E33) are quoted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from models import documents
from models.compiled import compile_scenario
from models.io import load_scenario
from models.limits import MAX_TASKS
from models.validation import InputError, parse_affinity_config
from tests.models.builders import entry, job, node, scenario, write

TREE = {"default": {"level1": {"label": "rack"}, "level2": {"label": "sw"}}}


def pod_nodes(count: int = 8, npus: int = 8) -> list[dict[str, Any]]:
    """``count`` nodes in super pod 0 / rack 0, labelled for the ``default`` tree."""
    return [node(f"node-{i}", npus, super_pod_id=0, rack_id=0,
                 labels={"rack": "r0", "sw": "s0"}) for i in range(count)]


def busy_nodes() -> list[dict[str, Any]]:
    """:func:`pod_nodes` with node-1 fully used (by a running job of the case)."""
    return [{**n, "free": 0} if n["name"] == "node-1" else n for n in pod_nodes()]


def loose_nodes(count: int = 4, npus: int = 8) -> list[dict[str, Any]]:
    """Nodes in no super pod (so that any super-pod-size is allowed)."""
    return [node(f"node-{i}", npus) for i in range(count)]


def with_job(config: dict[str, Any] | None = None, nodes: list[dict[str, Any]] | None = None,
             **spec: Any) -> dict[str, Any]:
    """A scenario with one job ``j`` (keyword arguments of :func:`job`)."""
    cfg = {"super-pod-size": 16, "resource-level-config": TREE} if config is None else config
    return scenario(nodes if nodes is not None else pod_nodes(), [job("j", **spec)], cfg)


@dataclass(frozen=True)
class Case:
    """One rule: a valid document, an invalid one, and what the message must name."""

    id: str
    valid: Callable[[], dict[str, Any]]
    invalid: Callable[[], dict[str, Any]]
    item: str
    field: str
    text: str


def _set(doc: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    fn(doc)
    return doc


SP: dict[str, Any] = {"policy": "chip8-node8-sp", "npu": 8}
A3: dict[str, Any] = {"policy": "chip2-node16-sp", "npu": 16}
RACK: dict[str, Any] = {"policy": "chip8-node8-ra64-sp", "npu": 8}
ML: dict[str, Any] = {"policy": "multilevel", "npu": 8}
NO_POD: dict[str, Any] = {"nodes": loose_nodes()}

CASES = [
    # --- one case per input rule --------------------------------------------------------
    Case("unknown-policy",
         lambda: with_job(policy="chip8-node8", tasks=2),
         lambda: with_job(policy="chip8-node9", tasks=2),
         "job 'j'", "policy", "unknown policy 'chip8-node9'"),
    Case("sp-block-not-multiple-850",
         lambda: with_job(**SP, tasks=4, sp_block=16),
         lambda: with_job(**SP, tasks=4, sp_block=12),
         "job 'j'", "sp-block", "sp-block(12) is not mutiple of node npu (8)"),
    Case("sp-block-not-multiple-a3-E33",
         lambda: with_job(**A3, tasks=2, sp_block=16),
         lambda: with_job(**A3, tasks=2, sp_block=25),
         "job 'j'", "sp-block", "sp-block(25) is not mutiple of node npu (16)"),
    Case("sp-block-below-node-not-total-E33",
         lambda: with_job(**A3, tasks=2, sp_block=32),
         lambda: with_job(**A3, tasks=2, sp_block=1),
         "job 'j'", "sp-block", "sp-block(1) is not mutiple of node npu (16)"),
    Case("sp-block-not-multiple-950",
         lambda: with_job(**RACK, tasks=4, sp_block=32, ra_block=16),
         lambda: with_job(**RACK, tasks=4, sp_block=20, ra_block=16),
         "job 'j'", "sp-block", "sp-block(20) is not mutiple of node npu (8)"),
    Case("sp-block-zero-E33",
         lambda: with_job(**A3, tasks=2, sp_block=32),
         lambda: with_job(**A3, tasks=2, sp_block=0),
         "job 'j'", "sp-block", "sp-block(0) is invalid"),
    Case("sp-block-negative-850",
         lambda: with_job(**SP, tasks=2, sp_block=16),
         lambda: with_job(**SP, tasks=2, sp_block=-8),
         "job 'j'", "sp-block", "sp-block(-8) is invalid"),
    Case("sp-block-negative-950",
         lambda: with_job(**RACK, tasks=2, sp_block=16),
         lambda: with_job(**RACK, tasks=2, sp_block=-8),
         "job 'j'", "sp-block", "sp-block(-8) is invalid"),
    Case("tasks-not-multiple-of-spblock-850",
         lambda: with_job(**SP, tasks=4, sp_block=16),
         lambda: with_job(**SP, tasks=3, sp_block=16),
         "job 'j'", "sp-block", "tasks 3 is not a multiple of spBlock 2"),
    Case("tasks-not-multiple-of-spblock-950",
         lambda: with_job(**RACK, tasks=4, sp_block=16),
         lambda: with_job(**RACK, tasks=3, sp_block=16),
         "job 'j'", "sp-block", "job require total Pod(3) should be multiple of a sp-block size 2"),
    Case("spblock-not-multiple-of-tpblock",
         lambda: with_job(**RACK, tasks=6, sp_block=48, ra_block=16),
         lambda: with_job(**RACK, tasks=6, sp_block=24, ra_block=16),
         "job 'j'", "ra-block", "spBlock 3 and tasks 6 must be multiples of tpBlock 2"),
    Case("tpblock-bigger-than-spblock",
         lambda: with_job(**RACK, tasks=4, sp_block=32, ra_block=32),
         lambda: with_job(**RACK, tasks=4, sp_block=32, ra_block=64),
         "job 'j'", "ra-block", "Parameter ra-block(64)/8 could not be bigger than sp-block(32)/8"),
    *[
        Case(f"ra-block-{bad}",
             lambda: with_job(**RACK, tasks=8, sp_block=64, ra_block=8),
             functools.partial(with_job, **RACK, tasks=8, sp_block=64, ra_block=bad),
             "job 'j'", "ra-block", f"ra-block({bad}) is invalid")
        for bad in (0, 3, 12, 128, -8)
    ],
    Case("affinity-config-gap",
         lambda: with_job(**ML, tasks=8, affinity_config="level1=2,level2=4"),
         lambda: with_job(**ML, tasks=8, affinity_config="level1=2,level3=4"),
         "job 'j'", "affinity-config",
         "affinity block level2 is not exist, please check if level numbers are continuous"),
    Case("affinity-config-no-level1",
         lambda: with_job(**ML, tasks=8, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=8, affinity_config="level2=2"),
         "job 'j'", "affinity-config", "affinity block level1 is not exist"),
    Case("resource-level-config-gap",
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": TREE}),
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {
             "default": {"level1": {"label": "rack"}, "level3": {"label": "sw"}}}}),
         "config.resource-level-config tree 'default'", "levels",
         "topo-level config is not continuous: levels 1, 3 must be level1..level2"),
    Case("resource-level-config-bad-key",
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": TREE}),
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {
             "default": {"level1": {"label": "rack"}, "lvl2": {"label": "sw"}}}}),
         "config.resource-level-config tree 'default'", "lvl2", "'lvl2' is not a level name"),
    Case("affinity-config-zero",
         lambda: with_job(**ML, tasks=8, affinity_config="level1=1"),
         lambda: with_job(**ML, tasks=8, affinity_config="level1=0"),
         "job 'j'", "affinity-config", "affinity block level1's value 0 must be greater than 0"),
    Case("affinity-config-negative",
         lambda: with_job(**ML, tasks=8, affinity_config="level1=2,level2=4"),
         lambda: with_job(**ML, tasks=8, affinity_config="level1=2,level2=-4"),
         "job 'j'", "affinity-config", "affinity block level2's value -4 must be greater than 0"),
    Case("affinity-config-not-dividing-tasks",
         lambda: with_job(**ML, tasks=8, affinity_config="level1=4"),
         lambda: with_job(**ML, tasks=8, affinity_config="level1=3"),
         "job 'j'", "affinity-config",
         "affinity block level1's value 3 can not be divided by upper level's value 8"),
    Case("affinity-config-not-dividing-level",
         lambda: with_job(**ML, tasks=12, affinity_config="level1=3,level2=6"),
         lambda: with_job(**ML, tasks=12, affinity_config="level1=4,level2=6"),
         "job 'j'", "affinity-config",
         "affinity block level1's value 4 can not be divided by upper level's value 6"),
    Case("super-pod-bigger-than-size",
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": 8}),
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": 4}),
         "super pod 0", "super-pod-id",
         "super-pod-size is smaller than superPod's node size: super pod 0 has 8 nodes but "
         "config.super-pod-size is 4"),
    Case("super-pod-bigger-than-default-size",
         lambda: scenario([node(f"n{i}", super_pod_id=3) for i in range(48)], [job("j")]),
         lambda: scenario([node(f"n{i}", super_pod_id=3) for i in range(49)], [job("j")]),
         "super pod 3", "super-pod-id", "super pod 3 has 49 nodes but config.super-pod-size is 48"),
    Case("duplicate-node-name",
         lambda: scenario([node("node-0"), node("node-1")], [job("j")]),
         lambda: scenario([node("node-0"), node("node-0")], [job("j")]),
         "node 'node-0'", "name", "duplicate node name (node #1)"),
    Case("cache-entry-missing-node",
         lambda: scenario(pod_nodes(), [job("j")], cache=[entry("o1", 0, "node-1")]),
         lambda: scenario(pod_nodes(), [job("j")], cache=[entry("o1", 0, "node-99")]),
         "affinity-cache entry (owner-uid o1, rank 0)", "node",
         "node 'node-99' does not exist in nodes"),
    Case("cache-entry-missing-previous",
         lambda: scenario(pod_nodes(), [job("j")],
                          cache=[{**entry("o1", 0, "node-1"), "previous": "node-2"}]),
         lambda: scenario(pod_nodes(), [job("j")],
                          cache=[{**entry("o1", 0, "node-1"), "previous": "node-99"}]),
         "affinity-cache entry (owner-uid o1, rank 0)", "previous",
         "node 'node-99' does not exist in nodes"),
    Case("cache-entry-duplicate",
         lambda: scenario(pod_nodes(), [job("j")],
                          cache=[entry("o1", 0, "node-1"), entry("o1", 1, "node-1")]),
         lambda: scenario(pod_nodes(), [job("j")],
                          cache=[entry("o1", 0, "node-1"), entry("o1", 0, "node-2")]),
         "affinity-cache entry (owner-uid o1, rank 0)", "rank",
         "the same owner-uid and rank appear more than once"),
    Case("fault-rank-too-big",
         lambda: with_job(tasks=2, fault_ranks=[1]),
         lambda: with_job(tasks=2, fault_ranks=[2]),
         "job 'j'", "fault-ranks", "fault rank 2 does not exist (ranks are 0..1)"),
    Case("fault-rank-negative",
         lambda: with_job(tasks=2, fault_ranks=[0]),
         lambda: with_job(tasks=2, fault_ranks=[-1]),
         "job 'j'", "fault-ranks", "fault rank -1 does not exist"),
    Case("fault-rank-duplicate",
         lambda: with_job(tasks=2, fault_ranks=[0, 1]),
         lambda: with_job(tasks=2, fault_ranks=[1, 1]),
         "job 'j'", "fault-ranks", "fault ranks 1 are listed more than once"),
    Case("free-negative",
         lambda: scenario([node("node-0", free=0)], [job("j")]),
         lambda: scenario([node("node-0", free=-1)], [job("j")]),
         "node 'node-0'", "free", "free -1 must be between 0 and npus (8)"),
    Case("free-above-npus",
         lambda: scenario([node("node-0", free=8)], [job("j")]),
         lambda: scenario([node("node-0", free=9)], [job("j")]),
         "node 'node-0'", "free", "free 9 must be between 0 and npus (8)"),
    # --- unknown fields and wrong types (structural) ------------------------------------------
    Case("unknown-node-field",
         lambda: scenario([node("node-0")], [job("j")]),
         lambda: scenario([{**node("node-0"), "npu": 8}], [job("j")]),
         "node 'node-0' (nodes[0])", "npu", "unknown field"),
    Case("unknown-job-field",
         lambda: scenario(pod_nodes(), [job("j", **SP, tasks=2, sp_block=16)],
                          {"super-pod-size": 16}),
         lambda: scenario(pod_nodes(), [{**job("j", **SP, tasks=2), "spblock": 16}],
                          {"super-pod-size": 16}),
         "job 'j' (jobs[0])", "spblock", "unknown field"),
    Case("unknown-config-field",
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": 16}),
         lambda: scenario(pod_nodes(), [job("j")], {"superpod-size": 16}),
         "config", "superpod-size", "unknown field"),
    Case("unknown-level-field",
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": TREE}),
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {
             "default": {"level1": {"label": "rack", "reserved": 1}}}}),
         "config", "resource-level-config.default.level1.reserved", "unknown field"),
    Case("unknown-cache-field",
         lambda: scenario(pod_nodes(), [job("j")], cache=[entry("o1", 0, "node-1")]),
         lambda: scenario(pod_nodes(), [job("j")],
                          cache=[{**entry("o1", 0, "node-1"), "nod": "x"}]),
         "affinity-cache entries[0]", "nod", "unknown field"),
    Case("unknown-top-level-field",
         lambda: scenario(pod_nodes(), [job("j")]),
         lambda: {**scenario(pod_nodes(), [job("j")]), "job": []},
         "job", "job", "unknown field"),
    Case("tasks-not-an-integer",
         lambda: with_job(tasks=2),
         lambda: with_job(tasks="many"),
         "job 'j' (jobs[0])", "tasks", "valid integer"),
    Case("npus-zero",
         lambda: scenario([node("node-0", 8)], [job("j")]),
         lambda: scenario([node("node-0", 0, free=0)], [job("j")]),
         "node 'node-0' (nodes[0])", "npus", "greater than 0"),
    Case("node-without-name",
         lambda: scenario([node("node-0")], [job("j")]),
         lambda: scenario([{"npus": 8, "free": 8}], [job("j")]),
         "nodes[0]", "name", "Field required"),
    Case("bad-health",
         lambda: scenario([node("node-0", health="subhealthy")], [job("j")]),
         lambda: scenario([node("node-0", health="sick")], [job("j")]),
         "node 'node-0' (nodes[0])", "health", "'healthy', 'subhealthy' or 'unhealthy'"),
    Case("npus-absurd",
         lambda: scenario([node("node-0", 1024)], [job("j")]),
         lambda: scenario([node("node-0", 3_000_000_000, free=8)], [job("j")]),
         "node 'node-0' (nodes[0])", "npus", "less than or equal to 1024 (got 3000000000)"),
    Case("super-pod-id-beyond-int32",
         lambda: scenario([node("node-0", super_pod_id=2**31 - 1)], [job("j")]),
         lambda: scenario([node("node-0", super_pod_id=2**31)], [job("j")]),
         "node 'node-0' (nodes[0])", "super-pod-id", "less than or equal to 2147483647"),
    Case("rack-id-beyond-int32",
         lambda: scenario([node("node-0", rack_id=-(2**40))], [job("j")]),
         lambda: scenario([node("node-0", rack_id=2**40)], [job("j")]),
         "node 'node-0' (nodes[0])", "rack-id", "less than or equal to 2147483647"),
    Case("tasks-absurd",
         lambda: with_job(tasks=MAX_TASKS, npu=1),
         lambda: with_job(tasks=3_000_000_000, npu=1),
         "job 'j' (jobs[0])", "tasks", f"less than or equal to {MAX_TASKS} (got 3000000000)"),
    Case("super-pod-size-absurd",
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": 100_000}),
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": 10**12}),
         "config", "super-pod-size", "less than or equal to 100000"),
    Case("ttl-zero",
         lambda: scenario(pod_nodes(), [job("j")], ttl=60),
         lambda: scenario(pod_nodes(), [job("j")], ttl=0),
         "affinity-cache", "ttl-seconds", "greater than 0"),
    # --- upstream §1.7 texts ----------------------------------------------------------------
    Case("base-handler-chip4-node4-3",
         lambda: with_job(policy="chip4-node4", tasks=2, npu=4),
         lambda: with_job(policy="chip4-node4", tasks=2, npu=3),
         "job 'j'", "npu-per-task",
         "expected: job<j> req npu num should small than 5, and not in [3], actual: task req "
         "npu: 3"),
    Case("base-handler-chip8-node16-9",
         lambda: with_job(policy="chip8-node16", npu=10),
         lambda: with_job(policy="chip8-node16", npu=9),
         "job 'j'", "npu-per-task", "should small than 17, and not in [9, 11, 13, 15]"),
    Case("base-handler-chip8-node8-too-big",
         lambda: with_job(policy="chip8-node8", npu=8),
         lambda: with_job(policy="chip8-node8", npu=9),
         "job 'j'", "npu-per-task", "should small than 9, and not in [], actual: task req npu: 9"),
    Case("a3-ordinary-single-npu",
         lambda: with_job(policy="chip2-node16", tasks=1, npu=1),
         lambda: with_job(policy="chip2-node16", tasks=2, npu=1),
         "job 'j'", "npu-per-task", "only single task job can request single npu"),
    Case("a3-ordinary-even",
         lambda: with_job(policy="chip2-node16", tasks=1, npu=4),
         lambda: with_job(policy="chip2-node16", tasks=1, npu=3),
         "job 'j'", "npu-per-task", "job require npu num should be even number, instead of 3"),
    Case("a3-standalone-request",
         lambda: with_job(**{**A3, "npu": 4}, tasks=1),
         lambda: with_job(**{**A3, "npu": 3}, tasks=1),
         "job 'j'", "npu-per-task", "standalone super-pod job require npu [1, 2*n], instead of 3"),
    Case("a3-sp-block-bigger-than-size",
         lambda: with_job(**A3, tasks=4, sp_block=32, config={"super-pod-size": 2}, **NO_POD),
         lambda: with_job(**A3, tasks=4, sp_block=64, config={"super-pod-size": 2}, **NO_POD),
         "job 'j'", "sp-block", "sp-block(64/16=4) is bigger than size of super-pod(2)"),
    Case("a3-x8-sp-block-text-says-16",
         lambda: with_job(policy="chip2-node8-sp", npu=8, tasks=4, sp_block=16,
                          config={"super-pod-size": 2}, **NO_POD),
         lambda: with_job(policy="chip2-node8-sp", npu=8, tasks=4, sp_block=32,
                          config={"super-pod-size": 2}, **NO_POD),
         "job 'j'", "sp-block", "sp-block(32/16=4) is bigger than size of super-pod(2)"),
    Case("850-sp-block-bigger-than-size",
         lambda: with_job(**SP, tasks=4, sp_block=16, config={"super-pod-size": 2}, **NO_POD),
         lambda: with_job(**SP, tasks=3, sp_block=24, config={"super-pod-size": 2}, **NO_POD),
         "job 'j'", "sp-block", "sp-block(24/8=3) is bigger than size of super-pod(2)"),
    Case("850-distributed-request",
         lambda: with_job(**SP, tasks=2, sp_block=16),
         lambda: with_job(policy="chip8-node8-sp", npu=4, tasks=2, sp_block=8),
         "job 'j'", "npu-per-task", "distributed super-pod job require npu 8*n, instead of 4"),
    Case("a3-distributed-request-E33",
         lambda: with_job(**A3, tasks=2),
         lambda: with_job(policy="chip2-node16-sp", npu=8, tasks=2),
         "job 'j'", "npu-per-task",
         "distributed super-pod job require npu(8) should be equal to node npu(16)"),
    Case("a3-single-sp-block-E33",
         lambda: with_job(**{**A3, "npu": 1}, tasks=1, sp_block=1,
                          config={"super-pod-size": 1}, **NO_POD),
         lambda: with_job(**{**A3, "npu": 1}, tasks=1, sp_block=2,
                          config={"super-pod-size": 1}, **NO_POD),
         "job 'j'", "sp-block", "single super-pod job sp-block annotation should equal require "
         "npu num (sp-block 2, npu-per-task 1)"),
    Case("850-single-sp-block-E33",
         lambda: with_job(policy="chip8-node8-sp", npu=3, tasks=1, sp_block=3,
                          config={"super-pod-size": 1}, **NO_POD),
         lambda: with_job(policy="chip8-node8-sp", npu=3, tasks=1, sp_block=1,
                          config={"super-pod-size": 1}, **NO_POD),
         "job 'j'", "sp-block", "single super-pod job sp-block annotation should equal require "
         "npu num"),
    Case("950-super-pod-size-missing",
         lambda: with_job(**RACK, tasks=2, config={"super-pod-size": 8}),
         lambda: with_job(**RACK, tasks=2, config={}),
         "job 'j'", "config.super-pod-size",
         "Parameter super-pod-size(0) in volcano.yaml is invalid which should be in range "
         "[1,1024]"),
    Case("950-super-pod-size-too-big",
         lambda: with_job(**RACK, tasks=2, config={"super-pod-size": 1024}),
         lambda: with_job(**RACK, tasks=2, config={"super-pod-size": 1025}),
         "job 'j'", "config.super-pod-size", "Parameter super-pod-size(1025) in volcano.yaml"),
    Case("950-sp-block-bigger-than-size",
         lambda: with_job(**RACK, tasks=8, sp_block=64, config={"super-pod-size": 8}),
         lambda: with_job(**RACK, tasks=16, sp_block=128, config={"super-pod-size": 8}),
         "job 'j'", "sp-block", "sp-block(128/8=16) is bigger than size of super-pod(8)"),
    Case("950-single-request",
         lambda: with_job(**{**RACK, "npu": 8}, tasks=1),
         lambda: with_job(**{**RACK, "npu": 9}, tasks=1),
         "job 'j'", "npu-per-task", "single super-pod job require npu [1, 8], instead of 9"),
    Case("950-distributed-request",
         lambda: with_job(**RACK, tasks=2, sp_block=16),
         lambda: with_job(policy="chip8-node8-ra64-sp", npu=4, tasks=4, sp_block=16),
         "job 'j'", "npu-per-task", "distributed super-pod job require npu 8*n, instead of 4"),
    Case("950-ub-memory-too-big",
         lambda: with_job(**RACK, tasks=128, sp_block=64, ra_block=64, ub_memory=True,
                          config={"super-pod-size": 64}, **NO_POD),
         lambda: with_job(**RACK, tasks=136, sp_block=64, ra_block=64, ub_memory=True,
                          config={"super-pod-size": 64}, **NO_POD),
         "job 'j'", "ub-memory", "a UB-memory job may request at most 1024 NPUs, instead of 1088"),
    Case("multilevel-affinity-config-missing",
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=2),
         "job 'j'", "affinity-config", "affinity blocks is empty"),
    Case("multilevel-affinity-config-unparsable",
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=2, affinity_config="level1:2"),
         "job 'j'", "affinity-config", "cannot parse 'level1:2'"),
    Case("multilevel-affinity-config-not-integer",
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=2, affinity_config="level1=two"),
         "job 'j'", "affinity-config", "level1 value 'two' is not an integer"),
    Case("multilevel-affinity-config-twice",
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2,level1=2"),
         "job 'j'", "affinity-config", "level1 is given twice"),
    Case("multilevel-without-trees",
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2", config={}),
         "job 'j'", "policy", "topology label does not match config"),
    # --- fields that belong to another family, and other cross-field rules ---------------------
    Case("ra-block-on-ordinary",
         lambda: with_job(tasks=2),
         lambda: with_job(tasks=2, ra_block=16),
         "job 'j'", "ra-block", "ra-block is only used by chip8-node8-ra64-sp jobs"),
    Case("ub-memory-on-850",
         lambda: with_job(**SP, tasks=2),
         lambda: with_job(**SP, tasks=2, ub_memory=True),
         "job 'j'", "ub-memory", "ub-memory is only used by chip8-node8-ra64-sp jobs"),
    Case("affinity-config-on-ordinary",
         lambda: with_job(tasks=2),
         lambda: with_job(tasks=2, affinity_config="level1=2"),
         "job 'j'", "affinity-config", "affinity-config is only used by multilevel jobs"),
    Case("sp-block-on-multilevel",
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2"),
         lambda: with_job(**ML, tasks=2, affinity_config="level1=2", sp_block=16),
         "job 'j'", "sp-block", "sp-block is not used by multilevel jobs"),
    Case("sp-block-on-ordinary",
         lambda: with_job(tasks=2),
         lambda: with_job(tasks=2, sp_block=16),
         "job 'j'", "sp-block", "sp-block is only used by super-pod policies"),
    Case("duplicate-job-name",
         lambda: scenario(pod_nodes(), [job("a"), job("b")]),
         lambda: scenario(pod_nodes(), [job("a"), job("a")]),
         "job 'a'", "name", "duplicate job name"),
    Case("duplicate-owner-uid",
         lambda: scenario(pod_nodes(), [job("a", owner_uid="u1"), job("b", owner_uid="u2")]),
         lambda: scenario(pod_nodes(), [job("a", owner_uid="u1"), job("b", owner_uid="u1")]),
         "job 'b'", "owner-uid", "owner-uid 'u1' is also used by job 'a'"),
    Case("reserved-node-on-level2",
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {"default": {
             "level1": {"label": "rack", "reservedNode": 1}, "level2": {"label": "sw"}}}}),
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {"default": {
             "level1": {"label": "rack"}, "level2": {"label": "sw", "reservedNode": 1}}}}),
         "config.resource-level-config tree 'default'", "level2.reservedNode",
         "reservedNode is only allowed on level1"),
    Case("level-label-twice",
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": TREE}),
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {"default": {
             "level1": {"label": "rack"}, "level2": {"label": "rack"}}}}),
         "config.resource-level-config tree 'default'", "label",
         "labels 'rack' are used by more than one level"),
    Case("tree-without-levels",
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": TREE}),
         lambda: scenario(pod_nodes(), [job("j")], {"resource-level-config": {"default": {}}}),
         "config.resource-level-config tree 'default'", "levels", "the tree has no levels"),
    Case("super-pod-size-negative",
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": 0}),
         lambda: scenario(pod_nodes(), [job("j")], {"super-pod-size": -3}),
         "config", "super-pod-size", "super-pod-size(-3) is negative"),
    Case("reserve-nodes-negative",
         lambda: scenario(pod_nodes(), [job("j")], {"reserve-nodes": 0}),
         lambda: scenario(pod_nodes(), [job("j")], {"reserve-nodes": -1}),
         "config", "reserve-nodes", "reserve-nodes(-1) is negative"),
    Case("running-job-missing-node",
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "ranks": {0: "node-1"}}]},
         lambda: {**scenario(pod_nodes(), [job("j")]),
                  "running": [{"name": "r", "ranks": {0: "node-77"}}]},
         "running job 'r'", "ranks.0", "node 'node-77' does not exist in nodes"),
    Case("running-job-same-name",
         lambda: {**scenario(pod_nodes(), [job("j")]), "running": [{"name": "r"}]},
         lambda: {**scenario(pod_nodes(), [job("j")]), "running": [{"name": "j"}]},
         "running job 'j'", "name", "a running job has the same name as a pending job"),
    # Running jobs are checked by the rules of pending jobs: validate, plan and
    # simulate agree on them.
    Case("running-job-unknown-policy",
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "policy": "chip8-node8", "ranks": {0: "node-1"}}]},
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "policy": "bogus", "ranks": {0: "node-1"}}]},
         "running job 'r'", "policy", "unknown policy 'bogus'"),
    Case("running-job-absurd-tasks",
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "tasks": 4, "ranks": {0: "node-1"}}]},
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "tasks": 10**9, "ranks": {0: "node-1"}}]},
         "running job 'r' (running[0])", "tasks", f"less than or equal to {MAX_TASKS}"),
    Case("running-job-over-capacity",
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "ranks": {0: "node-1"}}]},
         lambda: {**scenario(pod_nodes(), [job("j")]),
                  "running": [{"name": "r", "ranks": {0: "node-1"}}]},
         "node 'node-1'", "free", "free 8 plus the 8 NPUs of running jobs exceeds npus 8"),
    Case("running-job-rank-beyond-tasks",
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "tasks": 2, "ranks": {1: "node-1"}}]},
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "tasks": 1, "ranks": {1: "node-1"}}]},
         "running job 'r'", "ranks", "ranks 1 are outside 0..0 (tasks 1)"),
    Case("running-job-duplicate-name",
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "ranks": {0: "node-1"}}, {"name": "s"}]},
         lambda: {**scenario(busy_nodes(), [job("j")]),
                  "running": [{"name": "r", "ranks": {0: "node-1"}}, {"name": "r"}]},
         "running job 'r'", "name", "duplicate running job name"),
]


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule(case: Case, fmt: str, tmp_path: Path) -> None:
    """The valid file loads and compiles; the invalid one names file, item and field."""
    good = write(tmp_path / f"good.{fmt}", case.valid())
    compile_scenario(load_scenario(good))
    bad = write(tmp_path / f"bad-{case.id}.{fmt}", case.invalid())
    with pytest.raises(InputError) as info:
        load_scenario(bad)
    messages = info.value.messages
    expected = [str(bad), case.item, f"field '{case.field}'", case.text]
    matching = [m for m in messages if all(part in m for part in expected)]
    assert matching, f"no message contains {expected}; got {messages}"
    assert all(m.startswith(f"{bad}: ") for m in messages)
    assert "Traceback" not in str(info.value)


def test_e33_a3_single_unit_job_passes(tmp_path: Path) -> None:
    """E33 row 4: A3 x16, sp-block 1, one task of 1 NPU, super-pod-size 1: accepted."""
    data = with_job(**{**A3, "npu": 1}, tasks=1, sp_block=1, config={"super-pod-size": 1},
                    **NO_POD)
    problem = compile_scenario(load_scenario(write(tmp_path / "e33.yaml", data)))
    assert problem.jobs[0].sp_block == 1
    assert not problem.jobs[0].whole_node


def test_several_errors_are_reported_at_once(tmp_path: Path) -> None:
    data = scenario(
        [node("node-0", free=9), node("node-0"), node("node-2", free=-2)],
        [job("a", policy="chip8-node9"), job("b", tasks=2, fault_ranks=[5]),
         job("c", **SP, tasks=3, sp_block=16), job("d", **ML, tasks=4, affinity_config="x")],
        {"super-pod-size": 16, "resource-level-config": TREE},
        cache=[entry("o", 0, "ghost")],
    )
    path = write(tmp_path / "many.yaml", data)
    with pytest.raises(InputError) as info:
        load_scenario(path)
    text = "\n".join(info.value.messages)
    for expected in (
        "node 'node-0': field 'free': free 9",
        "node 'node-0': field 'name': duplicate node name",
        "node 'node-2': field 'free': free -2",
        "job 'a': field 'policy': unknown policy",
        "job 'b': field 'fault-ranks': fault rank 5 does not exist",
        "job 'c': field 'sp-block'",
        "job 'd': field 'affinity-config': cannot parse 'x'",
        "affinity-cache entry (owner-uid o, rank 0): field 'node': node 'ghost'",
    ):
        assert expected in text, expected
    assert len(info.value.messages) == 8
    assert all(m.startswith(f"{path}: ") for m in info.value.messages)


def test_several_structural_errors_are_reported_at_once(tmp_path: Path) -> None:
    data = scenario([{**node("node-0"), "npus": "eight"}, {**node("node-1"), "colour": "red"}],
                    [{**job("a"), "tasks": 0}])
    path = write(tmp_path / "types.json", data)
    with pytest.raises(InputError) as info:
        load_scenario(path)
    text = "\n".join(info.value.messages)
    assert "node 'node-0' (nodes[0]): field 'npus'" in text
    assert "node 'node-1' (nodes[1]): field 'colour': unknown field" in text
    assert "job 'a' (jobs[0]): field 'tasks'" in text
    assert len(info.value.messages) == 3


def test_parse_affinity_config_values() -> None:
    assert parse_affinity_config("level1=2, level2=4,") == ((2, 4), [])
    assert parse_affinity_config("level2=4,level1=2") == ((2, 4), [])
    assert parse_affinity_config(None)[0] is None
    assert parse_affinity_config(" ")[1] == [
        "affinity blocks is empty (huawei.com/affinity-config is missing)"]
    assert parse_affinity_config(",")[1] == ["affinity blocks is empty"]


# --------------------------------------------------------------------------- malformed files


@pytest.mark.parametrize(
    ("suffix", "text", "expected"),
    [
        ("yaml", "nodes:\n  - name: a\n   npus: 8\n", "malformed YAML at line 3, column 4"),
        ("yaml", "nodes: [a, b\n", "malformed YAML"),
        ("yaml", "a: 1\n---\nb: 2\n", "a file holds one document"),
        ("json", '{"nodes": [}', "malformed JSON at line 1, column 12"),
        ("json", '{"nodes": []', "malformed JSON at line 1"),
        ("yaml", "- 1\n- 2\n", "expected a mapping at the top level, got list"),
        ("yaml", "", "expected a mapping at the top level, got an empty document"),
        ("yaml", "# only a comment\n", "got an empty document"),
        ("json", '"text"', "expected a mapping at the top level, got str"),
    ],
)
def test_malformed_files(tmp_path: Path, suffix: str, text: str, expected: str) -> None:
    path = tmp_path / f"broken.{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_scenario(path)
    assert len(info.value.messages) == 1
    message = info.value.messages[0]
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the file: No such file or directory"):
        load_scenario(tmp_path / "nope.yaml")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"nodes: []\nname: caf\xe9\n")
    with pytest.raises(InputError, match="cannot read the file as UTF-8 text"):
        load_scenario(path)


def test_file_too_large_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "big.yaml", scenario(pod_nodes(), [job("j")]))
    monkeypatch.setattr(documents, "MAX_FILE_BYTES", 100)
    with pytest.raises(InputError) as info:
        load_scenario(path)
    assert info.value.messages == [
        f"{path}: the file is {path.stat().st_size} bytes; the limit is 100 bytes"]


def test_resource_level_config_bad_json_string(tmp_path: Path) -> None:
    data = scenario(pod_nodes(), [job("j")], {"resource-level-config": "{not json"})
    with pytest.raises(InputError) as info:
        load_scenario(write(tmp_path / "cfg.yaml", data))
    (message,) = info.value.messages
    assert "config: field 'resource-level-config'" in message
