"""Dump reading and the merge of ``--previous``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.kube import import_dumps
from models.kube.jobs import bound_stamp
from models.kube.source import Diagnostics, iter_objects
from models.scenario import AffinityCacheModel, CacheEntry, Scenario
from models.validation import InputError
from tests.models.kube.helpers import NOW, cluster, run


def test_lists_single_objects_and_typed_lists() -> None:
    node = {"metadata": {"name": "n"}}
    assert [o["kind"] for o in iter_objects({"kind": "NodeList", "items": [node]}, "f")] == [
        "Node"]
    assert next(iter(iter_objects({"kind": "Pod", "metadata": {}}, "f")))["kind"] == "Pod"
    with pytest.raises(InputError, match="items\\[0\\]"):
        list(iter_objects({"kind": "List", "items": [3]}, "f"))


def test_directory_skips_other_files_and_unknown_kinds_are_reported(tmp_path: Path) -> None:
    b = cluster()
    b.write(tmp_path)
    (tmp_path / "README.txt").write_text("notes")
    (tmp_path / "extra.json").write_text(json.dumps(
        {"kind": "Service", "apiVersion": "v1", "metadata": {"name": "svc"}}))
    result = import_dumps([str(tmp_path)], now=NOW)
    assert len(result.data["nodes"]) == 4
    assert any("README.txt" in w and "skipped" in w for w in result.warnings)
    assert any("Service" in w and "not read" in w for w in result.warnings)


def test_warnings_of_one_kind_are_aggregated() -> None:
    diag = Diagnostics()
    for i in range(20):
        diag.warn(f"Node n{i}", "same thing")
    (line,) = diag.warnings
    assert line.startswith("20 objects (Node n0, ") and "(+8 more)" in line


def test_previous_cache_is_merged_under_the_live_state() -> None:
    b = cluster(nodes=8)
    b.job("ml", "run", 2, 8, policy="chip8-node8", bound={0: "node-0", 1: "node-1"})
    objects = b.objects()
    owner = b.podgroups[-1]["metadata"]["ownerReferences"][0]["uid"]
    previous = Scenario(affinity_cache=AffinityCacheModel(ttl_seconds=7200, entries=[
        CacheEntry(owner_uid=owner, rank=0, node="node-5", updated=NOW - 100),  # bound wins
        CacheEntry(owner_uid=owner, rank=2, node="node-2", updated=NOW - 100,
                   previous="node-3"),  # kept with its anchor
        CacheEntry(owner_uid="gone-owner", rank=0, node="node-7", updated=NOW - 50),
        CacheEntry(owner_uid="gone-owner", rank=1, node="node-99", updated=NOW - 50),
    ]))
    result = run(objects, previous=previous)
    cache = result.data["affinity-cache"]
    assert cache["ttl-seconds"] == 7200
    got = {(e["owner-uid"], e["rank"]): e for e in cache["entries"]}
    assert got[(owner, 0)]["node"] == "node-0"
    assert got[(owner, 0)]["updated"] == bound_stamp(owner, NOW)
    assert got[(owner, 2)] == {"owner-uid": owner, "rank": 2, "node": "node-2",
                               "updated": NOW - 100, "previous": "node-3"}
    assert got[("gone-owner", 0)]["node"] == "node-7"
    assert ("gone-owner", 1) not in got
    assert any("node-99" in w and "dropped" in w for w in result.warnings)


@pytest.mark.parametrize("kind", ["Node", "Pod", "PodGroup", "PriorityClass", "ConfigMap"])
def test_object_without_usable_metadata_is_an_error(kind: str) -> None:
    objects = [*cluster().objects(), {"kind": kind, "metadata": ["oops"]}]
    with pytest.raises(InputError, match=f"{kind} #\\d+ in <input>: field 'metadata'"):
        run(objects)


def test_configmaps_the_plugin_does_not_read_are_reported() -> None:
    cm = {"kind": "ConfigMap", "metadata": {"name": "vcjob-fault-npu-cm",
                                            "namespace": "volcano-system"},
          "data": {"fault-node": "{}", "remain-retry-times": "{}"}}
    other = {"kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": "x"}}
    warnings = run([*cluster().objects(), cm, other]).warnings
    assert any("vcjob-fault-npu-cm" in w and "rescheduler state" in w for w in warnings)
    assert any("kube-root-ca.crt" in w and "not a ConfigMap the plugin reads" in w
               for w in warnings)
