"""Nodes and their device information: capacity, free chips, health, super pod and rack.

Sources (cluster-integration.md A.0–A.3): the Node object (labels, the ``baseDeviceInfos``
annotation, capacity/allocatable, Ready condition, ``spec.unschedulable``); the device-info
records in either ConfigMap mode; NodeD and switch health records.

Both ConfigMap modes are parsed into the same records:

* device-plugin mode: ``kube-system/mindx-dl-deviceinfo-<node>`` (keys ``DeviceInfoCfg``,
  ``SwitchInfoCfg``) and ``mindx-dl/mindx-dl-nodeinfo-<node>`` (key ``NodeInfo``);
* ClusterD mode: ``mindx-dl/cluster-info-device-<m>``, ``cluster-info-node-cm`` and
  ``cluster-info-switch-<x>``, each holding, under a data key equal to its own name, a JSON
  map from ``mindx-dl-deviceinfo-<node>`` (``-nodeinfo-``, ``-switchinfo-``) to a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.kube.source import Diagnostics, describe, parse_json_field, string_map
from models.limits import MAX_IMAGE_SIZE_GB, MAX_TEXT_CHARS, LimitError, check_text
from models.numbers import parse_int
from models.scenario import MAX_NODE_IMAGES, MAX_NODE_NPUS, Health

#: Largest ``sizeBytes`` of a node's image that is imported (the contract's GB limit).
MAX_IMAGE_BYTES = MAX_IMAGE_SIZE_GB * 1e9

#: NPU resources the contract models (Atlas 800/900 A2/A3 and Atlas 350/850/950).
NPU_RESOURCES = ("huawei.com/Ascend910", "huawei.com/npu")
#: Other Ascend resources: inference cards are reported, not modelled; dynamic vNPU
#: (``huawei.com/npu-core``) is imported by ``models.kube.vnpu``.
OTHER_ASCEND_RESOURCES = ("huawei.com/Ascend310P", "huawei.com/Ascend310", "huawei.com/npu-core")
#: Node annotation with the node's full chip list (device plugin).
BASE_DEVICE_INFOS = "baseDeviceInfos"
#: Node label that switches free chips to the ConfigMap list (soft-shared devices).
SOFT_SHARE_LABEL = "softShareDevEnable"
#: ConfigMap names and prefixes of both modes.
DEVICE_CM_PREFIX = "mindx-dl-deviceinfo-"
NODED_CM_PREFIX = "mindx-dl-nodeinfo-"
SWITCH_RECORD_PREFIX = "mindx-dl-switchinfo-"
CLUSTER_DEVICE_PREFIX = "cluster-info-device-"
CLUSTER_NODE_CM = "cluster-info-node-cm"
CLUSTER_SWITCH_PREFIX = "cluster-info-switch-"
DEVICE_NAMESPACE = "kube-system"
MINDX_NAMESPACE = "mindx-dl"
#: Seconds after which upstream restarts its ConfigMap informer (``setNeedRestartInformer``).
STALE_SECONDS = {"device-plugin": 600, "clusterd": 60}


def parse_count(value: Any) -> int:
    """A Kubernetes quantity of whole chips: ``8``, ``"8"`` or ``"8000m"``.

    Raises
    ------
    ValueError
        When the value is not a whole, non-negative count.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a count: {value!r}")
    if isinstance(value, int):
        count = value
    elif isinstance(value, str):
        text = value.strip()
        milli = parse_int(text[:-1]) if text.endswith("m") else None
        whole = parse_int(text)
        if milli is not None:
            if milli % 1000:
                raise ValueError(f"not a whole number of chips: {value!r}")
            count = milli // 1000
        elif whole is not None:
            count = whole
        else:
            raise ValueError(f"not a whole number of chips: {value!r}")
    else:
        raise ValueError(f"not a count: {value!r}")
    if count < 0:
        raise ValueError(f"negative count: {value!r}")
    return count


def chip_list(text: Any) -> list[str]:
    """Split a comma-separated chip list (``"Ascend910-0,Ascend910-1"``); empty → ``[]``."""
    if not isinstance(text, str):
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def is_vnpu(chip: str) -> bool:
    """A vNPU name (``Ascend910-2c-180-3``) has more than two dash-separated parts."""
    return len(chip.split("-")) > 2


@dataclass(slots=True)
class NodeRecord:
    """The fields of one Node object the importer needs."""

    name: str
    obj: str
    labels: dict[str, str]
    resource: str | None
    capacity: int
    allocatable: int
    base_chips: list[str] | None  # None: no baseDeviceInfos annotation
    has_vnpu: bool
    ready: bool
    unschedulable: bool
    other_resources: list[str] = field(default_factory=list)
    npu_core: int = 0  # huawei.com/npu-core capacity (AI cores): a dynamic-vNPU node
    # image locality: status.images, every name of an entry -> its GB
    images: dict[str, float] = field(default_factory=dict)
    #: ``status.images`` as sent, when its reading waits for the jobs' image names
    images_raw: Any = None


@dataclass(slots=True)
class DeviceInfo:
    """One node's device-info record (either mode)."""

    obj: str
    mode: str  # "device-plugin" | "clusterd"
    device_list: dict[str, str]
    update_time: int
    super_pod_id: int | None
    rack_id: int | None  # None: the key is absent (not an A5 1D/2D super pod)


@dataclass(slots=True)
class HealthRecord:
    """A NodeD or switch health record."""

    obj: str
    status: str


def node_record(obj: dict[str, Any], diag: Diagnostics, *, images_later: bool = False
                ) -> NodeRecord | None:
    """Extract a :class:`NodeRecord` from a Node object (errors go to ``diag``).

    ``images_later``: keep ``status.images`` as sent (:attr:`NodeRecord.images_raw`) for
    :func:`node_images` to read once the jobs' images are known."""
    who = describe(obj, "Node")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        diag.error(who, "metadata.name", "missing or not a string")
        return None
    raw_labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if not isinstance(raw_labels, dict):
        diag.error(who, "metadata.labels", "not a mapping")
        return None
    labels = string_map(raw_labels, who, "metadata.labels", diag)
    if labels is None:
        return None
    if not isinstance(annotations, dict):
        diag.error(who, "metadata.annotations", "not a mapping")
        return None
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    if not isinstance(status, dict) or not isinstance(spec, dict):
        diag.error(who, "status", "not a mapping")
        return None
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or capacity
    if not isinstance(capacity, dict) or not isinstance(allocatable, dict):
        diag.error(who, "status.capacity", "not a mapping")
        return None
    resource = None
    cap = alloc = 0
    for res in NPU_RESOURCES:
        if res in capacity:
            try:
                cap = parse_count(capacity[res])
                alloc = parse_count(allocatable.get(res, capacity[res]))
            except ValueError as exc:
                diag.error(who, f"status.capacity[{res}]", str(exc))
                return None
            if cap > 0:
                resource = res
                break
    if cap > MAX_NODE_NPUS:
        diag.error(who, f"status.capacity[{resource}]", f"{cap} chips is more than "
                   f"{MAX_NODE_NPUS}")
        return None
    base: list[str] | None = None
    has_vnpu = False
    raw = annotations.get(BASE_DEVICE_INFOS)
    if raw is not None:
        errors = len(diag.errors)
        parsed = parse_json_field(raw, who, f"metadata.annotations.{BASE_DEVICE_INFOS}", diag)
        if len(diag.errors) > errors:
            return None
        if not isinstance(parsed, dict):
            diag.error(who, f"metadata.annotations.{BASE_DEVICE_INFOS}",
                       "expected a JSON object of chip name -> {IP, SuperDeviceID, ...}")
            return None
        base = [chip for chip in parsed if not is_vnpu(chip)]
        has_vnpu = len(base) != len(parsed)
    ready = True
    conditions = status.get("conditions") or []
    if isinstance(conditions, list):
        for cond in conditions:
            if isinstance(cond, dict) and cond.get("type") == "Ready":
                ready = cond.get("status") == "True"
    others = [r for r in OTHER_ASCEND_RESOURCES if r in capacity]
    npu_core = 0
    if "huawei.com/npu-core" in capacity:
        try:
            npu_core = parse_count(capacity["huawei.com/npu-core"])
        except ValueError as exc:
            diag.error(who, "status.capacity[huawei.com/npu-core]", str(exc))
            return None
    return NodeRecord(
        name=meta["name"], obj=who, labels=labels,
        resource=resource, capacity=cap, allocatable=alloc, base_chips=base,
        has_vnpu=has_vnpu, ready=ready, unschedulable=bool(spec.get("unschedulable")),
        other_resources=others, npu_core=npu_core,
        images={} if images_later else node_images(status.get("images"), who, diag),
        images_raw=status.get("images") if images_later else None)


def node_images(entries: Any, who: str, diag: Diagnostics,
                wanted: set[str] | None = None) -> dict[str, float]:
    """``status.images`` as ``nodes[].images``: every name of an entry (``repo:tag`` and
    ``repo@sha256:…`` spell one image) -> ``sizeBytes`` in GB (10^9 bytes).

    The list is informational: a malformed entry is skipped with a warning, and past
    :data:`~models.scenario.MAX_NODE_IMAGES` names the rest are left out (warned).
    ``wanted``: only these names are read (the images of the jobs; a name no job runs
    changes no placement)."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        diag.warn(who, "status.images is not a list: the node's images are not imported")
        return {}
    out: dict[str, float] = {}
    for i, entry in enumerate(entries):
        names = entry.get("names") if isinstance(entry, dict) else None
        if wanted is not None and type(names) is list:
            try:
                if wanted.isdisjoint(names):
                    continue  # no name of it is read (most entries: a node holds 30-60)
            except TypeError:
                pass  # an unhashable name: the entry is read below (and skipped there)
        size = entry.get("sizeBytes") if isinstance(entry, dict) else None
        if (not isinstance(names, list) or isinstance(size, bool)
                or not isinstance(size, int | float) or not 0 <= size <= MAX_IMAGE_BYTES):
            diag.warn(who, f"status.images[{i}]: expected names (a list) and sizeBytes "
                      f"(0..{MAX_IMAGE_BYTES:.0f}): entry skipped")
            continue
        for name in names:
            if wanted is not None and name not in wanted:
                continue
            try:
                if not isinstance(name, str) or not name:
                    continue
                check_text(name, MAX_TEXT_CHARS)
            except LimitError as exc:
                diag.warn(who, f"status.images[{i}]: an image name {exc}: name skipped")
                continue
            if len(out) >= MAX_NODE_IMAGES and name not in out:
                diag.warn(who, f"status.images lists more than {MAX_NODE_IMAGES} image names: "
                          "the rest are not imported")
                return out
            out[name] = float(size) / 1e9
    return out


def _json_field(data: dict[str, Any], key: str, who: str, diag: Diagnostics) -> Any:
    raw = data.get(key)
    if raw is None or raw == "":
        return None
    return parse_json_field(raw, who, f"data.{key}", diag)


def _int_field(record: dict[str, Any], key: str, who: str, where: str,
               diag: Diagnostics) -> tuple[bool, int | None]:
    """``(present, value)`` of an integer field; a non-integer is an error."""
    if key not in record or record[key] is None:
        return False, None
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int):
        diag.error(who, f"{where}.{key}", f"expected an integer, got {value!r}")
        return True, None
    if not -(2**63) <= value < 2**63 or (key != "UpdateTime" and not -(2**31) <= value < 2**31):
        diag.error(who, f"{where}.{key}", f"{value} is out of range (int32; int64 for "
                   "UpdateTime)")
        return True, None
    return True, value


def _device_record(record: Any, who: str, where: str, mode: str,
                   diag: Diagnostics) -> DeviceInfo | None:
    if not isinstance(record, dict):
        diag.error(who, where, "expected a JSON object")
        return None
    inner = record.get("DeviceInfo") if mode == "device-plugin" else record
    if not isinstance(inner, dict):
        diag.error(who, f"{where}.DeviceInfo", "missing or not an object")
        return None
    devices = inner.get("DeviceList") or {}
    if not isinstance(devices, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in devices.items()):
        diag.error(who, f"{where}.DeviceList", "expected an object of strings "
                   "(resource key -> comma-separated chips)")
        return None
    _, update = _int_field(inner, "UpdateTime", who, where, diag)
    _, super_pod = _int_field(record, "SuperPodID", who, where, diag)
    has_rack, rack = _int_field(record, "RackID", who, where, diag)
    return DeviceInfo(obj=who, mode=mode, device_list=devices, update_time=update or 0,
                      super_pod_id=super_pod, rack_id=rack if has_rack else None)


def _status_record(record: Any, who: str, where: str,
                   diag: Diagnostics) -> HealthRecord | None:
    """A ``NodeStatus`` record (switch info and NodeD info share the shape)."""
    if not isinstance(record, dict):
        diag.error(who, where, "expected a JSON object")
        return None
    status = record.get("NodeStatus", "")
    if not isinstance(status, str):
        diag.error(who, f"{where}.NodeStatus", f"expected a string, got {status!r}")
        return None
    return HealthRecord(obj=who, status=status)


@dataclass
class DeviceState:
    """Every device-info, NodeD and switch record found, per node and per mode."""

    devices: dict[str, dict[str, DeviceInfo]] = field(
        default_factory=lambda: {"device-plugin": {}, "clusterd": {}})
    noded: dict[str, dict[str, HealthRecord]] = field(
        default_factory=lambda: {"device-plugin": {}, "clusterd": {}})
    switches: dict[str, dict[str, HealthRecord]] = field(
        default_factory=lambda: {"device-plugin": {}, "clusterd": {}})

    def add_configmap(self, obj: dict[str, Any], diag: Diagnostics) -> bool:
        """Take a device-info/NodeD/switch ConfigMap of either mode; ``False`` if not one."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        namespace = str(meta.get("namespace", ""))
        who = describe(obj, "ConfigMap")
        data = obj.get("data") or {}
        if not isinstance(data, dict):
            diag.error(who, "data", "not a mapping")
            return True
        if name.startswith(DEVICE_CM_PREFIX):
            if namespace != DEVICE_NAMESPACE:
                diag.warn(who, f"device-info ConfigMap outside {DEVICE_NAMESPACE}: upstream "
                          "does not read it; ignored")
                return True
            node = name[len(DEVICE_CM_PREFIX):]
            if "DeviceInfoCfg" not in data:
                diag.error(who, "data.DeviceInfoCfg", "missing")
                return True
            parsed = _json_field(data, "DeviceInfoCfg", who, diag)
            if parsed is not None:
                info = _device_record(parsed, who, "data.DeviceInfoCfg", "device-plugin", diag)
                if info is not None:
                    self.devices["device-plugin"][node] = info
            switch = _json_field(data, "SwitchInfoCfg", who, diag)
            if switch is not None:
                rec = _status_record(switch, who, "data.SwitchInfoCfg", diag)
                if rec is not None:
                    self.switches["device-plugin"][node] = rec
            if data.get("ManuallySeparateNPU"):
                diag.warn(who, "ManuallySeparateNPU chips are listed: the device plugin "
                          "reports them unhealthy; only the -Unhealthy list is used")
            return True
        if name.startswith(NODED_CM_PREFIX):
            if namespace != MINDX_NAMESPACE:
                diag.warn(who, f"NodeD ConfigMap outside {MINDX_NAMESPACE}: upstream does not "
                          "read it; ignored")
                return True
            parsed = _json_field(data, "NodeInfo", who, diag)
            if parsed is None:
                if "NodeInfo" not in data:
                    diag.error(who, "data.NodeInfo", "missing")
                return True
            if not isinstance(parsed, dict):
                diag.error(who, "data.NodeInfo", "expected a JSON object")
                return True
            rec = _status_record(parsed.get("NodeInfo"), who, "data.NodeInfo.NodeInfo", diag)
            if rec is not None:
                self.noded["device-plugin"][name[len(NODED_CM_PREFIX):]] = rec
            return True
        is_cluster = (name.startswith((CLUSTER_DEVICE_PREFIX, CLUSTER_SWITCH_PREFIX))
                      or name == CLUSTER_NODE_CM)
        if not is_cluster:
            return False
        if namespace != MINDX_NAMESPACE:
            diag.warn(who, f"ClusterD ConfigMap outside {MINDX_NAMESPACE}: ignored")
            return True
        if name not in data:
            diag.error(who, f"data.{name}", "missing (the data key must equal the "
                       "ConfigMap's name)")
            return True
        parsed = _json_field(data, name, who, diag)
        if parsed is None:
            return True
        if not isinstance(parsed, dict):
            diag.error(who, f"data.{name}", "expected a JSON object of per-node records")
            return True
        for key, record in parsed.items():
            where = f"data.{name}[{key}]"
            if name.startswith(CLUSTER_DEVICE_PREFIX):
                info = _device_record(record, who, where, "clusterd", diag)
                if info is not None:
                    info.obj = f"{who} entry {key}"
                    self.devices["clusterd"][key.removeprefix(DEVICE_CM_PREFIX)] = info
            elif name == CLUSTER_NODE_CM:
                rec = _status_record(record, f"{who} entry {key}", where, diag)
                if rec is not None:
                    self.noded["clusterd"][key.removeprefix(NODED_CM_PREFIX)] = rec
            else:
                rec = _status_record(record, f"{who} entry {key}", where, diag)
                if rec is not None:
                    self.switches["clusterd"][key.removeprefix(SWITCH_RECORD_PREFIX)] = rec
        return True

    def has_mode(self, mode: str) -> bool:
        """Whether any record of ``mode`` was found."""
        return bool(self.devices[mode] or self.noded[mode] or self.switches[mode])


def device_key(devices: dict[str, str], resource: str | None) -> str:
    """The DeviceList key of available chips: the node's NPU resource name."""
    if resource and resource in devices:
        return resource
    for res in NPU_RESOURCES:
        if res in devices:
            return res
    return resource or NPU_RESOURCES[0]


@dataclass(slots=True)
class NodeUsage:
    """What active pods bound to a node hold: chip names and requested chips."""

    chips: set[str] = field(default_factory=set)
    requested: int = 0


def free_chips(record: NodeRecord, info: DeviceInfo | None, usage: NodeUsage,
               self_maintain: bool, diag: Diagnostics) -> tuple[int, set[str]]:
    """Free chips of a node, as the plugin computes them, and its unhealthy chips.

    With ``self-maintain-available-card`` (the default) free chips are the
    ``baseDeviceInfos`` chips minus the chips of active pods, minus ``-Unhealthy`` and
    ``-Recovering``; otherwise the device-info list itself.  Network-unhealthy chips are
    also subtracted (a decision: upstream removes them for distributed jobs only, and a
    scenario has one free count per node).  The count is capped at ``allocatable − Σ pod
    requests`` and at the capacity.
    """
    if info is None:
        return 0, set()
    key = device_key(info.device_list, record.resource)
    unhealthy = set(chip_list(info.device_list.get(f"{key}-Unhealthy")))
    recovering = set(chip_list(info.device_list.get(f"{key}-Recovering")))
    network = set(chip_list(info.device_list.get(f"{key}-NetworkUnhealthy")))
    listed = set(chip_list(info.device_list.get(key)))
    use_list = not self_maintain
    if self_maintain and record.labels.get(SOFT_SHARE_LABEL) == "true":
        diag.warn(record.obj, f"label {SOFT_SHARE_LABEL}=true: free chips taken from the "
                  "device-info list (soft-shared chips are not modelled)")
        use_list = True
    if self_maintain and record.has_vnpu:
        diag.warn(record.obj, "baseDeviceInfos lists vNPU chips: free chips taken from the "
                  "device-info list (vNPU is not modelled)")
        use_list = True
    if use_list:
        free = listed
    elif record.base_chips is None:
        diag.warn(record.obj, f"no {BASE_DEVICE_INFOS} annotation: the plugin sees no free "
                  "chips on the node (free 0)")
        free = set()
    else:
        free = set(record.base_chips) - usage.chips - unhealthy - recovering
    if network & free:
        diag.warn(record.obj, f"network-unhealthy chips {sorted(network & free)}: not counted "
                  "as free (upstream excludes them for distributed jobs only)")
        free -= network
    count = len(free)
    cap = min(record.capacity, max(0, record.allocatable - usage.requested))
    if count > cap:
        diag.warn(record.obj, f"{count} free chips in device info but capacity/allocatable "
                  f"minus pod requests leaves {cap}: capped (upstream marks such a node "
                  "'not stable')")
        count = cap
    return count, unhealthy


def node_health(record: NodeRecord, info: DeviceInfo | None, noded: HealthRecord | None,
                switch: HealthRecord | None, diag: Diagnostics) -> Health:
    """Health with precedence unhealthy > subhealthy > healthy (A.6)."""
    unhealthy = False
    subhealthy = False
    if not record.ready:
        unhealthy = True
        diag.warn(record.obj, "Kubernetes condition Ready is not True: unhealthy")
    if record.unschedulable:
        unhealthy = True
        diag.warn(record.obj, "spec.unschedulable (cordoned): unhealthy")
    if noded is not None:
        if noded.status == "UnHealthy":
            unhealthy = True
        elif noded.status == "PreSeparate":
            unhealthy = True
            diag.warn(noded.obj, "NodeD status PreSeparate: the scenario has no such state; "
                      "imported as unhealthy (the predicate rejects the node)")
        elif noded.status not in ("", "Healthy"):
            diag.warn(noded.obj, f"unknown NodeD status '{noded.status}': ignored")
    if switch is not None:
        if switch.status == "UnHealthy":
            unhealthy = True
        elif switch.status == "SubHealthy":
            subhealthy = True
        elif switch.status not in ("", "Healthy"):
            diag.warn(switch.obj, f"unknown switch status '{switch.status}': ignored")
    if info is not None:
        for key, value in info.device_list.items():
            if not key.endswith("-Fault") or not value:
                continue
            errors = len(diag.errors)
            faults = parse_json_field(value, info.obj, f"DeviceList[{key}]", diag)
            if len(diag.errors) > errors:
                continue
            if not isinstance(faults, list):
                diag.error(info.obj, f"DeviceList[{key}]", "expected a JSON array of faults")
                continue
            if any(isinstance(f, dict) and f.get("fault_handling") == "SubHealthFault"
                   for f in faults):
                subhealthy = True
    if unhealthy:
        return Health.UNHEALTHY
    return Health.SUBHEALTHY if subhealthy else Health.HEALTHY
