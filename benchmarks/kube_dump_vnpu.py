"""The bundled dump of a cluster with dynamic vNPU (``models/kube/examples/vnpu-inference/``).

Four Atlas 800T A2 training nodes (``huawei.com/Ascend910``, device-plugin mode) run a
4-rank training gang; two Atlas 300I Duo servers (``huawei.com/npu-core``, Ascend310P
chips of 8 AI cores) serve inference from vNPU slices: a chat service runs two replicas
on vnpu-1 (template vir04_3c), one replica of an embedding service is being cut on vnpu-2
(no ``huawei.com/AscendReal`` yet), and the chat service scales up by two pending
replicas.  ``python -m benchmarks.kube_dump_vnpu OUT`` writes it; the bundled copy is
what this module writes (a test checks it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.kube_dump import EXAMPLE_NOW, DumpBuilder, _stamp, _uid


def _vnpu_node(name: str, chips: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": _uid("node", name),
                         "creationTimestamp": _stamp(EXAMPLE_NOW - 86400 * 30),
                         "labels": {"kubernetes.io/hostname": name,
                                    "accelerator": "huawei-Ascend310P",
                                    "servertype": "Ascend310P-8",
                                    "node.kubernetes.io/npu.chip.name": "310P3",
                                    "nodeDEnable": "on"}},
            "spec": {},
            "status": {"capacity": {"huawei.com/npu-core": str(8 * chips), "cpu": "192"},
                       "allocatable": {"huawei.com/npu-core": str(8 * chips), "cpu": "190"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _device_cm(name: str, chips: int) -> dict[str, Any]:
    devices = {"huawei.com/Ascend310P": ",".join(f"Ascend310P-{i}" for i in range(chips)),
               "huawei.com/Ascend310P-Unhealthy": ""}
    info = {"DeviceInfo": {"DeviceList": devices, "UpdateTime": EXAMPLE_NOW - 5},
            "SuperPodID": -1, "ServerIndex": 0}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"mindx-dl-deviceinfo-{name}", "namespace": "kube-system",
                         "uid": _uid("cm", name), "labels": {"mx-consumer-cim": "true"}},
            "data": {"DeviceInfoCfg": json.dumps(info, separators=(",", ":"))}}


def _service(namespace: str, name: str, cores: int, replicas: list[tuple[str, str, bool]],
             pending: int, labels: dict[str, str]) -> tuple[dict[str, Any],
                                                            list[dict[str, Any]]]:
    """A PodGroup owned by a ReplicaSet and its pods: (node, npu-core annotation, cut)."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-rs",
             "uid": _uid("rs", namespace, name), "controller": True}
    group = f"{name}-group"
    podgroup = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": group, "namespace": namespace,
                             "uid": _uid("pg", namespace, name), "ownerReferences": [owner],
                             "creationTimestamp": _stamp(EXAMPLE_NOW - 86400)},
                "spec": {"minMember": 1, "priorityClassName": "inference"},
                "status": {"phase": "Running"}}
    pods = []
    rows: list[tuple[str, str | None, bool]] = [*replicas, *[("", None, False)] * pending]
    for rank, (node, annotation, cut) in enumerate(rows):
        annotations = {"scheduling.k8s.io/group-name": group, "hccl/rankIndex": str(rank)}
        if annotation:
            annotations["huawei.com/npu-core"] = annotation
            if cut:
                annotations["huawei.com/AscendReal"] = f"Ascend310P-{cores}c-{rank}"
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{rank}", "namespace": namespace,
                         "uid": _uid("pod", namespace, name, rank), "labels": dict(labels),
                         "annotations": annotations, "ownerReferences": [owner],
                         "creationTimestamp": _stamp(EXAMPLE_NOW - 3600)},
            "spec": {"nodeName": node, "priorityClassName": "inference",
                     "containers": [{"name": "server", "resources": {
                         "requests": {"huawei.com/npu-core": str(cores)},
                         "limits": {"huawei.com/npu-core": str(cores)}}}]},
            "status": {"phase": "Running" if node else "Pending"}})
    return podgroup, pods


def example_vnpu() -> dict[str, list[dict[str, Any]]]:
    """The example's objects by file name."""
    b = DumpBuilder("device-plugin", now=EXAMPLE_NOW, chip_type="910B3")
    b.params = {"prefer-previous-node": "true"}
    for i in range(1, 5):
        b.node(f"train-{i}", 8)
    b.priority_class("inference", 100)
    b.job("ai", "train-llm", 4, 8, policy="chip8-node8",
          bound={r: f"train-{r + 1}" for r in range(4)})
    files = b.files()
    for name in ("vnpu-1", "vnpu-2"):
        files["nodes.json"].append(_vnpu_node(name, 4))
        files["configmaps-cim.json"].append(_device_cm(name, 4))
    chat_pg, chat_pods = _service("ai", "chat", 4,
                                  [("vnpu-1", "0-vir04_3c", True), ("vnpu-1", "1-vir04_3c",
                                                                     True)],
                                  pending=2, labels={})
    embed_pg, embed_pods = _service("ai", "embed", 2, [("vnpu-2", "0-vir02_1c", False)],
                                    pending=0, labels={})
    files["podgroups.json"] += [chat_pg, embed_pg]
    files["pods.json"] += chat_pods + embed_pods
    return files


def write_vnpu_example(out: str | Path) -> list[Path]:
    """Write the example's files under ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, items in example_vnpu().items():
        path = folder / file_name
        listed = {"apiVersion": "v1", "kind": "List", "items": items,
                  "metadata": {"resourceVersion": ""}}
        path.write_text(json.dumps(listed, indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    write_vnpu_example(sys.argv[1])
