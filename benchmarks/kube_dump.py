"""Generators of realistic ``kubectl get -o json`` dumps of Volcano + Ascend clusters.

Used for the bundled example dumps under ``models/kube/examples/`` (850 in device-plugin
mode with two snapshots, 950 in ClusterD mode, multilevel in device-plugin mode) and for a
synthetic dump of any size that measures ``npu-place import``::

    python -m benchmarks.kube_dump --nodes 10000 --out /tmp/dump10k
    /usr/bin/time -v npu-place import /tmp/dump10k --now 1764400000 --output /tmp/s.yaml

The objects carry what the device plugin, NodeD, ClusterD, Volcano and the Ascend plugin
write (reference cluster-integration.md A.0–A.5): node labels and ``baseDeviceInfos``,
extended-resource capacity, device-info ConfigMaps of either mode, PodGroups owned by a
vcjob or AscendJob, pods with ``hccl/rankIndex`` and their chip annotations, the
scheduler ConfigMap's ``init-params``, PriorityClasses and ``job-reschedule-reason``.
With ``realistic`` (the synthetic dumps' default) Nodes and Pods also carry what a real
cluster's do and the importer skips (``managedFields``, ``status.images``, conditions,
volumes, statuses), so that the snapshot path is measured on objects of real size.

Why this file is long: :class:`DumpBuilder` writes every object kind of a snapshot in the
shapes the importer reads, and the real-size additions extend the same Node and Pod
objects it builds (they share its clock, uid and stamp helpers); the bundled examples and
the synthetic cluster are built with it below.  Split, the additions would have to import
the builder's private helpers back.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from models.numbers import parse_int

_SEP = (",", ":")
#: The clock of every bundled example.
EXAMPLE_NOW = 1764400000

#: The node agents of a real Ascend cluster, one pod each on every node: kube-proxy, the
#: CNI agent and the Ascend device plugin (NodeD and a log agent run on many clusters too:
#: ``DumpBuilder.system_pods(daemonsets=...)``).
DAEMONSETS = ("kube-proxy", "calico-node", "ascend-device-plugin")
#: Cluster services spread over the nodes (``DumpBuilder.system_pods``).
SERVICES = ("coredns", "volcano-controllers", "volcano-admission", "clusterd",
            "ascend-operator", "prometheus", "metrics-server", "npu-exporter")


def _uid(*parts: object) -> str:
    return str(uuid.UUID(hashlib.md5("/".join(map(str, parts)).encode()).hexdigest()))


def _stamp(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Node:
    name: str
    chips: list[str]
    used: set[str] = field(default_factory=set)
    unhealthy: list[str] = field(default_factory=list)


@dataclass
class DumpBuilder:
    """Builds the objects of one cluster snapshot, then writes them as kubectl would.

    Parameters
    ----------
    mode
        ``device-plugin`` or ``clusterd``: which device-info ConfigMaps are written (and
        the ``useClusterInfoManager`` init-param).
    now
        The snapshot's clock (unix seconds); device info is written as updated just before.
    resource
        ``huawei.com/Ascend910`` (chips ``Ascend910-N``) or ``huawei.com/npu`` (``npu-N``).
    """

    mode: str
    now: int = EXAMPLE_NOW
    resource: str = "huawei.com/Ascend910"
    chip_type: str = "910B3"
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    podgroups: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    device_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    noded_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    switch_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    reschedule: dict[str, Any] = field(default_factory=dict)
    #: write Nodes and Pods the size a real cluster's are (``managedFields`` of 3-5
    #: managers, 30-60 ``status.images``, the usual conditions, labels and annotations:
    #: 5 KB or more each) instead of only the fields the importer reads
    realistic: bool = False
    _state: dict[str, _Node] = field(default_factory=dict)

    @property
    def chip_prefix(self) -> str:
        """Chip names: ``Ascend910`` or ``npu``."""
        return "npu" if self.resource == "huawei.com/npu" else "Ascend910"

    # ------------------------------------------------------------------ nodes
    def node(self, name: str, npus: int = 8, *, super_pod: int | None = None,
             rack: int | None = None, labels: dict[str, str] | None = None,
             unhealthy_chips: tuple[int, ...] = (), network_unhealthy: tuple[int, ...] = (),
             subhealth_fault: bool = False, noded: str = "Healthy", switch: str | None = None,
             ready: bool = True, unschedulable: bool = False, age: int = 30) -> None:
        """Add a node with its device info, NodeD record and optional switch record."""
        chips = [f"{self.chip_prefix}-{i}" for i in range(npus)]
        bad = [chips[i] for i in unhealthy_chips]
        self._state[name] = _Node(name, chips, unhealthy=bad)
        sp = -2 if super_pod is None else super_pod
        server_index = parse_int(name.rsplit("-", 1)[-1]) or 0
        node_labels = {
            "kubernetes.io/hostname": name, "kubernetes.io/arch": "arm64",
            "kubernetes.io/os": "linux", "host-arch": "huawei-arm",
            "node-role.kubernetes.io/worker": "worker", "workerselector": "dls-worker-node",
            "node.kubernetes.io/npu.chip.name": self.chip_type,
            "accelerator": "huawei-npu" if self.resource == "huawei.com/npu"
            else "huawei-Ascend910",
            "nodeDEnable": "on",
        }
        if super_pod is not None:
            node_labels["huawei.com/topotree.superpodid"] = str(super_pod)
        if rack is not None:
            node_labels["huawei.com/topotree.rackid"] = str(rack)
        node_labels.update(labels or {})
        base = {chip: {"IP": f"10.{(sp + 2) % 250}.{server_index % 250}.{i}",
                       "SuperDeviceID": (sp + 2) * 1000 + i} for i, chip in enumerate(chips)}
        annotations = {"baseDeviceInfos": json.dumps(base, separators=(",", ":")),
                       "serverIndex": str(server_index), "superPodID": str(sp),
                       "node.alpha.kubernetes.io/ttl": "0"}
        capacity = {"cpu": "192", "memory": "1584Gi", "pods": "110",
                    "ephemeral-storage": "3512Gi", self.resource: str(npus)}
        conditions = [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
            {"type": "Ready", "status": "True" if ready else "Unknown",
             "reason": "KubeletReady" if ready else "NodeStatusUnknown",
             "lastHeartbeatTime": _stamp(self.now - 20)},
        ]
        spec: dict[str, Any] = {"podCIDR": f"172.16.{len(self.nodes) % 250}.0/24"}
        if unschedulable:
            spec["unschedulable"] = True
            spec["taints"] = [{"key": "node.kubernetes.io/unschedulable",
                               "effect": "NoSchedule"}]
        if self.realistic:
            _bulk_node(name, node_labels, annotations, conditions, self.now)
        self.nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": _uid("node", name), "labels": node_labels,
                         "annotations": annotations,
                         **({"managedFields": _managed_fields(
                             "Node", name, self.now, 3 + len(self.nodes) % 3)}
                            if self.realistic else {}),
                         "creationTimestamp": _stamp(self.now - 90 * 86400)},
            "spec": spec,
            "status": {"capacity": capacity, "allocatable": dict(capacity, cpu="190"),
                       "conditions": conditions,
                       "nodeInfo": {"architecture": "arm64", "kubeletVersion": "v1.28.9",
                                    "containerRuntimeVersion": "containerd://1.7.13"},
                       **(_bulk_node_status(name, len(self.nodes), self.now)
                          if self.realistic else {})},
        })
        key = self.resource
        devices = {
            f"{key}-Unhealthy": ",".join(bad),
            f"{key}-NetworkUnhealthy": ",".join(chips[i] for i in network_unhealthy),
            f"{key}-Recovering": "",
            f"{key}-Fault": json.dumps([
                {"fault_type": "CardUnhealthy", "npu_name": c, "fault_level": "SeparateNPU",
                 "fault_handling": "SeparateNPU", "fault_code": "80E01801",
                 "large_model_fault_level": "SeparateNPU"} for c in bad] + ([
                {"fault_type": "CardNetworkUnhealthy", "npu_name": chips[-1],
                 "fault_level": "SubHealthFault", "fault_handling": "SubHealthFault",
                 "fault_code": "81078603", "large_model_fault_level": "SubHealthFault"}]
                if subhealth_fault else []), separators=(",", ":")),
        }
        record: dict[str, Any] = {"DeviceList": devices, "UpdateTime": self.now - age,
                                  "SuperPodID": sp, "ServerIndex": server_index}
        if rack is not None:
            record["RackID"] = rack
        self.device_records[name] = record
        self.noded_records[name] = {
            "FaultDevList": [] if noded == "Healthy" else [
                {"DeviceType": "CPU", "DeviceId": 0, "FaultCode": ["0300000D"],
                 "FaultLevel": "PreSeparateFault" if noded == "PreSeparate" else
                 "SeparateFault"}],
            "NodeStatus": noded}
        if switch is not None:
            self.switch_records[name] = {"FaultCode": [] if switch == "Healthy" else
                                         ["[0x00f1ff09,155912,na,na]"],
                                         "FaultLevel": "" if switch == "Healthy" else
                                         "SubHealthFault" if switch == "SubHealthy" else
                                         "Separate", "UpdateTime": self.now - age,
                                         "NodeStatus": switch}

    def occupy(self, node: str, chips: int) -> list[str]:
        """Take ``chips`` free chips of ``node`` (lowest first) for a pod."""
        state = self._state[node]
        free = [c for c in state.chips if c not in state.used and c not in state.unhealthy]
        taken = free[:chips]
        if len(taken) < chips:
            raise ValueError(f"node {node} has only {len(free)} free chips")
        state.used.update(taken)
        return taken

    # ------------------------------------------------------------------ jobs
    def job(self, namespace: str, name: str, tasks: int, npus: int, *,
            policy: str | None = None, annotations: dict[str, str] | None = None,
            labels: dict[str, str] | None = None, priority_class: str | None = None,
            priority: int = 0, bound: dict[int, str] | None = None,
            failed: dict[int, str] | None = None, operator: bool = False,
            selector: str | None = None, age: int = 3600,
            pod_age: int | None = None) -> None:
        """Add a job: its owner-referenced PodGroup and one pod per task.

        ``bound`` maps ranks to nodes (running pods); other ranks are pending pods;
        ``failed`` maps ranks to the nodes of Failed pods.  ``age`` is the PodGroup's age
        in seconds, ``pod_age`` the pods' (default: the same; a rescheduled job's pods
        are younger than its PodGroup).
        """
        bound = bound or {}
        failed = failed or {}
        owner_kind = ("AscendJob", "mindxdl.gitee.com/v1") if operator else (
            "Job", "batch.volcano.sh/v1alpha1")
        owner_uid = _uid("owner", namespace, name)
        pg_name = f"{name}-{owner_uid}"
        job_annotations = dict(annotations or {})
        if policy:
            job_annotations["huawei.com/schedule_policy"] = policy
        job_labels = dict(labels or {})
        created = self.now - age
        owner = {"apiVersion": owner_kind[1], "kind": owner_kind[0], "name": name,
                 "uid": owner_uid, "controller": True, "blockOwnerDeletion": True}
        running = bool(bound) and len(bound) == tasks
        self.podgroups.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": pg_name, "namespace": namespace,
                         "uid": _uid("pg", namespace, name), "ownerReferences": [owner],
                         "annotations": job_annotations, "labels": job_labels,
                         "creationTimestamp": _stamp(created)},
            "spec": {"minMember": tasks, "queue": "default",
                     "minResources": {self.resource: str(tasks * npus),
                                      "cpu": str(tasks * 32), "memory": f"{tasks * 256}Gi"},
                     **({"priorityClassName": priority_class} if priority_class else {})},
            "status": {"phase": "Running" if running else "Inqueue",
                       "running": len(bound)},
        })
        for rank in range(tasks):
            node = bound.get(rank) or failed.get(rank)
            phase = "Running" if rank in bound else "Failed" if rank in failed else "Pending"
            pod_annotations = {"scheduling.k8s.io/group-name": pg_name,
                               "volcano.sh/job-name": name, "volcano.sh/task-spec": "worker",
                               "volcano.sh/job-version": "0", **job_annotations}
            if node is not None:
                chips = self.occupy(node, npus) if rank in bound else [
                    f"{self.chip_prefix}-{i}" for i in range(npus)]
                chip_text = ",".join(chips)
                pod_annotations.update({
                    "hccl/rankIndex": str(rank), self.resource: chip_text,
                    "huawei.com/AscendReal": chip_text,
                    "predicate-time": str(created + 5)})
                if "sp-block" in job_annotations:
                    pod_annotations["super-pod-rank"] = str(rank * npus // int(
                        job_annotations["sp-block"]))
            pod_name = f"{name}-worker-{rank}"
            container = {
                "name": "ascend", "image": "swr.cn-south-1.myhuaweicloud.com/ascendhub/"
                                           "mindspeed-llm:2.1.0-a3-arm",
                "command": ["/bin/bash", "-c", "bash /job/code/train_start.sh"],
                "env": [{"name": "VC_TASK_INDEX", "value": str(rank)},
                        {"name": "ASCEND_VISIBLE_DEVICES",
                         "valueFrom": {"fieldRef": {"fieldPath":
                                       f"metadata.annotations['{self.resource}']"}}}],
                "resources": {
                    "requests": {"cpu": "32", "memory": "256Gi", self.resource: str(npus)},
                    "limits": {"cpu": "32", "memory": "256Gi", self.resource: str(npus)}},
            }
            node_selector = {"host-arch": "huawei-arm"}
            if selector:
                node_selector["accelerator-type"] = selector
            spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [container],
                                    "nodeSelector": node_selector, "priority": priority,
                                    "restartPolicy": "Never"}
            if priority_class:
                spec["priorityClassName"] = priority_class
            if node is not None:
                spec["nodeName"] = node
            status: dict[str, Any] = {"phase": phase}
            if phase == "Pending":
                status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                         "reason": "Unschedulable"}]
            else:
                status["hostIP"] = f"192.168.0.{len(self.pods) % 250}"
                status["startTime"] = _stamp(created + 10)
            if self.realistic:
                _bulk_pod(spec, status, pod_annotations, container, pod_name, self.now)
            self.pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": namespace,
                             "uid": _uid("pod", namespace, pod_name, self.now),
                             "labels": {"volcano.sh/job-name": name,
                                        "volcano.sh/job-namespace": namespace,
                                        "volcano.sh/queue-name": "default",
                                        "volcano.sh/task-spec": "worker", **job_labels},
                             "annotations": pod_annotations,
                             "ownerReferences": [dict(owner)],
                             "creationTimestamp": _stamp(
                                 created if pod_age is None else self.now - pod_age)},
                "spec": spec, "status": status,
            })
            if self.realistic:
                self.pods[-1]["metadata"]["managedFields"] = _managed_fields(
                    "Pod", pod_name, self.now, 3 + len(self.pods) % 3)

    def system_pods(self, daemonsets: tuple[str, ...] = DAEMONSETS,
                    nodes_per_service_pod: int = 8) -> None:
        """Add the pods every real cluster runs besides the NPU jobs' (real size, with
        :attr:`realistic` or not): one pod of each of ``daemonsets`` on every node (the
        node-level agents; no NPU request), and one pod of a cluster service (DNS,
        Volcano's and Ascend's controllers, monitoring) per ``nodes_per_service_pod``
        nodes, spread over the nodes.  Volcano's snapshot lists them in their nodes'
        task lists only (they have no PodGroup)."""
        names = [n["metadata"]["name"] for n in self.nodes]
        for index, node in enumerate(names):
            for app in daemonsets:
                self.pods.append(_system_pod(app, node, index, self.now, daemon=True))
        for index in range(len(names) // max(1, nodes_per_service_pod)):
            app = SERVICES[index % len(SERVICES)]
            node = names[(index * 37) % len(names)]
            self.pods.append(_system_pod(app, node, index, self.now, daemon=False))

    def priority_class(self, name: str, value: int, default: bool = False) -> None:
        """Add a PriorityClass."""
        self.classes.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                             "metadata": {"name": name, "uid": _uid("pc", name)},
                             "value": value, "globalDefault": default,
                             "preemptionPolicy": "PreemptLowerPriority"})

    def reschedule_record(self, job_id: str, when: int,
                          tasks: list[tuple[int, str, str]]) -> None:
        """Add a ``job-reschedule-reason`` record: ``(rank, node, reason)`` per task.

        Call in time order: upstream keeps the newest record first.
        """
        job_name = job_id.split("/")[-1].rsplit("-", 5)[0]  # PodGroup <job>-<uid>
        entry = self.reschedule.setdefault(job_id, {"JobID": job_id, "TotalRescheduleTimes": 0,
                                                    "RescheduleRecords": []})
        entry["TotalRescheduleTimes"] += 1
        entry["RescheduleRecords"].insert(0, {
            "LogFileFormatTime": datetime.fromtimestamp(when, UTC).strftime("I0102 15:04:05"),
            "RescheduleTimeStamp": when,
            "ReasonOfTask": [{"RescheduleReason": reason,
                              "PodName": f"{job_name}-worker-{rank}",
                              "NodeName": node, "NodeRankIndex": str(rank)}
                             for rank, node, reason in tasks]})

    # ------------------------------------------------------------------ output
    def _cm(self, namespace: str, name: str, data: dict[str, str],
            labels: dict[str, str] | None = None) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace,
                             "uid": _uid("cm", namespace, name),
                             **({"labels": labels} if labels else {})},
                "data": data}

    def device_configmaps(self) -> list[dict[str, Any]]:
        """Device-info, NodeD and switch ConfigMaps of the builder's mode."""
        out = []
        if self.mode == "device-plugin":
            for name, record in self.device_records.items():
                devices = dict(record["DeviceList"])
                state = self._state[name]
                devices[self.resource] = ",".join(
                    c for c in state.chips if c not in state.used and c not in state.unhealthy)
                info = {"DeviceInfo": {"DeviceList": devices,
                                       "UpdateTime": record["UpdateTime"]},
                        "SuperPodID": record["SuperPodID"],
                        "ServerIndex": record["ServerIndex"]}
                if "RackID" in record:
                    info["RackID"] = record["RackID"]
                info["CheckCode"] = hashlib.sha256(json.dumps(
                    info["DeviceInfo"], separators=_SEP).encode()).hexdigest()
                data = {"DeviceInfoCfg": json.dumps(info, separators=_SEP),
                        "ManuallySeparateNPU": "", "UpgradeFaultReason": "{}",
                        "Description": "huawei.com/Ascend910 is sunset; use baseDeviceInfos"}
                if name in self.switch_records:
                    data["SwitchInfoCfg"] = json.dumps(self.switch_records[name], separators=_SEP)
                out.append(self._cm("kube-system", f"mindx-dl-deviceinfo-{name}", data,
                                    {"mx-consumer-cim": "true"}))
            for name, record in self.noded_records.items():
                text = json.dumps({"NodeInfo": record, "CheckCode": hashlib.sha256(
                    json.dumps(record).encode()).hexdigest()}, separators=_SEP)
                out.append(self._cm("mindx-dl", f"mindx-dl-nodeinfo-{name}",
                                    {"NodeInfo": text}, {"mx-consumer-cim": "true"}))
            return out
        names = list(self.device_records)
        for index in range(0, len(names), 1000):
            cm_name = f"cluster-info-device-{index // 1000}"
            chunk = {}
            for name in names[index:index + 1000]:
                record = dict(self.device_records[name])
                devices = dict(record["DeviceList"])
                state = self._state[name]
                devices[self.resource] = ",".join(
                    c for c in state.chips if c not in state.used and c not in state.unhealthy)
                record["DeviceList"] = devices
                record["CmName"] = f"mindx-dl-deviceinfo-{name}"
                chunk[f"mindx-dl-deviceinfo-{name}"] = record
            out.append(self._cm("mindx-dl", cm_name, {cm_name: json.dumps(chunk, separators=_SEP)},
                                {"mx-consumer-volcano": "true"}))
        out.append(self._cm("mindx-dl", "cluster-info-node-cm", {"cluster-info-node-cm": json.dumps(
            {f"mindx-dl-nodeinfo-{n}": r for n, r in self.noded_records.items()}, separators=_SEP)},
            {"mx-consumer-volcano": "true"}))
        switches = list(self.switch_records)
        for index in range(0, max(len(switches), 1), 2000):
            cm_name = f"cluster-info-switch-{index // 2000}"
            chunk = {f"mindx-dl-switchinfo-{n}": self.switch_records[n]
                     for n in switches[index:index + 2000]}
            out.append(self._cm("mindx-dl", cm_name, {cm_name: json.dumps(chunk, separators=_SEP)},
                                {"mx-consumer-volcano": "true"}))
        return out

    def scheduler_configmap(self) -> dict[str, Any]:
        """``volcano-system/volcano-scheduler-configmap`` with the builder's init-params."""
        params = {"useClusterInfoManager": "true" if self.mode == "clusterd" else "false",
                  "self-maintain-available-card": "true", **self.params}
        conf = {"actions": "enqueue, allocate, backfill",
                "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"},
                                       {"name": "conformance"},
                                       {"name": "volcano-npu_v7.2.RC1_linux-aarch64"}]},
                          {"plugins": [{"name": "drf"}, {"name": "predicates"},
                                       {"name": "proportion"}, {"name": "nodeorder"},
                                       {"name": "binpack"}]}],
                "configurations": [{"name": "init-params", "arguments": params}]}
        return self._cm("volcano-system", "volcano-scheduler-configmap",
                        {"volcano-scheduler.conf": yaml.safe_dump(conf, sort_keys=False)})

    def files(self) -> dict[str, list[dict[str, Any]]]:
        """The snapshot's objects by the file the README's kubectl commands write them to."""
        files = {
            "nodes.json": self.nodes,
            "pods.json": self.pods,
            "podgroups.json": self.podgroups,
            "priorityclasses.json": self.classes,
            ("configmaps-clusterd.json" if self.mode == "clusterd"
             else "configmaps-cim.json"): self.device_configmaps(),
            "volcano-scheduler-configmap.json": [self.scheduler_configmap()],
        }
        if self.reschedule:
            files["job-reschedule-reason.json"] = [self._cm(
                "mindx-dl", "job-reschedule-reason",
                {"recent-reschedule-records": json.dumps(self.reschedule)})]
        return files

    def objects(self) -> list[dict[str, Any]]:
        """Every object of the snapshot."""
        return [obj for items in self.files().values() for obj in items]

    def write(self, out: str | Path, indent: int | None = 2) -> list[Path]:
        """Write the snapshot as the files the README's kubectl commands produce."""
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for file_name, items in self.files().items():
            path = folder / file_name
            lst = {"apiVersion": "v1", "kind": "List", "items": items,
                   "metadata": {"resourceVersion": ""}}
            path.write_text(json.dumps(lst, indent=indent) + "\n", encoding="utf-8")
            written.append(path)
        return written


# ---------------------------------------------------------------------- real-size objects
#: Managers that write Nodes and Pods in a real cluster (``metadata.managedFields``).
_MANAGERS = ("kubelet", "kube-controller-manager", "device-plugin", "noded", "kubectl-label",
             "vc-scheduler", "kube-scheduler")


def _managed_fields(kind: str, name: str, now: int, count: int) -> list[dict[str, Any]]:
    """``metadata.managedFields`` of ``count`` managers, as the API server writes them."""
    out = []
    for i in range(count):
        manager = _MANAGERS[(len(name) + i) % len(_MANAGERS)]
        keys: dict[str, Any] = {f"f:{key}": {} for key in (
            "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
            "node.kubernetes.io/npu.chip.name", "accelerator", "host-arch", "nodeDEnable",
            f"{manager}/owned-{i}")}
        status: dict[str, Any] = {"f:conditions": {f'k:{{"type":"T{j}"}}': {
            ".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {},
            "f:reason": {}, "f:status": {}, "f:type": {}} for j in range(3)}}
        if kind == "Pod" and not i % 2:
            status = {"f:phase": {}, "f:hostIP": {}, "f:startTime": {}}
        out.append({
            "manager": manager, "operation": "Update" if i else "Apply",
            "apiVersion": "v1", "time": _stamp(now - 3600 * (i + 1)), "fieldsType": "FieldsV1",
            "subresource": "status" if i % 2 else "",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, **keys},
                                        "f:annotations": {".": {}, f"f:{manager}.io/k{i}": {}}},
                         "f:status": status}})
    return out


def _bulk_node(name: str, labels: dict[str, str], annotations: dict[str, str],
               conditions: list[dict[str, Any]], now: int) -> None:
    """The labels, annotations and conditions a real Node carries besides the importer's."""
    digest = int(hashlib.md5(name.encode()).hexdigest()[:6], 16)
    labels.update({
        "beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "Atlas-900-A3-SuperPoD",
        "topology.kubernetes.io/region": "cn-south-1",
        "topology.kubernetes.io/zone": "cn-south-1a", "servertype": "Ascend850-64",
        "huawei.com/npu-driver-version": "24.1.rc3", "cpu-manager-policy": "static",
        "feature.node.kubernetes.io/cpu-cpuid.ASIMD": "true",
        "feature.node.kubernetes.io/kernel-version.full": "5.10.0-182.0.0.95.oe2203sp3.aarch64",
    })
    annotations.update({
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "projectcalico.org/IPv4Address": f"192.168.{digest % 250}.{digest // 250 % 250}/16",
        "projectcalico.org/IPv4IPIPTunnelAddr": f"10.244.{digest % 250}.1",
        "csi.volume.kubernetes.io/nodeid": json.dumps({"nfs.csi.k8s.io": name}),
        "huawei.com/ascend-driver-info": "version=24.1.rc3;firmware=7.5.0.1.129;"
                                         "toolkit=8.0.RC3",
    })
    for kind, reason in (("PIDPressure", "KubeletHasSufficientPID"),
                         ("NetworkUnavailable", "CalicoIsUp")):
        conditions.insert(0, {"type": kind, "status": "False", "reason": reason})
    for cond in conditions:
        cond.setdefault("message", f"kubelet reports {cond['reason']}")
        cond.setdefault("lastTransitionTime", _stamp(now - 30 * 86400))
        cond.setdefault("lastHeartbeatTime", _stamp(now - 20))


def _bulk_node_status(name: str, index: int, now: int) -> dict[str, Any]:
    """A real Node's addresses, daemon endpoints, node info and 30-60 cached images."""
    count = 30 + (index * 7) % 31
    images = []
    for i in range(count):
        repo = f"swr.cn-south-1.myhuaweicloud.com/ascendhub/image-{(index + i) % 97}"
        digest = hashlib.sha256(f"{repo}{i}".encode()).hexdigest()
        names = [f"{repo}:2.{i % 9}.0-a3-arm"]
        if i % 3 == 0:  # some images are listed by digest too
            names.insert(0, f"{repo}@sha256:{digest}")
        images.append({"names": names,
                       "sizeBytes": 200_000_000 + (i * 37_000_000) % 20_000_000_000})
    return {
        "addresses": [{"type": "InternalIP",
                       "address": f"192.168.{index // 250 % 250}.{index % 250}"},
                      {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": images,
        "nodeInfo": {"machineID": hashlib.md5(name.encode()).hexdigest(),
                     "systemUUID": _uid("sys", name), "bootID": _uid("boot", name, now),
                     "kernelVersion": "5.10.0-182.0.0.95.oe2203sp3.aarch64",
                     "osImage": "openEuler 22.03 (LTS-SP3)",
                     "containerRuntimeVersion": "containerd://1.7.13",
                     "kubeletVersion": "v1.28.9", "kubeProxyVersion": "v1.28.9",
                     "operatingSystem": "linux", "architecture": "arm64"},
    }


def _bulk_pod(spec: dict[str, Any], status: dict[str, Any], annotations: dict[str, str],
              container: dict[str, Any], pod_name: str, now: int) -> None:
    """The volumes, tolerations, statuses and annotations a real Pod carries."""
    job = pod_name.rsplit("-", 2)[0]
    annotations.update({
        "cni.projectcalico.org/podIP": "10.244.3.17/32",
        "cni.projectcalico.org/containerID": hashlib.sha256(pod_name.encode()).hexdigest(),
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
            {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
             "metadata": {"name": job, "annotations": {"sp-block": "64"}},
             "spec": {"minAvailable": 1, "schedulerName": "volcano", "maxRetry": 3,
                      "plugins": {"env": [], "svc": []}, "tasks": [
                          {"name": "worker", "replicas": 8, "template": {"spec": {
                              "containers": [{"name": "ascend", "image": container["image"]}],
                              "nodeSelector": {"host-arch": "huawei-arm"}}}}]}},
            separators=_SEP),
    })
    mounts = ("ascend-driver", "ascend-add-ons", "dshm", "localtime", "job-code",
              "job-output", "kube-api-access")
    container["volumeMounts"] = [{"name": n, "mountPath": f"/{n.replace('-', '/')}"}
                                 for n in mounts]
    container["env"] = [*container["env"], *({"name": k, "value": v} for k, v in (
        ("XDL_IP", "status.hostIP"), ("HCCL_CONNECT_TIMEOUT", "1200"),
        ("ASCEND_GLOBAL_LOG_LEVEL", "3"), ("MS_ROLE", "MS_WORKER"),
        ("PYTHONUNBUFFERED", "1")))]
    container["ports"] = [{"containerPort": 2222, "name": "ascendjob-port", "protocol": "TCP"}]
    container["terminationMessagePath"] = "/dev/termination-log"
    container["imagePullPolicy"] = "IfNotPresent"
    spec["volumes"] = [
        {"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver", "type": ""}},
        {"name": "ascend-add-ons", "hostPath": {"path": "/usr/local/Ascend/add-ons",
                                                "type": ""}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "localtime", "hostPath": {"path": "/etc/localtime"}},
        {"name": "job-code", "nfs": {"server": "10.0.0.9", "path": "/code"}},
        {"name": "job-output", "nfs": {"server": "10.0.0.9", "path": "/out"}},
        {"name": "kube-api-access", "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]
    spec["tolerations"] = [{"key": f"node.kubernetes.io/{t}", "operator": "Exists",
                            "effect": "NoExecute", "tolerationSeconds": 300}
                           for t in ("not-ready", "unreachable")]
    spec.update({"dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
                 "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
                 "preemptionPolicy": "PreemptLowerPriority", "hostname": pod_name,
                 "subdomain": job, "securityContext": {}})
    status.setdefault("conditions", [])
    for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
        status["conditions"].append({"type": kind, "status": "True", "lastProbeTime": None,
                                     "lastTransitionTime": _stamp(now - 3000)})
    status["qosClass"] = "Guaranteed"
    status["containerStatuses"] = [{
        "name": container["name"], "ready": True, "restartCount": 0, "started": True,
        "image": container["image"], "imageID": container["image"] + "@sha256:"
        + hashlib.sha256(container["image"].encode()).hexdigest(),
        "containerID": "containerd://" + hashlib.sha256(pod_name.encode()).hexdigest(),
        "state": {"running": {"startedAt": _stamp(now - 2990)}}, "lastState": {}}]


_SYSTEM_NAMESPACES = {"kube-proxy": "kube-system", "calico-node": "kube-system",
                      "coredns": "kube-system", "metrics-server": "kube-system",
                      "volcano-controllers": "volcano-system",
                      "volcano-admission": "volcano-system", "prometheus": "monitoring"}


def _system_pod(app: str, node: str, index: int, now: int, daemon: bool) -> dict[str, Any]:
    """A real-size pod of a DaemonSet (on ``node``) or of a Deployment's ReplicaSet: no
    NPU request, scheduled by the default scheduler."""
    namespace = _SYSTEM_NAMESPACES.get(app, "mindx-dl")
    suffix = hashlib.md5(f"{app}/{node}/{index}".encode()).hexdigest()
    name = f"{app}-{suffix[:5]}" if daemon else f"{app}-{suffix[5:15]}-{suffix[:5]}"
    owner_name = app if daemon else f"{app}-{suffix[5:15]}"
    image = f"swr.cn-south-1.myhuaweicloud.com/system/{app}:v1.{len(app) % 9}.{index % 3}"
    mounts = ("var-log", "lib-modules", "kubelet-dir", "device-plugins", "kube-api-access")
    container = {
        "name": app, "image": image, "imagePullPolicy": "IfNotPresent",
        "command": [f"/usr/local/bin/{app}"],
        "args": ["--v=2", f"--config=/etc/{app}/config.yaml"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                {"name": "GOMAXPROCS", "value": "2"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
        "volumeMounts": [{"name": m, "mountPath": f"/{m.replace('-', '/')}",
                          **({"readOnly": True} if i % 2 else {})}
                         for i, m in enumerate(mounts)],
        "securityContext": {"privileged": daemon, "readOnlyRootFilesystem": not daemon},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 9100},
                          "periodSeconds": 20},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File"}
    tolerations = [{"key": f"node.kubernetes.io/{t}", "operator": "Exists",
                    "effect": "NoExecute" if t in ("not-ready", "unreachable")
                    else "NoSchedule"}
                   for t in ("not-ready", "unreachable", "disk-pressure", "memory-pressure",
                             "pid-pressure", "unschedulable", "network-unavailable")]
    spec: dict[str, Any] = {
        "containers": [container], "nodeName": node, "schedulerName": "default-scheduler",
        "serviceAccountName": app, "serviceAccount": app, "hostNetwork": daemon,
        "dnsPolicy": "ClusterFirstWithHostNet" if daemon else "ClusterFirst",
        "priorityClassName": "system-node-critical" if daemon else "system-cluster-critical",
        "priority": 2000001000 if daemon else 2000000000, "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority", "securityContext": {},
        "tolerations": tolerations,
        "volumes": [{"name": m, "hostPath": {"path": f"/{m.replace('-', '/')}",
                                             "type": "DirectoryOrCreate"}}
                    for m in mounts[:-1]] + [
            {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]}
    if daemon:  # the DaemonSet controller pins its pod to the node by name
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    started = _stamp(now - 20 * 86400 - index % 3600)
    pod_ip = f"10.244.{index // 250 % 250}.{index % 250}"
    status: dict[str, Any] = {
        "phase": "Running", "qosClass": "Burstable", "startTime": started,
        "hostIP": f"192.168.{index // 250 % 250}.{index % 250}",
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "conditions": [{"type": kind, "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": started}
                       for kind in ("PodReadyToStartContainers", "Initialized", "Ready",
                                    "ContainersReady", "PodScheduled")],
        "containerStatuses": [{
            "name": app, "ready": True, "restartCount": index % 3, "started": True,
            "image": image, "imageID": f"{image}@sha256:{suffix}{suffix}",
            "containerID": f"containerd://{suffix}{suffix}",
            "state": {"running": {"startedAt": started}}, "lastState": {}}]}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": f"{owner_name}-", "namespace": namespace,
            "uid": _uid("system-pod", namespace, name), "resourceVersion": str(10**6 + index),
            "creationTimestamp": started,
            "labels": {"k8s-app": app, "app.kubernetes.io/name": app,
                       "controller-revision-hash" if daemon else "pod-template-hash":
                       suffix[5:15], **({"pod-template-generation": "3"} if daemon else {})},
            "annotations": {"kubectl.kubernetes.io/restartedAt": _stamp(now - 30 * 86400),
                            "prometheus.io/scrape": "true", "prometheus.io/port": "9100",
                            "cni.projectcalico.org/podIP": pod_ip + "/32"},
            "ownerReferences": [{"apiVersion": "apps/v1",
                                 "kind": "DaemonSet" if daemon else "ReplicaSet",
                                 "name": owner_name, "uid": _uid("owner", namespace, owner_name),
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": _managed_fields("Pod", name, now, 3 + index % 3)},
        "spec": spec, "status": status}


# ---------------------------------------------------------------------- the examples


def example_850(snapshot: int) -> DumpBuilder:
    """Atlas 850 super pods, device-plugin mode; snapshot 0 (all running) or 1 (after a fault).

    Three super pods of 8 nodes (``super-pod-size`` 8, ``reserve-nodes`` 1).  In snapshot 0
    ``ai-train/llm-pretrain`` (8 ranks, sp-block 32) runs on sp0 nodes 0–3 and sp1 nodes 0–3,
    ``ai-train/finetune`` (4 ranks) on sp2.  Half an hour later (snapshot 1) NodeD reports
    sp1-node-1 UnHealthy; the rescheduler deleted the whole llm-pretrain job (rank 5 was on
    that node), its 8 pods are pending again; the inference service ``serving/chat`` took
    sp0-node-2 meanwhile; ``ai-train/eval`` waits; sp2-node-6 is sub-healthy and sp2-node-7
    has a broken chip.
    """
    now = EXAMPLE_NOW + 1800 * snapshot
    b = DumpBuilder("device-plugin", now=now, resource="huawei.com/npu", chip_type="Ascend850")
    b.params = {"super-pod-size": "8", "reserve-nodes": "1", "prefer-previous-node": "true"}
    for sp in range(3):
        for i in range(8):
            name = f"sp{sp}-node-{i}"
            b.node(name, 8, super_pod=sp,
                   labels={"accelerator-type": "850-SuperPod-Atlas-8"},
                   noded="UnHealthy" if (snapshot and name == "sp1-node-1") else "Healthy",
                   subhealth_fault=name == "sp2-node-6",
                   unhealthy_chips=(3,) if name == "sp2-node-7" else ())
    b.priority_class("training-high", 1000)
    b.priority_class("inference-critical", 100000)
    b.priority_class("batch-low", 10, default=True)
    block = {"sp-block": "32"}
    pretrain_nodes = {r: (f"sp0-node-{r}" if r < 4 else f"sp1-node-{r - 4}") for r in range(8)}
    b.job("ai-train", "llm-pretrain", 8, 8, policy="chip8-node8-sp", annotations=block,
          priority_class="training-high", priority=1000,
          bound=None if snapshot else pretrain_nodes, age=6 * 3600,
          pod_age=590 if snapshot else None)
    b.job("ai-train", "finetune", 4, 8, policy="chip8-node8-sp", annotations=block,
          priority_class="training-high", priority=1000,
          bound={r: f"sp2-node-{r}" for r in range(4)}, age=2 * 3600)
    b.job("ai-train", "eval", 2, 8, policy="chip8-node8-sp", annotations={"sp-block": "16"},
          labels={"super-pod-affinity": "soft"}, priority_class="batch-low", priority=10,
          age=1200)
    if snapshot:
        b.job("serving", "chat", 1, 8, policy="chip8-node8", priority_class="inference-critical",
              priority=100000, bound={0: "sp0-node-2"}, age=900)
        job_id = next(pg["metadata"]["namespace"] + "/" + pg["metadata"]["name"]
                      for pg in b.podgroups if pg["metadata"]["name"].startswith("llm-pretrain"))
        b.reschedule_record(job_id, now - 600, [(5, "sp1-node-1", "node-unhealthy")])
    return b


def example_950() -> DumpBuilder:
    """Atlas 950 racks, ClusterD mode: 2 super pods × 3 racks × 8 nodes, ``huawei.com/npu``.

    ``mm/pretrain`` (16 ranks, sp-block 128, ra-block 64) is pending after r1-node-6 failed
    under its rank 14 (ClusterD reports the node UnHealthy); ``job-reschedule-reason`` holds
    that record and an older one (ranks 3 and 9); ``mm/sft`` (8 ranks, one rack) runs on
    rack 4; a switch reports r5-node-5 sub-healthy.
    """
    b = DumpBuilder("clusterd", now=EXAMPLE_NOW, resource="huawei.com/npu",
                    chip_type="Ascend950PR")
    b.params = {"super-pod-size": "24", "reserve-nodes": "2", "prefer-previous-node": "true"}
    for rack in range(6):
        for i in range(8):
            name = f"r{rack}-node-{i}"
            b.node(name, 8, super_pod=rack // 3, rack=rack,
                   labels={"accelerator-type": "950-SuperPod-Atlas-8"},
                   noded="UnHealthy" if name == "r1-node-6" else "Healthy",
                   switch="SubHealthy" if name == "r5-node-5" else "Healthy", age=20)
    b.priority_class("training", 500)
    b.job("mm", "pretrain", 16, 8, policy="chip8-node8-ra64-sp", operator=True,
          annotations={"sp-block": "128", "ra-block": "64"}, priority_class="training",
          priority=500, age=3 * 86400, pod_age=230)
    b.job("mm", "sft", 8, 8, policy="chip8-node8-ra64-sp", operator=True,
          annotations={"sp-block": "64", "ra-block": "64"}, priority_class="training",
          priority=500, bound={r: f"r4-node-{r}" for r in range(8)}, age=4 * 3600)
    job_id = next(pg["metadata"]["namespace"] + "/" + pg["metadata"]["name"]
                  for pg in b.podgroups if pg["metadata"]["name"].startswith("pretrain"))
    # a day ago ranks 3 and 9 failed (the job came back on the same racks); four minutes
    # ago r1-node-6 failed under rank 14
    b.reschedule_record(job_id, EXAMPLE_NOW - 86400, [(3, "r0-node-3", "pod-failed"),
                                                      (9, "r1-node-1", "pod-failed")])
    b.reschedule_record(job_id, EXAMPLE_NOW - 240, [(14, "r1-node-6", "node-unhealthy")])
    return b


def example_multilevel() -> DumpBuilder:
    """Multilevel trees (A3 16-die nodes), device-plugin mode: 2 switches × 2 racks × 4 nodes.

    ``research/moe`` (8 ranks, ``level1=2,level2=4``) was rescheduled ten minutes ago when
    its rank 2 failed on s0-r1-n2 (since cordoned); ``research/dense`` (4 ranks) runs on
    switch 1.
    """
    b = DumpBuilder("device-plugin", now=EXAMPLE_NOW, chip_type="Ascend910_9392")
    b.params = {"prefer-previous-node": "true", "resource-level-config": json.dumps(
        {"default": {"level1": {"label": "huawei.com/topotree.rackid", "reservedNode": 1},
                     "level2": {"label": "huawei.com/topotree.switchid"}}})}
    for sw in range(2):
        for rack in range(2):
            for i in range(4):
                name = f"s{sw}-r{rack}-n{i}"
                b.node(name, 16, labels={"huawei.com/topotree": "default",
                                         "huawei.com/topotree.rackid": f"rack-{sw}-{rack}",
                                         "huawei.com/topotree.switchid": f"switch-{sw}",
                                         "accelerator-type": "module-a3-16"},
                       unschedulable=name == "s0-r1-n2")
    b.priority_class("research", 100)
    b.job("research", "moe", 8, 16, policy="multilevel",
          annotations={"huawei.com/affinity-config": "level1=2,level2=4"},
          priority_class="research", priority=100, labels={"tor-affinity": "null"},
          age=86400, pod_age=590)
    b.job("research", "dense", 4, 16, policy="multilevel",
          annotations={"huawei.com/affinity-config": "level1=2,level2=4"},
          priority_class="research", priority=100,
          bound={r: f"s1-r{r // 2}-n{r % 2}" for r in range(4)}, age=7200)
    job_id = next(pg["metadata"]["namespace"] + "/" + pg["metadata"]["name"]
                  for pg in b.podgroups if pg["metadata"]["name"].startswith("moe"))
    b.reschedule_record(job_id, EXAMPLE_NOW - 600, [(2, "s0-r1-n2", "pod-failed")])
    return b


def synthetic(nodes: int, mode: str = "clusterd", now: int = EXAMPLE_NOW,
              realistic: bool = True) -> DumpBuilder:
    """A large 850-style cluster: super pods of 64 nodes, about 70 % of nodes busy.

    Jobs of 8 to 128 ranks (sp-block 64 NPUs = 8 nodes) fill super pods in order; every
    fifth job is pending; one node in 97 is unhealthy, one in 89 sub-healthy.  Nodes and
    Pods are of real size (``realistic``, :class:`DumpBuilder`) unless told otherwise, and
    then the cluster also runs what real clusters run besides the jobs
    (:meth:`DumpBuilder.system_pods`: 3 node agents on every node and a service pod per 8
    nodes; 3,936 pods at 1,024 nodes).
    """
    b = DumpBuilder(mode, now=now, resource="huawei.com/npu", chip_type="Ascend850",
                    realistic=realistic)
    b.params = {"super-pod-size": "64", "reserve-nodes": "2", "prefer-previous-node": "true"}
    names = [f"sp{i // 64}-node-{i % 64}" for i in range(nodes)]
    for i, name in enumerate(names):
        b.node(name, 8, super_pod=i // 64, noded="UnHealthy" if i % 97 == 13 else "Healthy",
               subhealth_fault=i % 89 == 7)
    b.priority_class("training", 1000)
    cursor = 0
    index = 0
    sizes = (8, 16, 32, 64, 128)
    while cursor < int(nodes * 0.7):
        tasks = sizes[index % len(sizes)]
        sp_start = (cursor // 64) * 64
        if cursor + tasks > sp_start + 64:  # a block never crosses a super pod
            cursor = sp_start + 64
            if tasks > 64:
                tasks = 64
        if cursor + tasks > nodes:
            break
        pending = index % 5 == 4
        bound = None if pending else {r: names[cursor + r] for r in range(tasks)}
        b.job(f"team-{index % 7}", f"job-{index}", tasks, 8, policy="chip8-node8-sp",
              annotations={"sp-block": "64"}, priority_class="training", priority=1000,
              bound=bound)
        if bound:
            cursor += tasks
        index += 1
    if realistic:
        b.system_pods()
    return b


def write_examples(root: str | Path) -> None:
    """(Re)write the bundled example dumps under ``root``."""
    root = Path(root)
    example_850(0).write(root / "superpod-850" / "t0")
    example_850(1).write(root / "superpod-850" / "t1")
    example_950().write(root / "rack-950")
    example_multilevel().write(root / "multilevel")


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.kube_dump``: write a synthetic dump, or the bundled examples."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--mode", choices=("clusterd", "device-plugin"), default="clusterd")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--examples", action="store_true",
                        help="write the bundled example dumps to OUT instead")
    parser.add_argument("--small-objects", action="store_true",
                        help="write only the fields the importer reads (not real-size "
                             "Nodes and Pods)")
    args = parser.parse_args(argv)
    if args.examples:
        write_examples(args.out)
        return 0
    synthetic(args.nodes, args.mode, realistic=not args.small_objects).write(args.out,
                                                                             indent=None)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
