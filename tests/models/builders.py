"""Small builders of scenario and placement data for hand-written tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from models.compiled import Problem, compile_scenario
from models.io import scenario_from_data
from models.placement import PlacementFile

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
