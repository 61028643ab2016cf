"""Shared builders of the importer tests: small clusters as Kubernetes objects."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from benchmarks.kube_dump import EXAMPLE_NOW, DumpBuilder
from models.kube import ClusterImport, Diagnostics, ImportResult
from models.validation import InputError

NOW = EXAMPLE_NOW


def cluster(mode: str = "device-plugin", nodes: int = 4, **params: str) -> DumpBuilder:
    """A small 850-style cluster (``huawei.com/npu``, super pods of 4 nodes)."""
    b = DumpBuilder(mode, now=NOW, resource="huawei.com/npu", chip_type="Ascend850")
    b.params = {"super-pod-size": "8", "prefer-previous-node": "true", **params}
    for i in range(nodes):
        b.node(f"node-{i}", 8, super_pod=i // 4)
    return b


def run(objects: list[dict[str, Any]], previous: Any = None) -> ImportResult:
    """Import a list of objects at ``NOW``."""
    importer = ClusterImport(Diagnostics())
    for obj in objects:
        importer.add(copy.deepcopy(obj))
    return importer.build(now=NOW, previous=previous)


def errors_of(objects: list[dict[str, Any]]) -> list[str]:
    """The messages of the InputError an import raises (fails the test when none)."""
    try:
        run(objects)
    except InputError as exc:
        return exc.messages
    raise AssertionError("the import accepted malformed input")


def find(objects: list[dict[str, Any]], kind: str, name_start: str) -> dict[str, Any]:
    """The first object of ``kind`` whose name starts with ``name_start``."""
    for obj in objects:
        if obj.get("kind") == kind and obj["metadata"]["name"].startswith(name_start):
            return obj
    raise KeyError(f"{kind} {name_start}")


def edit_json(obj: dict[str, Any], key: str, change: Callable[[Any], Any]) -> None:
    """Edit a JSON string held in ``obj['data'][key]``."""
    obj["data"][key] = json.dumps(change(json.loads(obj["data"][key])))


def node_of(result: ImportResult, name: str) -> dict[str, Any]:
    """One node of the imported scenario (plain data)."""
    return next(n for n in result.data["nodes"] if n["name"] == name)


def job_of(result: ImportResult, start: str, section: str = "jobs") -> dict[str, Any]:
    """One job (``jobs`` or ``running``) whose name starts with ``start``."""
    return next(j for j in result.data[section] if j["name"].startswith(start))
