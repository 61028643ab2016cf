"""Small builders of scenario and placement data for hand-written tests."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from models.compiled import Problem, compile_scenario
from models.io import scenario_from_data
from models.placement import PlacementFile, Status
from models.plan import Plan, to_placement

NOW = 1_764_400_000


def node(name: str, npus: int = 8, free: int | None = None, **extra: Any) -> dict[str, Any]:
    """One node entry (``free`` defaults to ``npus``); extra keys use contract spelling."""
    data: dict[str, Any] = {"name": name, "npus": npus, "free": npus if free is None else free}
    data.update({key.replace("_", "-"): value for key, value in extra.items()})
    return data


def job(name: str, policy: str = "chip8-node8", tasks: int = 1, npu: int = 8,
        **extra: Any) -> dict[str, Any]:
    """One pending job entry; extra keys are given with ``_`` for ``-``."""
    data: dict[str, Any] = {"name": name, "policy": policy, "tasks": tasks, "npu-per-task": npu}
    data.update({key.replace("_", "-"): value for key, value in extra.items()})
    return data


def scenario(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]] | None = None,
             config: dict[str, Any] | None = None,
             cache: list[dict[str, Any]] | None = None, ttl: int | None = None,
             now: int | None = NOW) -> dict[str, Any]:
    """A scenario document."""
    data: dict[str, Any] = {}
    if now is not None:
        data["now"] = now
    if config is not None:
        data["config"] = config
    data["nodes"] = nodes
    if cache is not None or ttl is not None:
        section: dict[str, Any] = {"entries": cache or []}
        if ttl is not None:
            section["ttl-seconds"] = ttl
        data["affinity-cache"] = section
    data["jobs"] = jobs or []
    return data


def entry(owner: str, rank: int, node_name: str, updated: int = NOW - 60) -> dict[str, Any]:
    """One affinity-cache row."""
    return {"owner-uid": owner, "rank": rank, "node": node_name, "updated": updated}


def write(path: Path, data: Any, fmt: str | None = None) -> Path:
    """Write ``data`` as YAML or JSON (format from the suffix unless given)."""
    fmt = fmt or ("json" if path.suffix == ".json" else "yaml")
    text = json.dumps(data, indent=1) if fmt == "json" else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def problem(data: dict[str, Any]) -> Problem:
    """Validate and compile a scenario document."""
    return compile_scenario(scenario_from_data(copy.deepcopy(data), "<test>"), "<test>")


def placement(*jobs: dict[str, Any], **top: Any) -> PlacementFile:
    """A placement file from job entries (``ranks`` may be a list: rank r = list[r])."""
    entries = []
    for item in jobs:
        item = dict(item)
        ranks = item.get("ranks")
        if isinstance(ranks, list):
            item["ranks"] = {str(r): n for r, n in enumerate(ranks)}
        item.setdefault("placed", bool(item.get("ranks")))
        if not item["placed"]:
            item.setdefault("reason", "no room")
        entries.append(item)
    return PlacementFile.model_validate({"engine": "test", "jobs": entries, **top})


def node_indices(problem: Problem, names: Sequence[str]) -> np.ndarray:
    """The node indices of ``names`` in ``problem`` (int32, in order)."""
    return np.array([problem.node_index[n] for n in names], dtype=np.int32)


def one_job_plan(problem: Problem, j: int, nodes: np.ndarray | None) -> Plan:
    """A plan with job ``j`` on ``nodes`` (node index per rank), every other job unplaced."""
    plan = Plan.empty(problem)
    plan.nodes[j] = nodes
    return plan


def one_job_placement(problem: Problem, j: int, nodes: np.ndarray) -> PlacementFile:
    """:func:`one_job_plan` as greedy's placement file (for the validator)."""
    return to_placement(problem, one_job_plan(problem, j, nodes), engine="greedy",
                        status=Status.GREEDY)


def placed(name: str, nodes: list[str], **extra: Any) -> dict[str, Any]:
    """A placed job entry: rank r on ``nodes[r]``."""
    return {"name": name, "placed": True, "ranks": {str(r): n for r, n in enumerate(nodes)},
            **extra}


def unplaced(name: str, reason: str = "no room") -> dict[str, Any]:
    """An unplaced job entry."""
    return {"name": name, "placed": False, "reason": reason, "ranks": {}}


def scenario_examples() -> list[str]:
    """Bundled examples that are scenarios (``*.events.yaml`` files are simulate events)."""
    from solver.doors import example_names

    return [name for name in example_names() if not name.endswith(".events")]


def pod_node(name: str, pod: int | None = None, rack: int | None = None,
             labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A node row, optionally in super pod ``pod``, rack ``rack`` and with ``labels``."""
    data = node(name, **extra)
    if pod is not None:
        data["super-pod-id"] = pod
    if rack is not None:
        data["rack-id"] = rack
    if labels is not None:
        data["labels"] = labels
    return data


# --------------------------------------------------------------------------- pod level
# Set-ups of the pod-level rescheduling tests (partly running jobs), shared by
# greedy's tests (tests/heuristics/test_podlevel.py), CP-SAT's, the model cache's and the
# CLI's.

#: 850 / A3: the super pods of :func:`sp_nodes` and :func:`a3_nodes`.
SP_CONFIG = {"super-pod-size": 16, "reserve-nodes": 0}

#: An 8-rank 850 job (blocks of 4) that ran on n0..n3 (block 0) and n8..n11 (block 1).
OLD = {r: f"n{r}" if r < 4 else f"n{r + 4}" for r in range(8)}


def sp_nodes(busy: set[str], sick: frozenset[str] | set[str] = frozenset()
             ) -> list[dict[str, Any]]:
    """n0..n15 (8 NPUs) in super pods 0 and 1; ``busy`` nodes full, ``sick`` unhealthy."""
    out = []
    for i in range(16):
        name = f"n{i}"
        out.append(pod_node(name, i // 8, free=0 if name in busy else 8,
                            health="unhealthy" if name in sick else "healthy"))
    return out


def sp_job(pending: list[int], faults: list[int], sessions: int = 0,
           policy: str = "chip8-node8-sp") -> dict[str, Any]:
    """Job ``t``, the :data:`OLD` 850 job with its ``pending`` ranks not running."""
    running = {r: n for r, n in OLD.items() if r not in pending}
    return job("t", policy, tasks=8, npu=8, sp_block=32 if policy == "chip8-node8-sp" else 64,
               owner_uid="u", pod_rescheduling=True, pending_sessions=sessions,
               running_ranks=running, fault_ranks=faults)


def sp_cache() -> list[dict[str, Any]]:
    """The cache rows of :data:`OLD` (owner ``u``)."""
    return [entry("u", r, n) for r, n in OLD.items()]


def a3_nodes() -> list[dict[str, Any]]:
    """n0..n15 with 16 NPUs in super pods 0 and 1; :data:`OLD`'s nodes full but rank 2's."""
    nodes = [pod_node(f"n{i}", i // 8, npus=16, free=16) for i in range(16)]
    for n in nodes:
        if n["name"] in {OLD[r] for r in range(8) if r != 2}:
            n["free"] = 0
    return nodes


def a3_job(**extra: Any) -> dict[str, Any]:
    """Job ``a3`` (A3, 16-NPU nodes, blocks of 4) on :data:`OLD`; rank 2 lost its pod."""
    return job("a3", "chip2-node16-sp", tasks=8, npu=16, sp_block=64, owner_uid="u",
               running_ranks={r: n for r, n in OLD.items() if r != 2}, fault_ranks=[2],
               **extra)


#: 950: racks of 8 nodes.
RACK_CONFIG = {"super-pod-size": 64}


def rack_nodes(busy: set[str], sick: frozenset[str] | set[str] = frozenset()
               ) -> list[dict[str, Any]]:
    """Super pod 0: rack 0 = r0n0..r0n7, rack 1 = r1n0..r1n7; super pod 1: rack 8."""
    out = []
    for rack, pod in ((0, 0), (1, 0), (8, 1)):
        for i in range(8):
            name = f"r{rack}n{i}"
            out.append(pod_node(name, pod, rack, free=0 if name in busy else 8,
                                health="unhealthy" if name in sick else "healthy"))
    return out


def rack_job(sessions: int, tasks: int = 4, ra_block: int = 8,
             pending: tuple[int, ...] = (3,), old: dict[int, str] | None = None,
             **extra: Any) -> dict[str, Any]:
    """Job ``r`` (950) that ran on ``old`` (default r0n0..); ``pending[0]`` is its fault."""
    old = old or {r: f"r0n{r}" for r in range(tasks)}
    return job("r", "chip8-node8-ra64-sp", tasks=tasks, npu=8, sp_block=32, ra_block=ra_block,
               owner_uid="u", pod_rescheduling=True, pending_sessions=sessions,
               running_ranks={r: n for r, n in old.items() if r not in pending},
               fault_ranks=[pending[0]], **extra)


def rack_cache(old: dict[int, str] | None = None, tasks: int = 4) -> list[dict[str, Any]]:
    """The cache rows of ``old`` (default r0n0..; owner ``u``)."""
    old = old or {r: f"r0n{r}" for r in range(tasks)}
    return [entry("u", r, n) for r, n in old.items()]


def rack_block_lost(sessions: int) -> dict[str, Any]:
    """A 950 job (tasks 8, blocks of 4 in one super pod, windows of 4 in one rack):
    block 0 runs on r0n0..r0n3; block 1 (ranks 4..7) lost every pod, its old super pod
    1 (rack 8) is full; super pod 0 has room in rack 1 (reference §2.5.5)."""
    old = {r: f"r0n{r}" if r < 4 else f"r8n{r - 4}" for r in range(8)}
    busy = {old[r] for r in range(4)} | {f"r8n{i}" for i in range(8)}
    data = rack_job(sessions, tasks=8, pending=(5, 4, 6, 7), old=old)
    return scenario(rack_nodes(busy), [data], RACK_CONFIG, cache=rack_cache(old, tasks=8))


#: Multilevel: level1 groups by the ``sw`` label.
ML_CONFIG = {"resource-level-config": {"default": {"level1": {"label": "sw"}}}}

#: E28's old layout: level1 group W0 = ranks 0, 1 on a0, a1; W1 = ranks 2, 3 on b0, b1.
ML_OLD = {0: "a0", 1: "a1", 2: "b0", 3: "b1"}


def ml_nodes(switches: dict[str, str], free: set[str]) -> list[dict[str, Any]]:
    """A node per name of ``switches`` (name -> its ``sw`` label), ``free`` ones empty,
    the others full; b1 (rank 3's old node) is down."""
    return [pod_node(n, labels={"sw": sw}, free=8 if n in free else 0,
                     health="unhealthy" if n == "b1" else "healthy")
            for n, sw in switches.items()]


def ml_job(pending: tuple[int, ...], sessions: int = 0, **extra: Any) -> dict[str, Any]:
    """Job ``m`` (multilevel, level1 groups of 2) on :data:`ML_OLD`; rank 3 is the fault
    and ``pending`` ranks are not running."""
    return job("m", "multilevel", tasks=4, npu=8, affinity_config="level1=2", owner_uid="u",
               pod_rescheduling=True, pending_sessions=sessions, fault_ranks=[3],
               running_ranks={r: n for r, n in ML_OLD.items() if r not in pending}, **extra)


def ml_cache() -> list[dict[str, Any]]:
    """The cache rows of :data:`ML_OLD` (owner ``u``)."""
    return [entry("u", r, n) for r, n in ML_OLD.items()]


def ml_e28(free: set[str], pending: tuple[int, ...], sessions: int = 0) -> Problem:
    """E28: job ``m`` on :data:`ML_OLD` (b1's node is down); W0 = a0..a2, W1 = b0..b2,
    W2 = c0, c1; ``free`` nodes empty."""
    switches = {"a0": "w0", "a1": "w0", "a2": "w0", "b0": "w1", "b1": "w1", "b2": "w1",
                "c0": "w2", "c1": "w2"}
    return problem(scenario(ml_nodes(switches, free), [ml_job(pending, sessions)], ML_CONFIG,
                            cache=ml_cache()))
