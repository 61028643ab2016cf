"""The extender's lean snapshot path (Pods that ask no Ascend resource and belong to no
Volcano group left out, ``managedFields`` and unused subtrees dropped before the importer
sees anything) imports exactly what the whole snapshot imports: the scenario, the
warnings and the refused jobs, on the bundled dumps and on generated real-size clusters."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks.kube_dump import synthetic
from benchmarks.volcano_session import VolcanoCluster, volcano_snapshot
from models.kube import ClusterImport, Diagnostics, ImportResult
from solver.doors import example_path
from solver.service.extender.protocol import snapshot_objects
from tests.models.kube.test_import_lenient import NOW, mixed_cluster

EXAMPLES = Path(str(example_path("superpod-850"))).parents[1] / "kube" / "examples"


def _import(snapshot: dict[str, Any], cluster: VolcanoCluster, lean: bool) -> ImportResult:
    importer = ClusterImport(Diagnostics(), strict=False, job_images_only=True)
    devices = ClusterImport(Diagnostics(), strict=False)
    for obj in cluster.device_objects():
        devices.add(copy.deepcopy(obj))
    importer.take_devices(devices)
    data = orjson.loads(orjson.dumps(snapshot))  # a parse of its own: lean edits in place
    for obj, source in snapshot_objects(data, 100_000, 1_000_000, lean=lean):
        importer.add(obj, f"snapshot {source}")
    return importer.build(now=cluster.now)


def _same(cluster: VolcanoCluster) -> int:
    snapshot = volcano_snapshot(cluster)
    whole, lean = _import(snapshot, cluster, False), _import(snapshot, cluster, True)
    assert lean.data == whole.data
    assert lean.warnings == whole.warnings
    assert lean.refused == whole.refused
    return len(whole.data["jobs"]) + len(whole.data["running"])


def _example(name: str, now: int) -> VolcanoCluster:
    paths = [str(p) for p in sorted((EXAMPLES / name).rglob("*.json"))
             if "t0" not in p.parts]
    return VolcanoCluster.from_dumps(paths, now)


@pytest.mark.parametrize(("name", "now"), [("superpod-850", NOW + 1800), ("rack-950", NOW),
                                           ("multilevel", NOW), ("vnpu-inference", NOW)])
def test_bundled_dumps_import_the_same_lean(name: str, now: int) -> None:
    assert _same(_example(name, now)) >= 1 or name == "vnpu-inference"


def test_a_generated_real_size_cluster_imports_the_same_lean() -> None:
    builder = synthetic(64, mode="device-plugin")
    # a node agent's image cached on a node: no job runs it, neither path lists it
    agent = next(p for p in builder.pods if p["spec"]["schedulerName"] != "volcano")
    builder.nodes[0]["status"]["images"].insert(
        0, {"names": [agent["spec"]["containers"][0]["image"]], "sizeBytes": 9 * 10**8})
    cluster = VolcanoCluster(builder, builder.now)
    assert _same(cluster) >= 3
    data = orjson.loads(orjson.dumps(volcano_snapshot(cluster)))
    kept = [o for o, _ in snapshot_objects(data, 100_000, 1_000_000) if o["kind"] == "Pod"]
    assert 0 < len(kept) < sum(1 for _ in builder.pods) // 3  # the agents were left out
    assert all("managedFields" not in o["metadata"] for o in kept)


def test_every_refusal_class_imports_the_same_lean() -> None:
    builder = mixed_cluster()
    builder.system_pods()
    assert _same(VolcanoCluster(builder, NOW)) >= 2
