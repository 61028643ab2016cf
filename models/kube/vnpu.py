"""Import of dynamic vNPU nodes and jobs (``huawei.com/npu-core``; rules in models/docs/vnpu.md).

* A node with ``huawei.com/npu-core`` capacity (and no whole-card NPU resource) becomes a
  node with a ``vnpu`` block: the chip kind from the ``accelerator`` label
  (``huawei-Ascend310P`` / ``huawei-Ascend910``), the server type (label ``servertype``,
  whose second field is the AI cores per chip) and the chip type (label
  ``node.kubernetes.io/npu.chip.name``) — upstream's template-table key; chips = capacity /
  cores per chip; the healthy chips from the device-info list ``huawei.com/<kind>`` minus
  ``huawei.com/<kind>-Unhealthy`` (all chips when there is no device info, with a warning);
  the free resources of each chip from the bound pods' ``huawei.com/npu-core`` annotations
  (``0,1``: whole chips; ``2-vir02_1c``: a slice of chip 2 whose size is the template's).
  A slice whose pod has no ``huawei.com/AscendReal`` yet is being cut: its chip is
  unstable and its template is the node's unfinished template.
* Pods requesting ``huawei.com/npu-core`` form vNPU jobs per PodGroup: the unbound pods
  are a pending ``vnpu-jobs`` entry (``ai-cores`` = the request, ``vnpu-level`` and
  ``vnpu-dvpp`` from the pod labels, ``ring-controller`` from the ``ring-controller.atlas``
  label of the PodGroup, else of the pod); bound pods only use chips and seed the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.kube.jobs import PodRecord, bound_stamp
from models.kube.nodes import DeviceInfo, NodeRecord
from models.kube.source import Diagnostics
from models.numbers import parse_int
from models.scenario import Health
from models.vnpu import A3_PREFIX, ASCEND_310P, CHIP_GEOMETRY, TEMPLATES

NPU_CORE = "huawei.com/npu-core"
REAL_ANNOTATION = "huawei.com/AscendReal"
ACCELERATOR_LABEL = "accelerator"
SERVER_TYPE_LABEL = "servertype"
CHIP_NAME_LABEL = "node.kubernetes.io/npu.chip.name"
VNPU_LABELS = ("vnpu-level", "vnpu-dvpp")
#: The job label that picks upstream's vNPU handler (``GetPluginNameByReq``): the
#: scenario's ``ring-controller``.
RING_CONTROLLER_LABEL = "ring-controller.atlas"


def chip_kind(labels: dict[str, str]) -> tuple[str, str, int] | str:
    """(accelerator kind, template-table key, AI cores per chip), or why not."""
    accelerator = labels.get(ACCELERATOR_LABEL, "")
    parts = accelerator.split("-")
    if len(parts) < 2:
        return f"label {ACCELERATOR_LABEL}={accelerator!r} does not name a chip kind"
    kind = parts[1]
    server = labels.get(SERVER_TYPE_LABEL)
    if server is None:
        return f"no node label {SERVER_TYPE_LABEL}"
    fields = server.split("-")
    cores = parse_int(fields[1]) if len(fields) >= 2 else None
    if cores is None:
        return f"label {SERVER_TYPE_LABEL}={server!r} has no AI-core count"
    if kind == ASCEND_310P:
        key = ASCEND_310P
    elif server.startswith(A3_PREFIX):
        key = server
    else:
        key = labels.get(CHIP_NAME_LABEL, "")
        if not key:
            return f"no node label {CHIP_NAME_LABEL}"
    if key not in CHIP_GEOMETRY:
        return f"chip kind {key!r} has no dynamic vNPU templates"
    return kind, key, cores


def _chip_ids(text: str, kind: str) -> list[int]:
    ids = []
    for name in text.split(","):
        name = name.strip()
        chip = parse_int(name[len(kind) + 1:]) if name.startswith(kind + "-") else None
        if chip is not None:
            ids.append(chip)
    return ids


def vnpu_node(record: NodeRecord, info: DeviceInfo | None, pods: list[PodRecord],
              health: Health, diag: Diagnostics) -> dict[str, Any] | None:
    """The scenario node of a dynamic-vNPU node (None: not usable, reported)."""
    found = chip_kind(record.labels)
    if isinstance(found, str):
        diag.warn(record.obj, f"{NPU_CORE} capacity but {found}: not imported")
        return None
    kind, key, cores = found
    if not any(c == cores for c, _ in CHIP_GEOMETRY[key]):
        diag.warn(record.obj, f"{key} chips with {cores} AI cores are not in upstream's "
                  "table: not imported")
        return None
    cpus = next(p for c, p in CHIP_GEOMETRY[key] if c == cores)
    if record.npu_core % cores:
        diag.warn(record.obj, f"{NPU_CORE} capacity {record.npu_core} is not a multiple of "
                  f"{cores} AI cores per chip: not imported")
        return None
    count = record.npu_core // cores
    if info is not None and f"huawei.com/{kind}" in info.device_list:
        healthy = set(_chip_ids(info.device_list[f"huawei.com/{kind}"], kind))
        healthy -= set(_chip_ids(info.device_list.get(f"huawei.com/{kind}-Unhealthy", ""),
                                 kind))
    else:
        healthy = set(range(count))
        diag.warn(record.obj, f"no device-info list huawei.com/{kind}: all {count} chips "
                  "taken as healthy")
    chips: dict[int, dict[str, Any]] = {
        i: {"id": i, "free-cores": cores, "free-cpus": cpus, "segmented": False,
            "dvpp": "yes", "unstable": False} for i in sorted(healthy) if i < 1024}
    unfinished: set[str] = set()
    table = TEMPLATES[key]
    for pod in pods:
        text = pod.vnpu_annotation
        if not pod.active or not text:
            continue
        if "-" not in text:  # whole cards: "0,1"
            for i in _chip_ids(",".join(f"{kind}-{c}" for c in text.split(",")), kind):
                if i in chips:
                    chips[i].update({"free-cores": 0, "free-cpus": 0})
            continue
        chip_text, _, template = text.partition("-")
        size = table.get(template)
        chip_id = parse_int(chip_text)
        if chip_id is None or size is None:
            diag.warn(pod.obj, f"annotation {NPU_CORE}={text!r} names no chip and template of "
                      f"the {key} table: its slice is not counted")
            continue
        chip = chips.get(chip_id)
        if chip is None:
            continue  # unhealthy chip: upstream skips it too
        chip["free-cores"] = max(0, chip["free-cores"] - size[0])
        chip["free-cpus"] = max(0, chip["free-cpus"] - size[1])
        chip["segmented"] = True
        if size[2].value == "yes":
            chip["dvpp"] = "no"
        elif size[2].value == "null" and chip["dvpp"] != "no":
            chip["dvpp"] = "null"
        if not pod.vnpu_real:
            chip["unstable"] = True
            unfinished.add(template)
    rows = []
    for chip in chips.values():
        rows.append({k: v for k, v in chip.items()
                     if not ((k == "segmented" and v is False) or (k == "unstable" and v is False)
                             or (k == "dvpp" and v == "yes"))})
    untouched = sum(1 for c in chips.values() if c["free-cores"] == cores and not c["segmented"])
    node: dict[str, Any] = {"name": record.name, "npus": max(count, len(chips)),
                            "free": untouched, "health": health.value,
                            "vnpu": {"chip-kind": key, "ai-cores": cores, "chips": rows}}
    if unfinished:
        node["vnpu"]["unfinished-templates"] = sorted(unfinished)
    if record.labels:
        node["labels"] = record.labels
    return node


@dataclass
class VnpuGroup:
    """The npu-core pods of one Volcano job."""

    job_id: str
    pods: list[PodRecord] = field(default_factory=list)


def vnpu_job(group: VnpuGroup, priority: int, owner: str | None, node_names: set[str],
             now: int, diag: Diagnostics, group_labels: dict[str, str] | None = None
             ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A pending ``vnpu-jobs`` entry of a group's unbound pods (None when all are bound)
    and the cache entries of its bound ranks.  ``ring-controller`` comes from the
    PodGroup's ``ring-controller.atlas`` label (``group_labels``), else the first pending
    pod's."""
    live = [p for p in group.pods if p.phase not in ("Succeeded", "Failed")]
    bound = [p for p in live if p.node]
    pending = [p for p in live if not p.node]
    entries = []
    if owner:
        stamp = bound_stamp(owner, now)
        for pod in bound:
            if pod.rank is not None and pod.node in node_names:
                entries.append({"owner-uid": owner, "rank": pod.rank, "node": pod.node,
                                "updated": stamp})
    if not pending:
        return None, entries
    cores = {p.npu_core for p in pending}
    if len(cores) > 1:
        diag.warn(f"PodGroup {group.job_id}", f"pods request different AI-core counts "
                  f"{sorted(cores)}: {max(cores)} used")
    first = pending[0]
    item: dict[str, Any] = {"name": group.job_id, "tasks": len(pending),
                            "ai-cores": max(cores), "priority": priority}
    for label in VNPU_LABELS:
        if label in first.vnpu_labels:
            item[label] = first.vnpu_labels[label]
    family = (group_labels or {}).get(RING_CONTROLLER_LABEL,
                                      first.vnpu_labels.get(RING_CONTROLLER_LABEL))
    if family is not None:
        item["ring-controller"] = family
    if owner and not bound:
        item["owner-uid"] = owner
    elif owner:
        diag.warn(f"PodGroup {group.job_id}", f"partly running: {len(bound)} pods bound, "
                  f"{len(pending)} pending; the pending pods are imported as a vNPU job "
                  "without a cache key")
    return item, entries
