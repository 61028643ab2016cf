"""A re-creation of Volcano's allocate action driving the extender verbs over HTTP.

Used by the harness tests (``tests/solver/service/test_extender_sessions.py``) and by
``benchmarks/extender_bench.py``.  One :class:`VolcanoCluster` holds the cluster as
Kubernetes objects (built with :class:`benchmarks.kube_dump.DumpBuilder`, from a generated
scenario of any family by :func:`cluster_from_scenario`); :func:`run_session` plays one
scheduling session the way Volcano does it (``framework.OpenSession`` → ``allocate`` →
``CloseSession``):

* ``onSessionOpen`` with the snapshot in Volcano's JSON shape (:func:`volcano_snapshot`:
  Go field names and order, zero values, ``TaskStatusIndex`` keys, ``Resource`` in milli
  units, the ``PodGroup`` wrapper with ``Version``);
* jobs in queue order (priority, creation), tasks in task order (priority, name);
* per task: Volcano's own predicates (ready, schedulable, enough free NPUs), then the
  extender's ``predicate`` per (task, node) from 16 parallel callers, stopping once
  ``percentageNodesToFind`` of the nodes fit (from a rotating start node), skipping nodes
  the error cache holds for the job and task role;
* ``prioritize`` with the candidate nodes (vNPU services too: :func:`vnpu_cluster`),
  summed with a stand-in for the Ascend plugin
  (:class:`AscendStandIn`, following the plugin's code: a super-pod / 950 / multilevel
  job's selection made from the candidates of its first scored task, kept across
  sessions, 1e10 on each rank's node of it; a best-fit score below 100 otherwise) and a
  binpack score below 100; the highest sum wins (ties: a seeded random pick, as Volcano
  picks one at random);
* ``allocateFunc`` per allocated task; a job that does not get all its tasks is discarded
  (``deallocateFunc`` with status Pending, last first), else bound: the pod gets the node,
  its chips, ``hccl/rankIndex`` and, for A3 and 850 jobs, the plugin's ``super-pod-rank``
  (:meth:`AscendStandIn.super_pod_rank`);
* ``onSessionClose``.

Between sessions :meth:`VolcanoCluster.evict` deletes a running job's pods, or some of
them (the job's controller recreates them pending), and :meth:`VolcanoCluster.fault` makes
a node NotReady.

Why this file is long: the session is one loop over Volcano's steps and the Ascend plugin
stand-in re-creates the plugin's selection, cache and annotation steps that loop calls;
split apart, each half would need the other's private state (free chips, candidates,
the plugin's per-session tags) passed through every call.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.kube_dump import DumpBuilder
from heuristics.lifecycle import CacheLifecycle, RunningPods
from models.compiled import natural_key
from models.kube.build import ClusterImport
from models.kube.source import Diagnostics
from models.numbers import parse_int
from models.scenario import (
    AffinityCacheModel,
    Family,
    Job,
    Policy,
    Scenario,
    VnpuJob,
    family_of,
)
from models.validation import InputError
from models.vnpu_rules import TEMPLATES

PLUGIN_SELECTION_SCORE = 1.0e10
PREDICATE_WORKERS = 16
MIN_NODES_TO_FIND = 100
STATUS = {"Pending": 1, "Allocated": 2, "Bound": 16, "Running": 32, "Releasing": 64,
          "Failed": 256}
_SEP = (",", ":")

#: Per family: node resource, accelerator-type label, chip type.
FAMILY_NODES = {
    "a3": ("huawei.com/Ascend910", "module-a3-16-super-pod", "Ascend910_9392"),
    "850": ("huawei.com/npu", "850-SuperPod-Atlas-8", "Ascend850"),
    "950": ("huawei.com/npu", "950-SuperPod-Atlas-8", "Ascend950PR"),
    "multilevel": ("huawei.com/Ascend910", "module-a3-16", "Ascend910_9392"),
    "ordinary": ("huawei.com/Ascend910", "", "910B3"),
}


# --------------------------------------------------------------------------- cluster


def _npu_request(pod: dict[str, Any]) -> tuple[str | None, int]:
    for container in pod["spec"].get("containers", []):
        for res, value in (container.get("resources", {}).get("requests") or {}).items():
            if res in ("huawei.com/npu", "huawei.com/Ascend910", "huawei.com/npu-core"):
                return res, int(value)
    return None, 0


def _rank(pod: dict[str, Any]) -> int:
    annotated = (pod["metadata"].get("annotations") or {}).get("hccl/rankIndex")
    rank = parse_int(annotated) if isinstance(annotated, str) else None
    if rank is not None and rank >= 0:
        return rank
    for container in pod["spec"].get("containers", []):
        for env in container.get("env", []):
            if env.get("name") == "VC_TASK_INDEX":
                return int(env["value"])
    # a ReplicaSet's replica (vNPU services: <service>-<i>) has neither after a restart:
    # the harness gives it its name's ordinal, so replicas keep distinct ranks
    ordinal = parse_int(pod["metadata"]["name"].rpartition("-")[2])
    return ordinal if ordinal is not None and pod["metadata"].get("ownerReferences") else 0


def _job_id(pod: dict[str, Any]) -> str | None:
    group = pod["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name")
    return f"{pod['metadata']['namespace']}/{group}" if group else None


def _active(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and pod["status"].get("phase") not in (
        "Failed", "Succeeded")


@dataclass
class DumpObjects:
    """The objects of kubectl dumps, sorted the way :class:`VolcanoCluster` reads them."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    podgroups: list[dict[str, Any]] = field(default_factory=list)
    #: everything else (device-info, NodeD, switch and scheduler ConfigMaps, classes)
    others: list[dict[str, Any]] = field(default_factory=list)

    def add(self, obj: dict[str, Any], source: str = "") -> None:
        """One object of a dump (the sink of :func:`models.kube.source.read_dumps`)."""
        kind = obj.get("kind")
        bucket = {"Node": self.nodes, "Pod": self.pods, "PodGroup": self.podgroups}.get(
            str(kind), self.others)
        bucket.append(obj)


@dataclass
class VolcanoCluster:
    """A cluster as Kubernetes objects, changed by bindings, evictions and faults."""

    builder: DumpBuilder | DumpObjects
    now: int
    generation: int = 0
    #: device objects the builder does not make (e.g. vNPU nodes' device-info ConfigMaps)
    extra_devices: list[dict[str, Any]] = field(default_factory=list)

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """The Node objects."""
        return self.builder.nodes

    @property
    def pods(self) -> list[dict[str, Any]]:
        """The Pod objects."""
        return self.builder.pods

    @classmethod
    def from_dumps(cls, paths: list[str], now: int) -> VolcanoCluster:
        """The cluster of kubectl dumps (``kubectl get nodes,pods,podgroups,configmaps,
        priorityclasses -o json``, files or directories, as ``npu-place import`` reads
        them).

        Raises
        ------
        InputError
            A file that cannot be read or is not a Kubernetes object or List; dumps
            without a Node or without a PodGroup.
        """
        from models.kube.source import read_dumps

        objects = DumpObjects()
        diagnostics = Diagnostics()
        read_dumps(paths, objects.add, diagnostics)
        missing = [kind for kind, found in (("Node", objects.nodes),
                                            ("PodGroup", objects.podgroups)) if not found]
        if missing:
            raise InputError([f"{', '.join(paths)}: no {' and no '.join(missing)} objects: "
                              "expected kubectl get nodes,pods,podgroups,configmaps,"
                              "priorityclasses -A -o json output"])
        for obj in objects.nodes + objects.pods + objects.podgroups:
            if not isinstance(obj.get("metadata"), dict) or not isinstance(
                    obj.get("spec", {}), dict):
                raise InputError([f"{obj.get('kind')} object without metadata or spec"])
            obj.setdefault("spec", {})
            obj.setdefault("status", {})
            obj["metadata"].setdefault("annotations", {})
        return cls(objects, now)

    def device_objects(self) -> list[dict[str, Any]]:
        """What Volcano does not send: device ConfigMaps, scheduler ConfigMap, classes."""
        if isinstance(self.builder, DumpObjects):
            return [*self.builder.others, *self.extra_devices]
        return [*self.builder.device_configmaps(), self.builder.scheduler_configmap(),
                *self.builder.classes, *self.extra_devices]

    def write_device_dump(self, folder: Path) -> Path:
        """Write :meth:`device_objects` as a kubectl List file (the extender's source)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "devices.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                    "items": self.device_objects()}, separators=_SEP))
        return path

    def used_chips(self) -> dict[str, set[str]]:
        """Chips held by active pods, per node."""
        used: dict[str, set[str]] = {}
        for pod in self.pods:
            if _active(pod):
                chips = pod["metadata"]["annotations"].get("huawei.com/AscendReal", "")
                used.setdefault(pod["spec"]["nodeName"], set()).update(
                    c for c in chips.split(",") if c)
        return used

    def node_chips(self, node: dict[str, Any]) -> list[str]:
        """The node's chips (``baseDeviceInfos``; a node of a kubectl dump without it:
        ``<resource>-<i>`` per unit of its NPU capacity)."""
        infos = (node["metadata"].get("annotations") or {}).get("baseDeviceInfos")
        if infos:
            return list(json.loads(infos))
        capacity = node.get("status", {}).get("capacity", {})
        resource = next((r for r in ("huawei.com/npu", "huawei.com/Ascend910") if r in capacity),
                        "huawei.com/npu")
        prefix = "Ascend910" if resource.endswith("Ascend910") else "npu"
        return [f"{prefix}-{i}" for i in range(int(str(capacity.get(resource, 0)) or 0))]

    def bind(self, pod: dict[str, Any], node: str, chips: list[str],
             super_pod_rank: str | None) -> None:
        """Bind a pod as Volcano + the Ascend plugin do (node, chips, rank annotations)."""
        ann = pod["metadata"]["annotations"]
        text = ",".join(chips)
        resource, _ = _npu_request(pod)
        ann.update({"hccl/rankIndex": str(_rank(pod)), "huawei.com/AscendReal": text,
                    str(resource): text, "predicate-time": str(self.now)})
        if super_pod_rank is not None:
            ann["super-pod-rank"] = super_pod_rank
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "hostIP": "192.168.0.1",
                         "startTime": "2026-01-01T00:00:00Z"}

    def evict(self, job_id: str, ranks: Iterable[int] | None = None) -> int:
        """Delete a job's pods (only those of ``ranks`` when given: a pod-level
        reschedule); its controller recreates them pending.  Returns how many."""
        count = 0
        only = None if ranks is None else set(ranks)
        for pod in self.pods:
            if _job_id(pod) == job_id and pod["spec"].get("nodeName") and (
                    only is None or _rank(pod) in only):
                ann = pod["metadata"]["annotations"]
                for key in ("hccl/rankIndex", "huawei.com/AscendReal", "huawei.com/npu",
                            "huawei.com/Ascend910", "super-pod-rank", "predicate-time"):
                    ann.pop(key, None)
                pod["spec"].pop("nodeName", None)
                pod["metadata"]["uid"] = f"{pod['metadata']['uid']}-r{self.generation}"
                pod["status"] = {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
                count += 1
        self.generation += 1
        return count

    def delete_job(self, job_id: str) -> None:
        """The job is deleted: its PodGroup and pods go."""
        self.builder.pods[:] = [p for p in self.pods if _job_id(p) != job_id]
        self.builder.podgroups[:] = [
            pg for pg in self.builder.podgroups
            if f"{pg['metadata']['namespace']}/{pg['metadata']['name']}" != job_id]

    def fault(self, node_name: str) -> None:
        """The node turns NotReady (the kubelet stops reporting)."""
        for node in self.nodes:
            if node["metadata"]["name"] == node_name:
                for cond in node["status"]["conditions"]:
                    if cond["type"] == "Ready":
                        cond["status"] = "Unknown"

    def add_job(self, namespace: str, name: str, tasks: int, npus: int, **kwargs: Any) -> None:
        """A new pending job (see :meth:`DumpBuilder.job`)."""
        if not isinstance(self.builder, DumpBuilder):
            raise TypeError("add_job needs a cluster built with DumpBuilder")
        self.builder.job(namespace, name, tasks, npus, **kwargs)

    def bound(self) -> dict[str, dict[int, str]]:
        """Job id → rank → node of every bound pod."""
        out: dict[str, dict[int, str]] = {}
        for pod in self.pods:
            job = _job_id(pod)
            if job and _active(pod):
                out.setdefault(job, {})[_rank(pod)] = pod["spec"]["nodeName"]
        return out

    def scenario(self) -> Scenario:
        """The cluster through the importer (what the stand-in plugin sees at open)."""
        importer = ClusterImport(Diagnostics())
        for obj in [*self.device_objects(), *self.nodes, *self.pods, *self.builder.podgroups]:
            importer.add(obj)
        return importer.build(now=self.now).scenario


def vnpu_template(kind: str, cores: int) -> str:
    """The first template of the chip kind's table with ``cores`` AI cores."""
    return next((name for name, size in TEMPLATES.get(kind, {}).items() if size[0] == cores),
                f"vir{cores:02d}")


def _policy_family(policy: str) -> Family:
    try:
        return family_of(Policy(policy))
    except ValueError:
        return Family.ORDINARY


def cluster_from_scenario(scenario: Scenario, family: str, now: int = 1764400000
                          ) -> VolcanoCluster:
    """A cluster of Kubernetes objects from a generated scenario (benchmarks.generators).

    Nodes keep their NPUs, super pod, rack, labels and health; the chips other tenants use
    become pods without a Volcano group (counted as used, not imported as jobs); pending
    jobs become PodGroups with pending pods (policy, blocks, affinity config, labels).
    Cache entries and fault ranks are not carried: the sessions make their own history.
    """
    resource, selector, chip_type = FAMILY_NODES[family]
    b = DumpBuilder("device-plugin", now=now, resource=resource, chip_type=chip_type)
    params: dict[str, str] = {"prefer-previous-node": "true"}
    for key, value in scenario.config.model_dump(by_alias=True, exclude_defaults=True,
                                                 mode="json").items():
        params[key] = value if isinstance(value, str) else json.dumps(value, separators=_SEP)
    b.params = params
    for node in scenario.nodes:
        labels = dict(node.labels)
        if selector:
            labels["accelerator-type"] = selector
        b.node(node.name, node.npus, super_pod=node.super_pod_id, rack=node.rack_id,
               labels=labels, noded="UnHealthy" if node.health.value == "unhealthy"
               else "Healthy", subhealth_fault=node.health.value == "subhealthy")
        taken = node.npus - node.free
        if taken > 0:
            chips = b.occupy(node.name, taken)
            text = ",".join(chips)
            b.pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"tenant-{node.name}", "namespace": "tenant",
                             "uid": f"tenant-{node.name}",
                             "annotations": {"huawei.com/AscendReal": text, resource: text},
                             "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"schedulerName": "default-scheduler", "nodeName": node.name,
                         "containers": [{"name": "c", "resources": {
                             "requests": {resource: str(taken)},
                             "limits": {resource: str(taken)}}}]},
                "status": {"phase": "Running"}})
    b.priority_class("training", 100)
    for index, job in enumerate(scenario.jobs):
        annotations: dict[str, str] = {}
        if job.sp_block:
            annotations["sp-block"] = str(job.sp_block)
        if job.ra_block:
            annotations["ra-block"] = str(job.ra_block)
        if job.affinity_config:
            annotations["huawei.com/affinity-config"] = job.affinity_config
        labels = {"fault-scheduling": "grace"}  # the rescheduler acts on the job's faults
        if job.super_pod_affinity is not None:
            labels["super-pod-affinity"] = str(job.super_pod_affinity.value)
        b.job("train", job.name, job.tasks, job.npu_per_task, policy=job.policy,
              annotations=annotations, labels=labels, selector=selector or None,
              priority_class="training", priority=100 + job.priority, age=3600 - index)
    return VolcanoCluster(b, now)


def vnpu_cluster(seed: int, nodes: int = 4, services: int = 3, now: int = 1764400000
                 ) -> VolcanoCluster:
    """A generated dynamic-vNPU cluster: ``nodes`` Atlas 300I Duo servers (4 Ascend310P
    chips of 8 AI cores, device-info ConfigMaps) and ``services`` inference services (a
    PodGroup owned by a ReplicaSet, ``fault-scheduling: grace``) of 2-4 pending replicas of
    1, 2 or 4 AI cores each, drawn from ``seed``."""
    from benchmarks.kube_dump_vnpu import _device_cm, _service, _vnpu_node

    rng = random.Random(seed)
    b = DumpBuilder("device-plugin", now=now)
    b.params = {"prefer-previous-node": "true"}
    b.priority_class("inference", 100)
    devices = []
    for i in range(1, nodes + 1):
        b.nodes.append(_vnpu_node(f"vnpu-{i}", 4))
        devices.append(_device_cm(f"vnpu-{i}", 4))
    for k in range(services):
        podgroup, pods = _service("ai", f"svc{k}", rng.choice((1, 2, 4)), [],
                                  pending=rng.randint(2, 4), labels={})
        podgroup["metadata"]["labels"] = {"fault-scheduling": "grace"}
        b.podgroups.append(podgroup)
        b.pods.extend(pods)
    return VolcanoCluster(b, now, extra_devices=devices)


# --------------------------------------------------------------------------- Volcano JSON


def _resource(milli_cpu: float = 0.0, memory: float = 0.0,
              scalars: dict[str, float] | None = None, max_tasks: int = 0) -> dict[str, Any]:
    return {"MilliCPU": milli_cpu, "Memory": memory, "ScalarResources": scalars,
            "MaxTaskNum": max_tasks}


def task_info(pod: dict[str, Any], job_id: str, status: int,
              node_name: str = "") -> dict[str, Any]:
    """A Volcano ``TaskInfo`` as Go's encoding/json writes it (no JSON tags)."""
    resource, count = _npu_request(pod)
    scalars = {resource: count * 1000.0} if resource else None
    req = _resource(32000.0, 256 * 2**30, scalars)
    return {
        "UID": pod["metadata"]["uid"], "Job": job_id, "Name": pod["metadata"]["name"],
        "Namespace": pod["metadata"]["namespace"],
        "TaskRole": pod["metadata"].get("annotations", {}).get("volcano.sh/task-spec", ""),
        "Resreq": req, "InitResreq": req, "DRAResreq": None, "ResourceClaimKeys": None,
        "ResourceClaimDRAResreq": None,
        "NodeName": node_name, "EvictionOccurred": False, "JobAllocatedHyperNode": "",
        "Status": status, "LastTransaction": None,
        "Priority": pod["spec"].get("priority", 0), "VolumeReady": False,
        "Preemptable": False, "BestEffort": False, "HasRestartableInitContainer": False,
        "SchGated": False, "RevocableZone": "", "NumaInfo": None, "Pod": pod,
        "PodAnnotations": dict(pod["metadata"].get("annotations") or {}),
        "CustomBindErrHandlerSucceeded": False,
    }


def _node_info(node: dict[str, Any], tasks: dict[str, Any], used: int) -> dict[str, Any]:
    cap = node["status"]["capacity"]
    resource = next((r for r in ("huawei.com/npu", "huawei.com/Ascend910",
                                 "huawei.com/npu-core") if r in cap), "huawei.com/npu")
    total = float(cap.get(resource, 0)) * 1000
    alloc = _resource(190000.0, 1584 * 2**30, {resource: total}, 110)
    idle = _resource(190000.0 - 32000.0 * len(tasks), 1584 * 2**30,
                     {resource: total - used * 1000.0}, 110)
    used_r = _resource(32000.0 * len(tasks), 0.0, {resource: used * 1000.0})
    return {
        "Name": node["metadata"]["name"], "Node": node,
        "State": {"Phase": "Ready", "Reason": ""},
        "Releasing": _resource(), "Pipelined": _resource(), "Idle": idle, "Used": used_r,
        "Allocatable": alloc, "Capacity": alloc,
        "ResourceUsage": {"CPUUsageAvg": {}, "MEMUsageAvg": {}},
        "Tasks": tasks, "NumaInfo": None, "UnassignedNumaPods": None,
        "NumaSchedulerInfo": None, "RevocableZone": "", "Others": {},
        "OversubscriptionNode": False, "OfflineJobEvicting": False,
        "OversubscriptionResource": _resource(), "ImageStates": {}, "Generation": 1,
        "BindGeneration": 0,
    }


def pod_status(pod: dict[str, Any]) -> int:
    """Volcano's ``TaskStatus`` of a pod."""
    phase = pod["status"].get("phase", "Pending")
    if phase == "Pending":
        return STATUS["Bound"] if pod["spec"].get("nodeName") else STATUS["Pending"]
    return STATUS.get(phase, STATUS["Running"])


def volcano_snapshot(cluster: VolcanoCluster) -> dict[str, Any]:
    """The ``OnSessionOpenRequest`` Volcano would send for the cluster."""
    node_tasks: dict[str, dict[str, Any]] = {n["metadata"]["name"]: {} for n in cluster.nodes}
    node_used: dict[str, int] = {name: 0 for name in node_tasks}
    job_tasks: dict[str, dict[str, Any]] = {}
    for pod in cluster.pods:
        job = _job_id(pod) or f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        info = task_info(pod, job, pod_status(pod), pod["spec"].get("nodeName", ""))
        job_tasks.setdefault(job, {})[info["UID"]] = info
        if _active(pod) and pod["spec"]["nodeName"] in node_tasks:
            node_tasks[pod["spec"]["nodeName"]][info["UID"]] = info
            node_used[pod["spec"]["nodeName"]] += _npu_request(pod)[1]
    jobs: dict[str, Any] = {}
    for pg in cluster.builder.podgroups:
        job_id = f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
        tasks = dict(sorted(job_tasks.get(job_id, {}).items()))
        index: dict[str, dict[str, Any]] = {}
        for uid, info in tasks.items():
            index.setdefault(str(info["Status"]), {})[uid] = info
        jobs[job_id] = {
            "UID": job_id, "PgUID": pg["metadata"]["uid"], "Name": pg["metadata"]["name"],
            "Namespace": pg["metadata"]["namespace"], "Queue": "default",
            "Priority": 0, "MinAvailable": pg["spec"].get("minMember", 0), "WaitingTime": None,
            "JobFitErrors": "", "NodesFitErrors": {}, "AllocatedHyperNode": "",
            "NetworkTopology": None, "SubJobs": {}, "TaskToSubJob": {}, "MinSubJobs": None,
            "TaskStatusIndex": dict(sorted(index.items())), "Tasks": tasks,
            "TaskMinAvailable": {"worker": pg["spec"].get("minMember", 0)},
            "TaskMinAvailableTotal": pg["spec"].get("minMember", 0),
            "Allocated": _resource(), "TotalRequest": _resource(),
            "CreationTimestamp": pg["metadata"].get("creationTimestamp", ""),
            "PodGroup": {**pg, "Version": "v1beta1"},
            "ScheduleStartTimestamp": "0001-01-01T00:00:00Z", "Preemptable": False,
            "RevocableZone": "", "Budget": {"MinAvailable": "", "MaxUnavilable": ""},
        }
    nodes = {n["metadata"]["name"]: _node_info(n, dict(sorted(node_tasks[
        n["metadata"]["name"]].items())), node_used[n["metadata"]["name"]])
        for n in sorted(cluster.nodes, key=lambda n: n["metadata"]["name"])}
    return {"Jobs": dict(sorted(jobs.items())), "Nodes": nodes,
            "Queues": {"default": {"UID": "default", "Name": "default", "Weight": 1,
                                   "Weights": "", "Hierarchy": "", "Queue": None}},
            "NamespaceInfo": {}, "RevocableNodes": {}, "NodeList": None}


# --------------------------------------------------------------------------- Ascend stand-in


class AscendStandIn:
    """Stand-in for the Ascend plugin's node scores, selections and annotations.

    It follows the plugin's code (mind-cluster commit 22bb3d98,
    ``component/ascend-for-volcano``) step by step for super-pod (A3, 850), 950 and
    multilevel jobs, and gives other jobs a best-fit score below 100:

    * a job's selection is made at its first scored task of the session, from the
      candidate nodes the allocate loop hands to ``BatchNodeOrderFn`` for that task
      (:meth:`scores` re-creates ``ScoreBestNPUNodes``), and kept for the job across
      sessions (:attr:`super_pods`: ``job.SuperPods``, copied from session to session by
      ``InitNPUSession``);
    * the cached selection is kept when ``VerifyCachedSuperPods`` holds (:meth:`_verify`);
    * a fresh selection that cannot be made clears ``JobReadyTag`` (:attr:`ready`): no
      scores for the job for the rest of the session;
    * each task's rank is pinned to its node of the selection with 1e10
      (``scoreNodeForReadyJob``: 1e8 × the plugin's score weight 100), nothing when that
      node is not a candidate;
    * ``super-pod-rank`` (A3 and 850 ``UseAnnotation``) is the node's logical super pod in
      a selection made this session (``nodeVPodId``, filled only by a fresh selection of a
      handler built per session), empty otherwise; 950 and multilevel write none;
    * the rescheduler's fault jobs (:attr:`fault_jobs`, :meth:`_note_fault_jobs`): a job
      labelled ``fault-scheduling`` grace/force whose selection names a node that failed
      loses its ``job.SuperPods`` and is reselected from ``fJob.SuperPods``: A3 / 850 by
      ``selectNodesForFaultJob`` (:meth:`_select_fault_superpod`), multilevel from
      history in ``sortNodesByCachedRank`` order (:meth:`_sort_by_cached_rank`, also the
      order of any multilevel selection); the 950 handler's fault path acts on pod-level
      rescheduling only, so a job-level fault job is selected afresh;
    * dynamic-vNPU replicas (:meth:`vnpu_scores`): a best-fit score; the slice is cut on
      the best-fitting chip of the node.

    The fresh selection itself is the greedy port's (the plugin's strategies) on a view of
    the cluster holding only the candidates, with Go's map order re-created by a seeded
    shuffle of the ranks among the selected nodes of each physical super pod (950: of each
    rack): ``getSuperPodTop`` / ``getSuperPodMap`` keep the nodes of a super pod in a Go
    map, so which of them gets which rank is not defined by the plugin.  Not re-created:
    the pod-level fault paths (``selectNodeForPodLevelRescheduling``, 950's
    ``selectNodesByRack``), ``isDelayingJob``'s 10-s wait (a refusal stands for it),
    multilevel's escalation of the fault scope (the greedy port's selection on the
    candidates stands for ``Reschedule``), batch scoring (``podgroup-sched-enable``), the
    inference and MindIE paths, and the random order of ties between super pods.
    """

    def __init__(self, seed: int = 0) -> None:
        self.lifecycle = CacheLifecycle(None)
        self.base: Scenario | None = None
        self.rng = random.Random(seed)
        #: job id -> rank -> node: the plugin's ``job.SuperPods``, kept across sessions
        self.super_pods: dict[str, dict[int, str]] = {}
        #: job id -> rank -> node of the last selection, kept when the cache goes stale
        #: (multilevel's ``resolveSuperPodsForReschedule`` reads job.SuperPods then)
        self.previous: dict[str, dict[int, str]] = {}
        #: job id -> node -> logical super pod of this session's fresh selection
        #: (``nodeVPodId``); a job whose cached selection was kept has none
        self.node_vpod: dict[str, dict[str, str]] = {}
        #: job id -> ``JobReadyTag`` of this session (absent: true)
        self.ready: dict[str, bool] = {}
        self.verified: set[str] = set()  # ``SuperPodsVerified`` of this session
        self.fresh: set[str] = set()  # jobs selected afresh this session
        #: job id -> (``fJob.SuperPods`` as rank -> node, the fault tasks' nodes): the
        #: rescheduler's fault jobs (``FaultJobs`` with ``IsFaultJob``), kept across sessions
        self.fault_jobs: dict[str, tuple[dict[int, str], set[str]]] = {}

    def open(self, cluster: VolcanoCluster) -> Scenario:
        """Session open (``InitNPUSession``): the cluster as the plugin sees it, the cache
        refreshed, every job ``JobReadyTag = true`` and ``SuperPodsVerified = false``."""
        base = cluster.scenario()
        running = [RunningPods(r.owner_uid, dict(r.ranks)) for r in base.running]
        running += [RunningPods(j.owner_uid, dict(j.running_ranks)) for j in base.jobs
                    if j.running_ranks]
        owners = [j.owner_uid for j in base.jobs if j.owner_uid]
        owners += [r.owner_uid for r in base.running if r.owner_uid]
        self.lifecycle.start_session(cluster.now, owners, running)
        for pods in running:
            for rank, node in pods.ranks.items():
                if pods.owner and self.lifecycle.node(pods.owner, rank) != node:
                    self.lifecycle.allocate(pods.owner, rank, node, cluster.now)
        self.base = base
        self.node_vpod, self.ready, self.verified, self.fresh = {}, {}, set(), set()
        self._note_fault_jobs(base, cluster)
        return base

    def _note_fault_jobs(self, base: Scenario, cluster: VolcanoCluster) -> None:
        """The rescheduler's fault jobs (``updateNewFaultJobAttr``): a job labelled
        ``fault-scheduling`` grace/force whose selection names a node that is now unhealthy
        or gone; its ``job.SuperPods`` is cleared (``collectHotSwitchReplaceNodes``) and kept
        as ``fJob.SuperPods``.  A job with no pending task is no fault job any more."""
        usable = {n.name for n in base.nodes if n.health.value != "unhealthy"}
        pending = {j.name for j in base.jobs}
        labels = {f"{pg['metadata']['namespace']}/{pg['metadata']['name']}":
                  pg["metadata"].get("labels") or {} for pg in cluster.builder.podgroups}
        for name in [j for j in self.fault_jobs if j not in pending]:
            del self.fault_jobs[name]
        for job in base.jobs:
            cached = self.super_pods.get(job.name)
            label = labels.get(job.name, {}).get("fault-scheduling")
            if not cached or label not in ("grace", "force"):
                continue
            faulty = {n for n in cached.values() if n not in usable}
            if faulty:
                self.fault_jobs[job.name] = (dict(cached), faulty)
                del self.super_pods[job.name]

    @property
    def selection(self) -> dict[str, dict[str, str]]:
        """Job id -> node -> ``super-pod-rank`` of the jobs selected this session."""
        return {job: dict(nodes) for job, nodes in self.node_vpod.items()}

    def _verify(self, job: Job, candidates: list[str]) -> bool:
        """``VerifyCachedSuperPods`` (``plugin/job.go``; multilevel's
        ``tryUseCachedSuperPods`` is not gated by ``prefer-previous-node``): keep the
        cached selection when every cached node runs a task of the job or is a candidate
        (``IsCachedSuperPodsValid``)."""
        cached = self.super_pods.get(job.name)
        if not cached:
            return False
        if job.name in self.verified:
            return True
        self.verified.add(job.name)
        assert self.base is not None
        prefer = self.base.config.prefer_previous_node
        if not prefer and _policy_family(job.policy) is not Family.MULTILEVEL:
            return False
        running = set(job.running_ranks.values())
        offered = set(candidates)
        return all(n in running or n in offered for n in cached.values())

    def _select(self, job: Job, candidates: list[str], free: dict[str, int]
                ) -> dict[int, str] | None:
        """A fresh selection from the candidates (``selectSuperPodForJob`` →
        ``getSuperPodTop`` → ``classifySuperPod`` and its passes for A3/850,
        ``selectNodesForJob`` → ``getSuperPodMap`` and its strategies for 950, the
        multilevel tree's), as the greedy port makes it on a view holding only the
        candidates; ``None`` when it fails (the plugin's errors clear ``JobReadyTag``)."""
        assert self.base is not None
        offered = set(candidates)
        if job.tasks > len(offered):  # "not enough node, npuTaskNum: %d, nodes: %d"
            return None
        family = _policy_family(job.policy)
        fault = self.fault_jobs.get(job.name)
        if fault is not None and family is Family.SUPERPOD and not job.running_ranks:
            return self._select_fault_superpod(job, candidates, free, *fault)
        # the 950 handler's selectNodesForFaultJob returns at once for a job-level
        # rescheduling (isPodLevelRescheduling false): a fresh selection
        ranks = self._select_fresh(job, offered, free)
        if ranks is None:
            return None
        if family is Family.MULTILEVEL:
            history = fault[0] if fault is not None else self.previous.get(job.name)
            return self._sort_by_cached_rank(job, ranks, history or {})
        return self._go_map_order(job, ranks)

    def _select_fresh(self, job: Job, offered: set[str], free: dict[str, int]
                      ) -> dict[int, str] | None:
        """The greedy port's selection for ``job`` on a view holding only ``offered``."""
        from solver.facade import solve

        assert self.base is not None
        nodes = [n.model_copy(update={"free": free.get(n.name, n.free)})
                 for n in self.base.nodes if n.name in offered]
        view = self.base.model_copy(update={
            "nodes": nodes, "running": [], "vnpu_jobs": [],
            "jobs": [job.model_copy(update={"running_ranks": {}, "fault_ranks": []})],
            "affinity_cache": AffinityCacheModel()})
        try:
            placement = solve(view, engine="greedy", time_limit=30).placement
        except InputError:
            return None
        chosen = next((item for item in placement.jobs
                       if item.name == job.name and item.placed), None)
        if chosen is None:
            return None
        return {int(rank): node for rank, node in chosen.ranks.items()}

    def _select_fault_superpod(self, job: Job, candidates: list[str], free: dict[str, int],
                               original: dict[int, str], faulty: set[str]
                               ) -> dict[int, str] | None:
        """The A3 / 850 fault-job path (``selectSuperPodForJob`` →
        ``selectNodesForFaultJob``): ``isDelayingJob`` (a healthy task's node not a
        candidate: refused, within the first 10 s), ``selectForJobRescheduling`` (an original
        logical super pod wholly among the candidates and healthy is kept),
        ``selectNodeFromOriginSuperPod`` → ``getSelectNodes`` (healthy nodes keep their
        rank, the rest filled from the physical super pod's candidates in Go map order,
        healthy first), then ``selectNodes`` afresh for the rest.  Go map order is the
        seeded shuffle."""
        assert self.base is not None
        block = max(1, (job.sp_block or job.npu_per_task * job.tasks) // job.npu_per_task)
        offered = set(candidates)
        if any(n not in faulty and n not in offered for n in original.values()):
            return None  # isDelayingJob: "wait for normal node resource release"
        where = {n.name: n.super_pod_id for n in self.base.nodes}
        total: dict[Any, list[str]] = {}
        for name in candidates:
            total.setdefault(where.get(name), []).append(name)
        for names in total.values():
            self.rng.shuffle(names)  # superPod is a Go map
        groups = {g: [original.get(g * block + i, "") for i in range(block)]
                  for g in range(job.tasks // block)}
        selected: dict[int, list[str]] = {}
        order = list(groups)
        self.rng.shuffle(order)  # fJob.SuperPods is a Go map
        waiting = []
        for g in order:  # selectForJobRescheduling
            if all(n in offered and n not in faulty for n in groups[g]):
                selected[g] = groups[g]
                for n in groups[g]:
                    total[where.get(n)].remove(n)
            else:
                waiting.append(g)
        for g in waiting:  # selectNodeFromOriginSuperPod
            pool = total.get(where.get(groups[g][0]), [])
            if len(pool) < block:
                continue
            new = ["" for _ in range(block)]
            reserve = []
            for i, n in enumerate(groups[g]):  # getSelectNodes
                if n not in faulty and n in pool:
                    new[i] = n
                    pool.remove(n)
                else:
                    reserve.append(i)
            fill = [n for n in pool if n not in faulty] + [n for n in pool if n in faulty]
            for i, n in zip(reserve, fill, strict=False):
                new[i] = n
                pool.remove(n)
            selected[g] = new
        unready = sorted(g for g in groups if g not in selected)
        if unready:  # classifySuperPod + selectNodes on what is left
            rest = {n for names in total.values() for n in names}
            part = job.model_copy(update={"tasks": len(unready) * block})
            fresh = self._select_fresh(part, rest, free)
            if fresh is None:
                return None
            fresh = self._go_map_order(part, fresh)
            for k, g in enumerate(unready):
                selected[g] = [fresh[k * block + i] for i in range(block)]
        return {g * block + i: n for g, names in selected.items() for i, n in enumerate(names)}

    @staticmethod
    def _sort_by_cached_rank(job: Job, ranks: dict[int, str], cached: dict[int, str]
                             ) -> dict[int, str]:
        """The multilevel handler's order of a selection (``GetSuperNodeMapFromTaskTree``
        → ``sortNodesByCachedRank``, ``plugin/supernode.go``): each level-1 group's nodes
        sorted by name, a node of the cached group back at its cached rank, the others in
        the free ranks in name order."""
        text = job.affinity_config or ""
        size = parse_int(text.split(",")[0].partition("=")[2].strip()) or job.tasks
        out: dict[int, str] = {}
        for start in range(0, job.tasks, max(1, size)):
            ranks_here = [r for r in range(start, start + size) if r in ranks]
            names = sorted(ranks[r] for r in ranks_here)
            slots: dict[int, str] = {}
            for r in ranks_here:
                if cached.get(r) in names:
                    slots[r] = cached[r]
            others = iter(n for n in names if n not in slots.values())
            for r in ranks_here:
                out[r] = slots[r] if r in slots else next(others)
        return out

    def _go_map_order(self, job: Job, ranks: dict[int, str]) -> dict[int, str]:
        """The ranks shuffled among the selected nodes of each physical super pod (950:
        of each rack): the plugin iterates those nodes in Go map order
        (``selectNodesFromSuperPod``; 950: ``transferSuperPodToRackIdMap``)."""
        family = _policy_family(job.policy)
        if family is Family.MULTILEVEL:
            return ranks
        assert self.base is not None
        where = {n.name: (n.super_pod_id, n.rack_id if family is Family.RACK else None)
                 for n in self.base.nodes}
        groups: dict[Any, list[int]] = {}
        for rank in sorted(ranks):
            groups.setdefault(where.get(ranks[rank]), []).append(rank)
        out: dict[int, str] = {}
        for members in groups.values():
            nodes = [ranks[r] for r in members]
            self.rng.shuffle(nodes)
            out.update(zip(members, nodes, strict=True))
        return out

    def scores(self, job: Job, nodes: list[str], free: dict[str, int],
               rank: int = 0) -> dict[str, float]:
        """The plugin's scores of the candidate nodes for the task of ``rank`` of ``job``
        (``BatchNodeOrderFn`` → the handler's ``ScoreBestNPUNodes``)."""
        family = _policy_family(job.policy)
        if family not in (Family.SUPERPOD, Family.RACK, Family.MULTILEVEL):
            return {n: float(max(0, 64 - 8 * (free[n] - job.npu_per_task))) for n in nodes}
        if not self.ready.get(job.name, True):  # JobReadyTag false: no scores
            return {}
        if not self._verify(job, nodes):
            chosen = self._select(job, nodes, free)
            if chosen is None:
                self.ready[job.name] = False
                return {}
            self.super_pods[job.name] = self.previous[job.name] = chosen
            self.verified.add(job.name)
            self.fresh.add(job.name)
            if family is Family.SUPERPOD:  # nodeVPodId: A3 and 850 write super-pod-rank
                block = max(1, (job.sp_block or job.npu_per_task * job.tasks)
                            // job.npu_per_task)
                self.node_vpod[job.name] = {node: str(r // block)
                                            for r, node in chosen.items()}
        node = self.super_pods[job.name].get(rank)  # scoreNodeForReadyJob
        if node is None or node not in nodes:
            return {}
        return {node: PLUGIN_SELECTION_SCORE}

    @staticmethod
    def vnpu_scores(nodes: list[str], cores: dict[str, dict[int, int]], need: int
                    ) -> dict[str, float]:
        """The dynamic-vNPU handler's scores (``DynamicVNPU.ScoreBestNPUNodes``, best fit):
        higher on a node whose fitting chip has fewer free AI cores left, below 100."""
        out = {}
        for node in nodes:
            left = [c for c in cores.get(node, {}).values() if c >= need]
            if left:
                out[node] = float(max(0, 64 - (min(left) - need)))
        return out

    def super_pod_rank(self, job: Job, node: str) -> str | None:
        """The ``super-pod-rank`` the plugin's ``UseAnnotation`` writes for a task of
        ``job`` bound on ``node`` (``None``: the handler writes none)."""
        if _policy_family(job.policy) is not Family.SUPERPOD:
            return None
        return self.node_vpod.get(job.name, {}).get(node, "")


# --------------------------------------------------------------------------- session


@dataclass
class SessionReport:
    """What one session did: bindings, calls, bytes, times."""

    bindings: dict[str, dict[int, str]] = field(default_factory=dict)
    super_pod_ranks: dict[str, dict[int, str]] = field(default_factory=dict)
    discarded: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    bytes_sent: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)
    open_status: int = 0

    def note(self, verb: str, size: int, seconds: float) -> None:
        """Count one call."""
        self.calls[verb] = self.calls.get(verb, 0) + 1
        self.bytes_sent[verb] = self.bytes_sent.get(verb, 0) + size
        self.seconds.setdefault(verb, []).append(seconds)


def _post(client: httpx.Client, url: str, verb: str, body: Any, report: SessionReport,
          raw: bytes | None = None) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body, separators=_SEP).encode()
    started = time.perf_counter()
    response = client.post(f"{url}/{verb}", content=content,
                           headers={"Content-Type": "application/json"})
    report.note(verb, len(content), time.perf_counter() - started)
    return response


def run_session(client: httpx.Client, url: str, cluster: VolcanoCluster,
                plugin: AscendStandIn, *, seed: int = 0, percentage_nodes_to_find: int = 100,
                predicate: bool = True, cache_errors: bool = True,
                min_nodes_to_find: int = MIN_NODES_TO_FIND) -> SessionReport:
    """Play one Volcano session against the extender at ``url`` (its prefix).

    ``percentage_nodes_to_find`` below 100 makes the predicate phase stop once that share
    of the nodes (at least ``min_nodes_to_find``, Volcano's 100) fit; tests lower the
    minimum to see the early stop on small clusters.
    """
    report = SessionReport()
    rng = random.Random(seed)
    snapshot = volcano_snapshot(cluster)
    raw = json.dumps(snapshot, separators=_SEP).encode()
    del snapshot
    response = _post(client, url, "onSessionOpen", None, report, raw=raw)
    report.open_status = response.status_code
    base = plugin.open(cluster)
    healthy = {n.name for n in base.nodes if n.health.value != "unhealthy"}
    free = {n.name: n.free for n in base.nodes}
    # dynamic vNPU nodes: node -> chip -> free AI cores (no slice on an unstable chip)
    cores = {n.name: ({c.id: c.free_cores if c.free_cores is not None else n.vnpu.ai_cores or 0
                       for c in n.vnpu.chips if not c.unstable} if n.vnpu.chips is not None
                      else dict.fromkeys(range(n.npus), n.vnpu.ai_cores or 0))
             for n in base.nodes if n.vnpu is not None}
    kinds = {n.name: n.vnpu.chip_kind for n in base.nodes if n.vnpu is not None}
    node_objects = {n["metadata"]["name"]: n for n in cluster.nodes}
    used = cluster.used_chips()
    snapshot_nodes = {name: _node_info(obj, {}, 0) for name, obj in node_objects.items()}
    order = sorted(node_objects, key=natural_key)
    pods_by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in cluster.pods:
        job_id = _job_id(pod)
        if job_id and not pod["spec"].get("nodeName") and pod["status"].get("phase") == "Pending":
            pods_by_job.setdefault(job_id, []).append(pod)
    start_index = 0
    with ThreadPoolExecutor(PREDICATE_WORKERS) as workers:
        queue: list[Job | VnpuJob] = [*base.jobs, *base.vnpu_jobs]
        for job in queue:  # queue order: priority, creation (vNPU jobs after)
            vnpu = isinstance(job, VnpuJob)
            pending = sorted(pods_by_job.get(job.name, []),
                             key=lambda p: (-p["spec"].get("priority", 0),
                                            natural_key(p["metadata"]["name"])))
            if not pending:
                continue
            error_cache: set[str] = set()
            allocated: list[tuple[dict[str, Any], str, list[str]]] = []
            for pod in pending:
                _, need = _npu_request(pod)
                fit = [n for n in order if n in healthy and (
                    any(left >= need for left in cores.get(n, {}).values()) if vnpu
                    else n not in cores and free.get(n, 0) >= need)
                       and not node_objects[n]["spec"].get("unschedulable")
                       and n not in error_cache]
                info = task_info(pod, job.name, STATUS["Pending"])
                to_find = len(order) if (len(order) <= min_nodes_to_find
                                         or percentage_nodes_to_find >= 100) else max(
                    min_nodes_to_find, len(order) * percentage_nodes_to_find // 100)
                rotated = fit[start_index % max(1, len(fit)):] + fit[:start_index % max(1,
                                                                                     len(fit))]
                candidates: list[str] = []
                if predicate:
                    for begin in range(0, len(rotated), PREDICATE_WORKERS):
                        batch = rotated[begin:begin + PREDICATE_WORKERS]
                        answers = list(workers.map(
                            lambda n, info=info: _post(client, url, "predicate", {
                                "task": info, "node": snapshot_nodes[n]}, report), batch))
                        for name, answer in zip(batch, answers, strict=True):
                            body = answer.json() if answer.status_code == 200 else {}
                            if answer.status_code == 200 and body.get("status"):
                                if cache_errors:
                                    error_cache.add(name)
                                continue
                            candidates.append(name)
                        if len(candidates) >= to_find:
                            break
                    start_index += len(candidates)
                else:
                    candidates = rotated[:to_find]
                if not candidates:
                    break
                answer = _post(client, url, "prioritize", {
                    "task": info, "nodes": [snapshot_nodes[n] for n in candidates]}, report)
                extender = answer.json().get("nodeScore") or {} \
                    if answer.status_code == 200 else {}
                if isinstance(job, VnpuJob):
                    ascend = plugin.vnpu_scores(candidates, cores, need)
                    total = {n: float(extender.get(n, 0.0)) + ascend.get(n, 0.0)
                             for n in candidates}
                else:
                    ascend = plugin.scores(job, candidates, free, _rank(pod))
                    total = {n: float(extender.get(n, 0.0)) + ascend.get(n, 0.0)
                             + 10.0 * (1 - free[n] / max(1, need * 8)) for n in candidates}
                best = max(total.values())
                node = rng.choice(sorted(n for n, s in total.items() if s == best))
                if vnpu:  # the slice the plugin cuts: best-fit chip, the template of `need`
                    chip = min((left, c) for c, left in cores[node].items() if left >= need)[1]
                    cores[node][chip] -= need
                    chips = [f"{chip}-{vnpu_template(kinds[node], need)}"]
                else:
                    chips = [c for c in cluster.node_chips(node_objects[node])
                             if c not in used.get(node, set())][:need]
                    used.setdefault(node, set()).update(chips)
                    free[node] -= need
                allocated.append((pod, node, chips))
                plugin.lifecycle.allocate(job.owner_uid, _rank(pod), node, cluster.now)
                _post(client, url, "allocateFunc", {"task": task_info(
                    pod, job.name, STATUS["Allocated"], node)}, report)
            if len(allocated) < len(pending):  # gang not ready: discard, last first
                for pod, node, chips in reversed(allocated):
                    if vnpu:
                        cores[node][parse_int(chips[0].partition("-")[0]) or 0] += \
                            _npu_request(pod)[1]
                        continue
                    used[node].difference_update(chips)
                    free[node] += _npu_request(pod)[1]
                    plugin.lifecycle.discard(job.owner_uid, _rank(pod))
                    _post(client, url, "deallocateFunc", {"task": task_info(
                        pod, job.name, STATUS["Pending"], node)}, report)
                report.discarded.append(job.name)
                continue
            for pod, node, chips in allocated:
                spr = None if isinstance(job, VnpuJob) else plugin.super_pod_rank(job, node)
                cluster.bind(pod, node, chips, spr)
                report.bindings.setdefault(job.name, {})[_rank(pod)] = node
                if spr is not None:
                    report.super_pod_ranks.setdefault(job.name, {})[_rank(pod)] = spr
    _post(client, url, "onSessionClose", {}, report)
    return report


def evict_jobs(cluster: VolcanoCluster, jobs: Iterable[str]) -> int:
    """Evict several jobs (see :meth:`VolcanoCluster.evict`)."""
    return sum(cluster.evict(job) for job in jobs)


__all__ = ["AscendStandIn", "DumpObjects", "SessionReport", "VolcanoCluster",
           "cluster_from_scenario", "run_session", "task_info", "volcano_snapshot"]
