"""Assemble a contract scenario from Kubernetes objects (the mapping of A.6).

:class:`ClusterImport` takes objects one at a time (:meth:`ClusterImport.add`), keeping
only compact records, and :meth:`ClusterImport.build` turns them into a validated
:class:`models.scenario.Scenario` plus the warnings about what the contract cannot express.

Decisions on the reference's inferences ([I] in cluster-integration.md), in one place:

* ``now``: the importer's clock unless given.
* ConfigMap mode: ``useClusterInfoManager`` chooses it (default ClusterD); when the chosen
  mode's ConfigMaps are absent and the other mode's are present, the other is used, with a
  warning.  Without a scheduler ConfigMap the mode is the one whose records are present.
* A node with NPU capacity but no device-info record: free 0, no super pod, warning (the
  plugin cannot use a node it has no device info for).  Nodes without NPU capacity are not
  imported (reported).
* Free chips: capped at ``allocatable − Σ active pod requests`` (warning when it bites);
  network-unhealthy chips are subtracted (warning); ``npus`` is the capacity, and a
  ``baseDeviceInfos`` list of another length is reported.
* Health: Ready≠True or cordoned → unhealthy; NodeD PreSeparate → unhealthy (warning).
* ``rack-id``: only when the device-info record has the ``RackID`` key (≥ 0), so a missing
  key is not read as rack 0.
* Job state: all NPU pods unbound → pending job; all bound → running job; some of each →
  pending job whose ``running-ranks`` are the bound ranks (pod-level rescheduling;
  bound ranks on nodes that are not imported are left to be placed, with a warning).
  Labels ``pod-rescheduling=on`` / ``process-recover-enable=on`` become
  ``pod-rescheduling`` / ``process-recover``; ``inferserviceid`` is read for super-pod and
  950 jobs (running ones too); MindIE's ``app`` and ``jobID`` become the job's ``labels``
  (and, on A3 jobs, ``app``/``jobID`` with the first preferred pod-affinity term's
  ``matchLabels`` as ``pod-affinity``, and the annotation ``sp-fit`` as ``sp-fit`` when it
  is ``idlest`` and both labels are set: upstream's ``isIdleResourceFit``).
* ``pending-sessions`` (upstream's in-memory ``PendingSessionNum``) is inferred from which
  pods are pending, as the lowest stage at which upstream's rescheduler deletes that set
  (§4.4): a pod-level job with a fully pending logical super pod (A3/850), block (950)
  or level1 group (multilevel) that holds a pending rank which is not a fault rank → 6;
  a 950 job with such a rack window (tpBlock > 1) → 3; otherwise 0.  A group whose
  pending ranks are all fault ranks shows no escalation (its pods all failed).
  A PodGroup without pods yet is a pending job of ``minMember`` tasks sized from
  ``minResources`` (warning).  NPU pods without ``scheduling.k8s.io/group-name`` are not
  Volcano jobs: their chips count as used, they are reported.  Bound pods without any rank
  source get the free ranks in pod-name order (warning).  Running ranks on an unhealthy node
  or chip are reported (a running job has no fault ranks).
* Policy: upstream's handler selection; ``accelerator-type`` absent, ``module`` or
  ``module-910b-8`` (module910x8 / module910bx8, which have no contract policy) map to
  ``chip8-node8``; ``card`` (card910x2) and inference cards are not imported.  Dynamic
  vNPU (``huawei.com/npu-core``) nodes and jobs are imported by ``models.kube.vnpu``;
  static vNPU devices are not.
* Priority: the PodGroup's ``priorityClassName`` (else the pod's) → PriorityClass value;
  else the pod's ``spec.priority``; else the global default class; else 0.
* Fault ranks of a pending job: ranks of its Failed pods, ranks whose cached node is now
  unhealthy, and the ranks of the latest ``job-reschedule-reason`` record when that record
  belongs to the current incarnation of the pods: not older than the oldest current pod
  (else the PodGroup) minus 10 minutes.  The rescheduler writes the record when it deletes
  the pods, so an older record is an earlier fault.
* Cache: bound ranks of every job (upstream's cold-start seed, ``updated = now``, rounded
  down to the owner's 60-s grid: :func:`~models.kube.jobs.bound_stamp`); then, for
  ranks not bound now, ``job-reschedule-reason`` (node and time of the newest record); then
  the ``--previous`` scenario's entries (kept with their times).  Entries on nodes that are
  not imported are dropped with a warning.  Why the grid: an owner's entries live by its
  newest time against a 72-h TTL, so a stamp up to 59 s early moves its liveness by
  nothing that matters, while a watcher importing every second with the real clock would
  otherwise re-stamp, send and apply every bound rank's entry every second (most of a
  second of CPU per ``PATCH`` at 65,536 nodes); the grid's phase (the CRC-32 of the owner's
  uid) differs per owner, so the once-a-minute re-stamps are spread over the minute.
* Jobs that upstream's ``ValidNPUJob`` rejects are not imported (warning quoting the rule),
  as upstream never places them; order is queue order: priority, then creation time.
* Pending pods of one job that share a rank (Volcano numbers each task role from 0), hold
  a bound pod's rank or a rank beyond the job's pods: the job is not imported (left to
  Volcano, :attr:`ImportResult.refused`), in both modes: no plan can tell its pods apart.
* Lenient mode (``strict=False``, the CLI's default and the extender's): an object the
  importer refuses takes out only its own job (Pods, PodGroups; named in ``refused`` and
  a warning) or itself (a Node, a device record, a PriorityClass: warned); a running job
  that breaks a rule a pending job must meet (blocks, group sizes, a gang with a rank on
  a node that is gone) is imported as the occupancy it is: its chips stay used and its
  cache entries kept, but it is not a running job of the scenario (warned, naming the
  rule).  A rule across objects that names one job (validation of the assembled
  scenario) takes that job out the same way.  A rule that names a node takes out that
  node before the jobs read the nodes (a rule on the nodes alone), or
  makes the build run again without it (running pods claiming more chips than it has):
  its ranks are those of a node that is gone.  An over-full super pod keeps
  ``super-pod-size`` nodes; the others (label disagreeing with ``SuperPodID`` first,
  then the last by name) are imported outside every super pod.  Each is warned with the
  node, field and rule.  The scheduler ConfigMap's errors refuse the import in both
  modes: every job depends on it.

Why this file is long: :class:`ClusterImport` is one collector of the objects added one
at a time (compact records kept per kind), and :meth:`ClusterImport.build` with its
helpers (job specs, cache, running and pending jobs, vNPU jobs) makes the decisions listed
above from those records; they read the same records and warnings, and the decisions are
documented here, in one place, in about 80 lines of this docstring; the lenient mode's
bookkeeping (which job an error belongs to) sits beside the collector that records them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from models.compiled import natural_key
from models.documents import DocumentError, check_data, dump_data
from models.io import scenario_from_data
from models.kube.config import is_scheduler_configmap, scheduler_config
from models.kube.jobs import (
    AFFINITY_CONFIG_ANNOTATION,
    GROUP_ANNOTATION,
    RESCHEDULE_CM,
    RESCHEDULE_NAMESPACE,
    JobGroup,
    JobSpec,
    PodGroupRecord,
    PodRecord,
    PriorityClasses,
    RescheduleTask,
    bound_stamp,
    job_spec,
    pod_record,
    podgroup_record,
    reschedule_records,
)
from models.kube.nodes import (
    STALE_SECONDS,
    DeviceState,
    NodeRecord,
    NodeUsage,
    free_chips,
    node_health,
    node_images,
    node_record,
)
from models.kube.source import Diagnostics, describe
from models.kube.vnpu import VnpuGroup, vnpu_job, vnpu_node
from models.limits import MAX_FILE_BYTES, escape_text, listing
from models.scenario import (
    DEFAULT_CACHE_TTL_SECONDS,
    Config,
    Family,
    Health,
    Job,
    Node,
    RingController,
    RunningJob,
    Scenario,
    VnpuJob,
)
from models.validation import (
    InputError,
    JobShape,
    check_running,
    derive_shape,
    validate_scenario,
)
from models.vnpu import job_family, kind_family, request_error

_Cache = dict[tuple[str, int], dict[str, Any]]
#: ``volcano-system/vcjob-fault-npu-cm``: the rescheduler's fault bookkeeping.
FAULT_NPU_CM = "vcjob-fault-npu-cm"

#: A reschedule record counts for fault ranks when not older than the job minus this.
RESCHEDULE_SLACK_SECONDS = 600
#: Job fields a running job does not carry (MindIE's own path).
PENDING_ONLY_FIELDS = frozenset({"app", "jobID", "pod-affinity", "sp-fit"})
#: A node label that names the node's super pod (the topology tree's), read against the
#: device record's ``SuperPodID`` when a super pod is over-full.
SUPER_POD_LABEL = "huawei.com/topotree.superpodid"
#: ``PendingSessionNum`` stages of the rescheduler (reference §4.4).
TP_STAGE_SESSIONS = 3
SP_STAGE_SESSIONS = 6


def inferred_pending_sessions(job: Job, shape: JobShape) -> int:
    """``pending-sessions`` of a partly running job from which pods are pending.

    The lowest stage at which upstream's rescheduler deletes the pending set (§4.4): a
    fully pending logical super pod / 950 block / multilevel level1 group holding a
    pending rank that is not a fault rank means the deletion was widened at 6 sessions;
    a fully pending 950 rack window (tpBlock > 1) the same at 3; otherwise 0.  Jobs that
    are not pod-level (neither switch) are 0: upstream does not count their sessions.
    """
    if not job.pod_rescheduling or job.process_recover:
        return 0  # process-recover deletes fault pods only; job level counts nothing
    pending = [r not in job.running_ranks for r in range(job.tasks)]
    faults = set(job.fault_ranks)

    def widened(size: int) -> bool:
        if size < 2:
            return False
        for start in range(0, job.tasks - size + 1, size):
            group = range(start, start + size)
            if all(pending[r] for r in group) and any(r not in faults for r in group):
                return True
        return False

    if shape.family in (Family.SUPERPOD, Family.RACK) and widened(shape.sp_block):
        return SP_STAGE_SESSIONS
    if shape.family is Family.MULTILEVEL and shape.levels and widened(shape.levels[0]):
        return SP_STAGE_SESSIONS
    if shape.family is Family.RACK and widened(shape.tp_block):
        return TP_STAGE_SESSIONS
    return 0


#: Where a scenario field of a node comes from, for messages.
_NODE_FIELDS = {
    "name": "metadata.name",
    "npus": "status.capacity",
    "free": "device info (free chips)",
    "labels": "metadata.labels",
    "super-pod-id": "device info SuperPodID",
    "rack-id": "device info RackID",
}
#: Where a scenario field of a job comes from, for messages.
_JOB_FIELDS = {
    "name": "metadata.name",
    "owner-uid": "metadata.ownerReferences[controller].uid",
    "priority": "spec.priorityClassName / the pods' spec.priority",
    "tasks": "pods (the gang size) / spec.minMember",
    "npu-per-task": "the pods' NPU requests / spec.minResources",
    "sp-block": "metadata.annotations.sp-block",
    "ra-block": "metadata.annotations.ra-block",
    "affinity-config": f"metadata.annotations.{AFFINITY_CONFIG_ANNOTATION}",
    "fault-ranks": "the failed pods' ranks / job-reschedule-reason",
}

M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], item: dict[str, Any], who: str, fields: dict[str, str],
               diag: Diagnostics) -> M | None:
    """``model.model_validate(item)``; each refusal is an error naming ``who`` and the
    source field (``None`` is returned then)."""
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        for error in exc.errors():
            loc = [str(part) for part in error["loc"]]
            head = loc[0] if loc else "(the item)"
            where = fields.get(head, head) + "".join(f"[{escape_text(p, 60)}]"
                                                      for p in loc[1:])
            text = str(error["msg"]).removeprefix("Value error, ")
            diag.error(who, where, escape_text(f"{text} (scenario field '{head}')", 400))
        return None


def _named_jobs(messages: list[str], sections: tuple[tuple[str, str], ...]
                ) -> dict[str, tuple[str, str]]:
    """Each validation message that names one job -> (data section, job name)."""
    out: dict[str, tuple[str, str]] = {}
    for message in messages:
        rest = message.removeprefix("<import>: ")
        for key, word in sorted(sections, key=lambda s: -len(s[1])):
            if rest.startswith(f"{word} '"):
                name, sep, _ = rest[len(word) + 2:].partition("': field")
                if sep:
                    out[message] = (key, name)
                break
    return out


class _NodesBroken(Exception):
    """Lenient mode: rules of the assembled scenario that name nodes (``nodes``: name ->
    the rule); the build is redone with those nodes left out."""

    def __init__(self, nodes: dict[str, str]) -> None:
        super().__init__(listing(sorted(nodes)))
        self.nodes = nodes


def _named_nodes(messages: list[str]) -> dict[str, str]:
    """Node name -> its rule, when every message names one node (else empty)."""
    out: dict[str, str] = {}
    for message in messages:
        where, sep, rest = message.removeprefix("<import>: ").partition(": field '")
        if not (sep and where.startswith("node '") and where.endswith("'")):
            return {}
        out.setdefault(where[len("node '"):-1], f"field '{rest}")
    return out


def _job_of(obj: dict[str, Any]) -> str | None:
    """The job id (``<namespace>/<podgroup>``) a Pod or PodGroup belongs to, read from the
    raw object as far as it can be (``None``: not one, or not readable)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        return None
    if obj.get("kind") == "PodGroup":
        name = meta.get("name")
        return f"{namespace}/{name}" if isinstance(name, str) and name else None
    if obj.get("kind") == "Pod":
        annotations = meta.get("annotations")
        group = annotations.get(GROUP_ANNOTATION) if isinstance(annotations, dict) else None
        return f"{namespace}/{group}" if isinstance(group, str) and group else None
    return None


@dataclass
class BuildParts:
    """What :meth:`ClusterImport.build` decided per node and per job, beside the
    scenario: what an incremental import of one change starts from."""

    mode: str
    self_maintain: bool
    specs: list[JobSpec]
    health: dict[str, Health]
    bad_chips: dict[str, set[str]]
    image_sizes: dict[str, float]


@dataclass
class ImportResult:
    """A scenario and what the import could not express.

    ``data`` is the scenario as plain data with the contract's keys and only the fields the
    cluster sets (what ``npu-place import`` writes); ``scenario`` is it, validated.
    """

    scenario: Scenario
    data: dict[str, Any]
    warnings: list[str]
    mode: str
    counts: dict[str, int] = field(default_factory=dict)
    #: jobs not imported (left to Volcano) -> the first reason: objects the importer
    #: refused (lenient mode) and pending pods whose ranks cannot be planned
    refused: dict[str, str] = field(default_factory=dict)
    #: nodes a rule took out (lenient mode) -> what was done and the rule: ``left out``
    #: or ``outside every super pod``
    nodes_changed: dict[str, str] = field(default_factory=dict)
    #: what the build decided per object, for an incremental import of the next change
    #: (:mod:`models.kube.incremental`)
    parts: BuildParts | None = None

    def render(self, fmt: str) -> str:
        """The scenario as ``json`` or ``yaml`` text, as ``npu-place import`` writes it.

        Raises
        ------
        InputError
            When the text is larger than the scenario readers accept
            (:data:`~models.limits.MAX_FILE_BYTES`): ``validate`` could not read it back.
        """
        text = dump_data(self.data, fmt)
        size = len(text.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise InputError([f"the imported scenario is {size} bytes as {fmt}; the scenario "
                              f"readers accept at most {MAX_FILE_BYTES} bytes (import fewer "
                              "nodes or labels)"])
        return text

    @property
    def without_devices(self) -> bool:
        """Nodes were imported but no device-info record describes any of them: every node
        has free 0 (and no super pod or rack), so nothing can be placed."""
        return self.counts.get("nodes", 0) > 0 and self.counts.get("device-info", 0) == 0

    def no_devices_advice(self) -> str:
        """What to add when :attr:`without_devices` (one line)."""
        return (f"none of the {self.counts.get('nodes', 0)} imported nodes has device "
                "information, so every node has free 0 and nothing can be placed: add the "
                "device-info ConfigMaps to the input (ClusterD mode: kubectl -n mindx-dl get "
                "cm -l mx-consumer-volcano=true -o json; device-plugin mode: kubectl get cm "
                "-A -l mx-consumer-cim=true -o json), or pass --allow-no-devices to import "
                "this state anyway")

    def summary(self) -> str:
        """One line: what was imported."""
        c = self.counts
        return (f"imported {c.get('nodes', 0)} nodes ({c.get('unhealthy', 0)} unhealthy, "
                f"{c.get('subhealthy', 0)} sub-healthy), {c.get('jobs', 0)} pending jobs, "
                f"{c.get('running', 0)} running jobs, {c.get('cache', 0)} cache entries "
                f"from {c.get('objects', 0)} objects ({self.mode} mode); "
                f"{len(self.warnings)} warning(s)")


class ClusterImport:
    """Collects Kubernetes objects and builds a scenario from them."""

    def __init__(self, diagnostics: Diagnostics | None = None, *, strict: bool = True,
                 job_images_only: bool = False) -> None:
        self.diag = diagnostics or Diagnostics()
        #: ``True``: any refused object refuses the whole import (:class:`InputError`);
        #: ``False``: a refused object takes out only its own job (or node, or record),
        #: named in the warnings and in :attr:`ImportResult.refused`.
        self.strict = strict
        #: read of the nodes' ``status.images`` only the names some job's pod runs (the
        #: scenario's ``nodes[].images`` then lists those): what placement needs
        self.job_images_only = job_images_only
        #: job id -> why the job is not imported (lenient mode: objects refused)
        self.refused: dict[str, list[str]] = {}
        #: running jobs that break a rule, imported as occupancy only (lenient mode)
        self.occupancy: list[str] = []
        #: nodes a rule across nodes and jobs left out (lenient mode) -> the rule
        self.left_out_nodes: dict[str, str] = {}
        #: nodes a rule took out or moved out of their super pod (lenient mode) -> why
        self.nodes_changed: dict[str, str] = {}
        self.nodes: dict[str, NodeRecord] = {}
        self.devices = DeviceState()
        self.pods: dict[tuple[str, str], PodRecord] = {}
        self.podgroups: dict[str, PodGroupRecord] = {}
        self.classes = PriorityClasses()
        self.scheduler_cm: dict[str, Any] | None = None
        self.reschedule: dict[str, list[list[RescheduleTask]]] = {}
        self.objects = 0
        self.vnpu_groups: dict[str, VnpuGroup] = {}

    # ------------------------------------------------------------------ intake
    def add(self, obj: dict[str, Any], source: str = "<input>") -> None:
        """Take one Kubernetes object (any kind; unknown kinds are reported and skipped).

        In lenient mode (``strict=False``) an object the importer refuses takes out only
        its own job (a Pod or PodGroup: the job is not imported, see :attr:`refused`), or
        itself (a Node, a device-info record, a PriorityClass); the scheduler ConfigMap's
        errors stay errors (every job depends on it).
        """
        before = len(self.diag.errors)
        self._add(obj, source)
        if self.strict or len(self.diag.errors) == before:
            return
        if obj.get("kind") == "ConfigMap" and is_scheduler_configmap(obj):
            return
        new = self.diag.errors[before:]
        del self.diag.errors[before:]
        job = _job_of(obj)
        if job is not None:
            self.refused.setdefault(job, []).extend(new)
            return
        for message in new:
            self.diag.warn(f"{obj.get('kind') or 'object'} refused", f"{message}: "
                           "not imported (the rest of the cluster is)")

    def take_devices(self, other: ClusterImport) -> None:
        """Start from what ``other`` read of the objects Volcano does not send (device
        records, NodeD and switch records, the scheduler ConfigMap, PriorityClasses, the
        reschedule history) instead of adding those objects again: the extender reads
        them once per change, not once per session.  ``other`` must hold nothing else;
        its records are shared (the build only reads them), its messages copied."""
        self.devices = other.devices
        self.classes = other.classes
        self.scheduler_cm = other.scheduler_cm
        self.reschedule = other.reschedule
        self.objects += other.objects
        self.diag.errors.extend(other.diag.errors)
        for text, objects in other.diag._warnings.items():
            self.diag._warnings.setdefault(text, []).extend(objects)

    def _refuse_job(self, job_id: str, before: int) -> None:
        """Lenient mode: the errors recorded since ``before`` refuse job ``job_id`` only."""
        if self.strict or len(self.diag.errors) == before:
            return
        self.refused.setdefault(job_id, []).extend(self.diag.errors[before:])
        del self.diag.errors[before:]

    def _add(self, obj: dict[str, Any], source: str) -> None:
        self.objects += 1
        kind = obj.get("kind")
        diag = self.diag
        meta = obj.get("metadata")
        if kind in ("Node", "Pod", "PodGroup", "PriorityClass", "ConfigMap") and (
                not isinstance(meta, dict) or not isinstance(meta.get("name"), str)
                or not isinstance(meta.get("namespace", ""), str)):
            diag.error(f"{kind} #{self.objects} in {source}", "metadata",
                       "missing, not a mapping, or without a string name/namespace")
            return
        if kind == "Node":
            node = node_record(obj, diag, images_later=self.job_images_only)
            if node is not None:
                if node.name in self.nodes:
                    diag.warn(node.obj, "appears more than once in the input: the last copy "
                              "is used")
                self.nodes[node.name] = node
        elif kind == "Pod":
            pod = pod_record(obj, diag)
            if pod is not None:
                self.pods[(pod.namespace, pod.name)] = pod
        elif kind == "PodGroup":
            pg = podgroup_record(obj, diag)
            if pg is not None:
                self.podgroups[f"{pg.namespace}/{pg.name}"] = pg
        elif kind == "PriorityClass":
            self.classes.add(obj, diag)
        elif kind == "ConfigMap":
            self._add_configmap(obj)
        else:
            diag.warn(f"{kind or 'object without kind'} (from {source})",
                      "this kind is not read by the importer: skipped")

    def _add_configmap(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if is_scheduler_configmap(obj):
            self.scheduler_cm = obj
        elif meta.get("name") == RESCHEDULE_CM and meta.get("namespace",
                                                             RESCHEDULE_NAMESPACE) == (
                RESCHEDULE_NAMESPACE):
            self.reschedule = reschedule_records(obj, self.diag)
        elif meta.get("name") == FAULT_NPU_CM:
            self.diag.warn(describe(obj, "ConfigMap"), "rescheduler state (fault-node, "
                           "remain-retry-times) cannot be expressed in a scenario: ignored")
        elif not self.devices.add_configmap(obj, self.diag):
            self.diag.warn(describe(obj, "ConfigMap"), "not a ConfigMap the plugin reads: "
                           "skipped")

    # ------------------------------------------------------------------ build
    def _mode(self, use_clusterd: bool, found_config: bool) -> str:
        wanted = "clusterd" if use_clusterd else "device-plugin"
        other = "device-plugin" if use_clusterd else "clusterd"
        if not self.devices.has_mode(wanted) and self.devices.has_mode(other):
            if found_config:
                self.diag.warn("init-params useClusterInfoManager",
                               f"selects {wanted} mode but only {other} ConfigMaps are in "
                               f"the input: {other} records used")
            return other
        if self.devices.has_mode(wanted) and self.devices.has_mode(other):
            self.diag.warn("init-params useClusterInfoManager",
                           f"selects {wanted} mode: the {other} ConfigMaps in the input are "
                           "ignored, as upstream does")
        return wanted

    def npu_node(self, record: NodeRecord, mode: str, usage: NodeUsage,
                 self_maintain: bool, now: int, diag: Diagnostics
                 ) -> tuple[dict[str, Any], Health, set[str]]:
        """One NPU node (not dynamic vNPU) as the scenario's item, its health and its
        unhealthy chips, from its record, its device records of ``mode`` and the chips
        its active pods use (``usage``)."""
        info = self.devices.devices[mode].get(record.name)
        if info is None:
            diag.warn(record.obj, f"no device info ({mode} mode): imported with free 0 "
                      "and no super pod")
        elif info.update_time and now - info.update_time > STALE_SECONDS[mode]:
            diag.warn(info.obj, f"stale UpdateTime (older than {STALE_SECONDS[mode]} s at "
                      "now): upstream restarts its informer; the record is used as is")
        if record.base_chips is not None and len(record.base_chips) != record.capacity:
            diag.warn(record.obj, f"baseDeviceInfos lists {len(record.base_chips)} chips "
                      f"but the capacity is {record.capacity}: npus from the capacity")
        free, bad_chips = free_chips(record, info, usage, self_maintain, diag)
        state = node_health(record, info, self.devices.noded[mode].get(record.name),
                            self.devices.switches[mode].get(record.name), diag)
        node: dict[str, Any] = {"name": record.name, "npus": record.capacity,
                                "free": free, "health": state.value}
        if info is not None and info.super_pod_id is not None and info.super_pod_id >= 0:
            node["super-pod-id"] = info.super_pod_id
        if info is not None and info.rack_id is not None and info.rack_id >= 0:
            node["rack-id"] = info.rack_id
        if record.labels:
            node["labels"] = record.labels
        if record.images:
            node["images"] = record.images
        return node, state, bad_chips

    def build(self, now: int | None = None, previous: Scenario | None = None
              ) -> ImportResult:
        """Build the scenario.

        Parameters
        ----------
        now
            Session time (unix seconds); default the clock.
        previous
            An earlier imported scenario whose cache entries are merged.

        Raises
        ------
        InputError
            When an object was malformed (every message names the object and field), or
            the objects describe a scenario the contract rejects.
        """
        try:
            return self._build_settled(now, previous)
        finally:
            if self.job_images_only:
                for record in self.nodes.values():
                    record.images_raw = None  # read (the build does not run again)

    def _build_settled(self, now: int | None, previous: Scenario | None) -> ImportResult:
        """:meth:`build`; in lenient mode again without the nodes a rule names."""
        if self.strict:
            return self._build(now, previous)
        # lenient: a rule that names a node once the jobs are in (running pods claiming
        # more chips than the node has) leaves that node out, and the build is redone
        # from the same records with it gone (the messages of the failed try dropped)
        errors = list(self.diag.errors)
        warnings = {text: list(objs) for text, objs in self.diag._warnings.items()}
        refused = {job: list(reasons) for job, reasons in self.refused.items()}
        occupancy = list(self.occupancy)
        for _ in range(4):
            try:
                return self._build(now, previous)
            except _NodesBroken as exc:
                self.diag.errors[:] = errors
                self.diag._warnings = {text: list(objs) for text, objs in warnings.items()}
                self.refused = {job: list(reasons) for job, reasons in refused.items()}
                self.occupancy = list(occupancy)
                self.nodes_changed = {}
                self.left_out_nodes.update(exc.nodes)
        raise InputError(["the imported cluster is not a valid scenario after leaving out "
                          f"the nodes {listing(sorted(self.left_out_nodes))}"])

    def _build(self, now: int | None, previous: Scenario | None) -> ImportResult:
        """:meth:`build` once (in lenient mode without :attr:`left_out_nodes`)."""
        diag = self.diag
        diag.raise_errors()
        now = int(time.time()) if now is None else int(now)
        sched = scheduler_config(self.scheduler_cm, diag)
        diag.raise_errors()
        mode = self._mode(sched.use_cluster_info_manager, sched.found)
        devices = self.devices.devices[mode]
        usage: dict[str, NodeUsage] = defaultdict(NodeUsage)
        for pod in self.pods.values():
            if pod.active:
                use = usage[pod.node]
                use.chips.update(pod.chips)
                use.requested += pod.request
        if self.job_images_only:
            # the jobs' pods (of a Volcano group, or asking an Ascend resource): the node
            # agents' images are on every node and no job's
            wanted = {pod.image for pod in self.pods.values() if pod.image and (
                pod.group or pod.resource or pod.other_resource or pod.npu_core)}
            for record in self.nodes.values():  # the raw lists are freed by build
                record.images = node_images(record.images_raw, record.obj, diag, wanted)
        nodes: list[dict[str, Any]] = []
        node_objects: list[str] = []
        with_devices = 0  # imported nodes that a device-info record describes
        health: dict[str, Health] = {}
        bad_chips: dict[str, set[str]] = {}
        for record in sorted(self.nodes.values(), key=lambda r: natural_key(r.name)):
            if record.resource is None and record.npu_core > 0:  # dynamic vNPU
                info = devices.get(record.name)
                state = node_health(record, info, self.devices.noded[mode].get(record.name),
                                    self.devices.switches[mode].get(record.name), diag)
                vnode = vnpu_node(record, info, [p for p in self.pods.values()
                                                 if p.node == record.name], state, diag)
                if vnode is not None:
                    if record.images:
                        vnode["images"] = record.images
                    health[record.name] = state
                    nodes.append(vnode)
                    node_objects.append(record.obj)
                    with_devices += info is not None
                continue
            if record.resource is None:
                diag.warn(record.obj, "no huawei.com/Ascend910 or huawei.com/npu capacity: "
                          "not an NPU node, not imported")
                if record.other_resources:
                    diag.warn(record.obj, f"has {', '.join(record.other_resources)}, which the "
                              "scenario does not model: not imported")
                continue
            info = devices.get(record.name)
            node, state, bad_chips[record.name] = self.npu_node(
                record, mode, usage[record.name], sched.self_maintain_available_card, now,
                diag)
            health[record.name] = state
            nodes.append(node)
            node_objects.append(record.obj)
            with_devices += info is not None
        orphans = sorted(set(devices) - set(self.nodes), key=natural_key)
        for name in orphans:
            diag.warn(devices[name].obj, f"device info for node '{name}', which is not in "
                      "the input: ignored")
        self._settle()  # lenient: a node record's refusal is a warning (node kept as read)
        node_names = set(health)
        diag.raise_errors()
        try:
            config = Config.model_validate(sched.config)
        except ValidationError as exc:
            raise InputError([f"{sched.obj}: field 'init-params."
                              f"{'.'.join(str(p) for p in err['loc'])}': {err['msg']}"
                              for err in exc.errors()]) from None
        # the nodes are settled before any job or cache entry reads them: a node left out
        # here is a node that is gone for the jobs (their ranks on it are handled as such)
        models = []
        for n, who in zip(list(nodes), node_objects, strict=True):
            before = len(diag.errors)
            model = _validated(Node, n, who, _NODE_FIELDS, diag)
            if model is not None:
                models.append(model)
            elif not self.strict:  # the node alone is left out
                self.nodes_changed[n["name"]] = "left out: " + "; ".join(
                    diag.errors[before:])[:300]
                self._settle(before, "node not imported")
                nodes.remove(n)
                node_names.discard(n["name"])
                health.pop(n["name"], None)
        diag.raise_errors()
        if not self.strict:
            models = self._settle_nodes(config, nodes, models, node_names, health)
        base = Scenario(config=config, nodes=models)

        specs = self._job_specs(diag)
        diag.raise_errors()
        sizes = image_sizes(self.nodes.values())
        for spec in specs:
            set_image_size(spec, sizes)
        cache = self._cache(specs, node_names, now, previous, diag)
        vnpu_jobs = self._vnpu_jobs(nodes, node_names, now, cache, diag)
        jobs: list[dict[str, Any]] = []
        running: list[dict[str, Any]] = []
        for spec in sorted(specs, key=queue_key):
            section, item = self.job_item(spec, node_names, health, bad_chips, cache, now,
                                          base, diag)
            if item is not None:
                (running if section == "running" else jobs).append(item)
        diag.raise_errors()
        running.sort(key=lambda r: natural_key(r["name"]))
        data: dict[str, Any] = {
            "now": now,
            "config": sched.config,
            "nodes": nodes,
            "affinity-cache": {
                "ttl-seconds": previous.affinity_cache.ttl_seconds if previous
                else DEFAULT_CACHE_TTL_SECONDS,
                "entries": [dict(entry) for _, entry in sorted(cache.items())],
            },
            "jobs": jobs,
            "running": running,
        }
        if vnpu_jobs:
            data["vnpu-jobs"] = vnpu_jobs
        scenario = self._scenario(data)
        for job_id in sorted(self.refused, key=natural_key):
            reasons = self.refused[job_id]
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            diag.warn(f"job {job_id}", f"not imported, left to Volcano: {reasons[0]}{more}")
        counts = {"nodes": len(nodes), "jobs": len(jobs) + len(vnpu_jobs),
                  "running": len(running), "device-info": with_devices,
                  "cache": len(cache), "objects": self.objects,
                  "unhealthy": sum(1 for h in health.values() if h is Health.UNHEALTHY),
                  "subhealthy": sum(1 for h in health.values() if h is Health.SUBHEALTHY),
                  "refused": len(self.refused)}
        parts = BuildParts(mode, sched.self_maintain_available_card, specs, health,
                           bad_chips, sizes)
        return ImportResult(scenario=scenario, data=data, warnings=diag.warnings, mode=mode,
                            counts=counts,
                            refused={job: reasons[0] for job, reasons in self.refused.items()},
                            nodes_changed=dict(self.nodes_changed), parts=parts)

    def _settle_nodes(self, config: Config, nodes: list[dict[str, Any]], models: list[Node],
                      node_names: set[str], health: dict[str, Health]) -> list[Node]:
        """Lenient mode: the scenario's rules on the nodes alone, settled node by node.

        ``nodes`` (the scenario data) and ``models`` are parallel; both, ``node_names``
        and ``health`` are updated in place, and the models returned.  A rule that names
        one node (the vNPU node rules, ``free`` out of range, a duplicate name: guarded
        by the readers, checked again here) leaves that node out, as a node that is
        gone.  A super pod with more nodes than ``super-pod-size`` keeps
        ``super-pod-size`` of them; the others
        are imported outside every super pod (their chips serve the jobs that need no
        super pod, their running ranks stay where they are): first the nodes whose
        ``huawei.com/topotree.superpodid`` label disagrees with the device record's
        ``SuperPodID``, then the last by name.  Every change is a warning naming the node,
        the field and the rule; rules that name no node (the ConfigMap's) are left to the
        scenario's validation, which refuses the import for them in both modes.
        """
        size = config.effective_super_pod_size
        for _ in range(4):
            _, messages = validate_scenario(Scenario(config=config, nodes=models), "<import>")
            broken = {model.name: [self.left_out_nodes[model.name]] for model in models
                      if model.name in self.left_out_nodes}
            full: list[int] = []
            for message in messages:
                where, _, rest = message.removeprefix("<import>: ").partition(": field '")
                if where.startswith("node '") and where.endswith("'"):
                    broken.setdefault(where[len("node '"):-1], []).append(f"field '{rest}")
                elif where.startswith("super pod "):
                    full.append(int(where[len("super pod "):]))
            if not broken and not full:
                return models
            keep = [i for i, model in enumerate(models) if model.name not in broken]
            for name, problems in broken.items():
                self.nodes_changed[name] = f"left out: {'; '.join(problems)}"[:300]
                self.diag.warn(f"node '{name}'", f"{'; '.join(problems)}: node not imported "
                               "(the rest of the cluster is; ranks running on it are those of "
                               "a node that is gone)")
                node_names.discard(name)
                health.pop(name, None)
            for sp in full:
                members = [i for i in keep if models[i].super_pod_id == sp]
                label = SUPER_POD_LABEL
                disagreeing = {i for i in members
                               if models[i].labels.get(label) not in (None, str(sp))}

                def disagrees(i: int, disagreeing: set[int] = disagreeing) -> bool:
                    return i in disagreeing

                # the disagreeing nodes first (by name), then the last by name
                order = sorted((i for i in members if disagrees(i)),
                               key=lambda i: natural_key(models[i].name))
                order += sorted((i for i in members if not disagrees(i)),
                                key=lambda i: natural_key(models[i].name), reverse=True)
                out = order[:len(members) - size]
                for i in sorted(out, key=lambda i: natural_key(models[i].name)):
                    why = (f"its label {label}={models[i].labels[label]} disagrees"
                           if disagrees(i) else "the last by name")
                    self.diag.warn(
                        f"node '{models[i].name}'", f"field 'device info SuperPodID': super "
                        f"pod {sp} has {len(members)} nodes but config.super-pod-size is "
                        f"{size} ({why}): imported outside every super pod (jobs that need "
                        "none can use it)")
                    self.nodes_changed[models[i].name] = (
                        f"outside every super pod: super pod {sp} has {len(members)} nodes "
                        f"but config.super-pod-size is {size} ({why})")
                    nodes[i].pop("super-pod-id", None)
                    nodes[i].pop("rack-id", None)
                    models[i] = models[i].model_copy(update={"super_pod_id": None,
                                                             "rack_id": None})
            nodes[:] = [nodes[i] for i in keep]
            models = [models[i] for i in keep]
        return models

    def _settle(self, before: int = 0, outcome: str = "ignored") -> None:
        """Lenient mode: the errors recorded since ``before`` become warnings (their object
        alone is affected, as ``outcome`` says)."""
        if self.strict:
            return
        for message in self.diag.errors[before:]:
            who, _, text = message.partition(": ")
            self.diag.warn(who, f"{text}: {outcome}")
        del self.diag.errors[before:]

    def _scenario(self, data: dict[str, Any]) -> Scenario:
        """Validate the assembled scenario.  In lenient mode a job (pending, running or
        vNPU) that a rule across objects refuses is taken out (named in :attr:`refused`)
        and the rest validated again; a refusal that names no job refuses the import."""
        sections = (("jobs", "job"), ("running", "running job"), ("vnpu-jobs", "vNPU job"))
        for _ in range(4):
            try:
                scenario = scenario_from_data(data, "<import>")
                # what is written must read back: the readers' integer range, depth and size
                check_data(data)
                return scenario
            except InputError as exc:
                messages = exc.messages
                named = {} if self.strict else _named_jobs(messages, sections)
                if not self.strict and len(named) < len(set(messages)):
                    broken = _named_nodes([m for m in messages if m not in named])
                    if broken:
                        raise _NodesBroken(broken) from None
                if not named or len(named) < len(set(messages)):
                    raise InputError([f"the imported cluster is not a valid scenario: {m}"
                                      for m in messages]) from None
            except DocumentError as exc:
                raise InputError([f"the imported cluster is not a valid scenario: {exc}"]) \
                    from None
            for message, (key, name) in named.items():
                data[key] = [j for j in data.get(key, []) if j["name"] != name]
                self.refused.setdefault(name, []).append(message.removeprefix("<import>: "))
            if not data.get("vnpu-jobs"):
                data.pop("vnpu-jobs", None)
        raise InputError(["the imported cluster is not a valid scenario after taking out "
                          f"the jobs {listing(sorted(self.refused))}"])

    # ------------------------------------------------------------------ jobs
    def _job_specs(self, diag: Diagnostics) -> list[JobSpec]:
        groups: dict[str, JobGroup] = {}
        loose: list[str] = []
        for pod in self.pods.values():
            if pod.group is None:
                if pod.resource and pod.active:
                    loose.append(pod.obj)
                continue
            job_id = f"{pod.namespace}/{pod.group}"
            if job_id in self.refused:
                continue  # its chips still count as used (build's usage)
            if pod.npu_core > 0 and pod.resource is None:  # dynamic vNPU: models.kube.vnpu
                self.vnpu_groups.setdefault(job_id, VnpuGroup(job_id)).pods.append(pod)
                continue
            group = groups.get(job_id)
            if group is None:
                group = groups[job_id] = JobGroup(job_id, self.podgroups.get(job_id))
                if group.podgroup is None and pod.resource:
                    diag.warn(pod.obj, f"annotation {GROUP_ANNOTATION}={pod.group} names a "
                              "PodGroup that is not in the input: the pods' annotations are "
                              "used")
            group.pods.append(pod)
        for job_id, pg in self.podgroups.items():
            if job_id not in self.vnpu_groups and job_id not in self.refused:
                groups.setdefault(job_id, JobGroup(job_id, pg))
        for obj in loose:
            diag.warn(obj, f"requests NPUs without {GROUP_ANNOTATION} (not a Volcano job): "
                      "its chips are counted as used, it is not imported as a job")
        specs = []
        for job_id in sorted(groups, key=natural_key):
            if job_id in self.refused:
                continue
            before = len(diag.errors)
            spec = job_spec(groups[job_id], self.classes, diag)
            self._refuse_job(job_id, before)
            if spec is not None and spec.rank_problem:
                # two pending pods of one rank (Volcano numbers each task role from 0) or a
                # rank outside the gang: no plan can say which pod goes where
                self.refused.setdefault(job_id, []).append(
                    f"{spec.obj}: {spec.rank_problem}")
                continue
            if spec is not None and job_id not in self.refused:
                specs.append(spec)
        return specs

    def _vnpu_jobs(self, nodes: list[dict[str, Any]], node_names: set[str], now: int,
                   cache: _Cache, diag: Diagnostics) -> list[dict[str, Any]]:
        """The pending vNPU jobs (queue order) and their bound ranks' cache entries."""
        kinds = sorted({n["vnpu"]["chip-kind"] for n in nodes if "vnpu" in n})
        out = []
        for job_id in sorted(self.vnpu_groups, key=natural_key):
            group = self.vnpu_groups[job_id]
            pg = self.podgroups.get(job_id)
            first = group.pods[0]
            owner = (pg.owner if pg else None) or first.owner
            class_name = (pg.priority_class if pg else None) or first.priority_class
            priority = (self.classes.values.get(class_name, first.priority or 0)
                        if class_name else first.priority if first.priority is not None
                        else self.classes.default or 0)
            before = len(diag.errors)
            item, entries = vnpu_job(group, priority, owner, node_names, now, diag,
                                     pg.labels if pg else None)
            self._refuse_job(job_id, before)
            for entry in entries:
                cache.setdefault((entry["owner-uid"], entry["rank"]), entry)
            if item is None:
                continue
            family = item.get("ring-controller")
            if family is not None and family not in {c.value for c in RingController}:
                diag.warn(pg.obj if pg else f"PodGroup {job_id}", f"pending vNPU job with "
                          f"label ring-controller.atlas={family!r}, which upstream's "
                          "GetPluginNameByReq maps to no vNPU handler: not imported")
                continue
            spec = VnpuJob.model_validate(item)
            own = [k for k in kinds if (f := job_family(spec)) is None or kind_family(k) == f]
            errors = [e for kind in own if (e := request_error(spec, kind))]
            if own and len(errors) == len(own):
                diag.warn(pg.obj if pg else f"PodGroup {job_id}", "pending vNPU job that "
                          f"upstream's ValidNPUJob rejects, not imported ({'; '.join(errors)})")
                continue
            out.append(item)
        out.sort(key=lambda j: -j["priority"])
        return out

    def spec_entries(self, spec: JobSpec, node_names: AbstractSet[str], now: int,
                     diag: Diagnostics) -> _Cache:
        """The cache entries one job writes: its bound ranks (``updated`` the owner's
        :func:`~models.kube.jobs.bound_stamp` of ``now``), then its
        ``job-reschedule-reason`` records for ranks not bound (the newest wins); entries
        on nodes that are not imported are dropped (warned)."""
        cache: _Cache = {}
        if spec.owner is None:
            return cache
        owner = spec.owner

        def put(rank: int, node: str, updated: int, where: str) -> None:
            if node not in node_names:
                diag.warn(f"{where} rank {rank} on '{node}'",
                          "cache entry on a node that is not imported: dropped")
                return
            cache[(owner, rank)] = {"owner-uid": owner, "rank": rank, "node": node,
                                    "updated": updated}

        stamp = bound_stamp(owner, now)
        for rank, node in spec.bound.items():
            put(rank, node, stamp, spec.obj)
        for record in self.reschedule.get(spec.name, []):
            for task in record:  # oldest record first: the newest one wins
                if task.rank not in spec.bound and task.node:
                    put(task.rank, task.node, task.time,
                        f"ConfigMap {RESCHEDULE_NAMESPACE}/{RESCHEDULE_CM} job {spec.name}")
        return cache

    def _cache(self, specs: list[JobSpec], node_names: set[str], now: int,
               previous: Scenario | None, diag: Diagnostics) -> _Cache:
        cache: _Cache = {}
        dropped = "cache entry on a node that is not imported: dropped"
        for spec in specs:
            cache.update(self.spec_entries(spec, node_names, now, diag))
        known = {s.name for s in specs}
        for job_id in self.reschedule:
            if job_id not in known:
                diag.warn(f"ConfigMap {RESCHEDULE_NAMESPACE}/{RESCHEDULE_CM} job {job_id}",
                          "reschedule record of a job that is not imported: not used")
        if previous is not None:
            for entry in previous.affinity_cache.entries:
                key = (entry.owner_uid, entry.rank)
                if key in cache:
                    continue
                if entry.node not in node_names:
                    diag.warn(f"--previous cache entry of {entry.owner_uid} rank {entry.rank} "
                              f"on '{entry.node}'", dropped)
                    continue
                item: dict[str, Any] = {"owner-uid": entry.owner_uid, "rank": entry.rank,
                                        "node": entry.node, "updated": entry.updated}
                if entry.previous is not None and (entry.previous == ""
                                                   or entry.previous in node_names):
                    item["previous"] = entry.previous
                cache[key] = item
        return cache

    def job_item(self, spec: JobSpec, node_names: AbstractSet[str], health: dict[str, Health],
                 bad_chips: dict[str, set[str]], cache: _Cache, now: int, base: Scenario,
                 diag: Diagnostics) -> tuple[str, dict[str, Any] | None]:
        """One job as the scenario's item: ``("running", item)`` when every pod is bound,
        else ``("jobs", item)``; the item is ``None`` when the job is not imported.
        ``base`` gives the config (the job rules read nothing else of it)."""
        before = len(diag.errors)
        item: dict[str, Any] | None
        if spec.bound and not spec.pending_pods:
            section = "running"
            item = self._running(spec, node_names, base, diag)
            if item is not None:
                self._warn_faults(spec, health, bad_chips, diag)
        else:
            section = "jobs"
            item = self._pending(spec, cache, health, now, base, diag)
        self._refuse_job(spec.name, before)
        return section, item

    def _running(self, spec: JobSpec, node_names: AbstractSet[str], base: Scenario,
                 diag: Diagnostics) -> dict[str, Any] | None:
        ranks = {}
        for rank, node in sorted(spec.bound.items()):
            if node in node_names:
                ranks[rank] = node
            else:
                diag.warn(spec.obj, f"rank {rank} runs on node '{node}', which is not "
                          "imported: left out of the running job")
        # a running job keeps its service id and labels (read by the inference paths)
        kept = {k: v for k, v in spec.fields.items() if k not in PENDING_ONLY_FIELDS}
        item: dict[str, Any] = {"name": spec.name, "policy": spec.policy,
                                "npu-per-task": spec.npu_per_task, "tasks": spec.tasks,
                                "ranks": ranks, "priority": spec.priority, **kept}
        if spec.owner:
            item["owner-uid"] = spec.owner
        job = _validated(Job, {k: v for k, v in item.items() if k != "ranks"}, spec.obj,
                         _JOB_FIELDS, diag)
        if job is None:
            return None
        _, errors = derive_shape(job, base)
        if not self.strict:
            # the rules of a running job (a pending job's rules, and a gang of a selecting
            # family runs all its ranks): a job scaled in, with pods finished or with a
            # rank on a node that is gone breaks them; it is still the occupancy it is
            try:
                _, errors = check_running(RunningJob.model_validate(item), base)
            except ValidationError as exc:
                errors = [(".".join(map(str, e["loc"])), str(e["msg"])) for e in exc.errors()]
            if errors:
                diag.warn(spec.obj, "running job that breaks a rule a pending job must meet ("
                          + "; ".join(f"{f}: {t}" for f, t in errors) + "): imported as "
                          "occupancy only (its chips stay used, its cache entries are kept; "
                          "it is not a running job of the scenario)")
                self.occupancy.append(spec.name)
                return None
        if errors:
            diag.warn(spec.obj, "running job that upstream's ValidNPUJob would reject ("
                      + "; ".join(f"{f}: {t}" for f, t in errors) + ")")
        return item

    @staticmethod
    def _warn_faults(spec: JobSpec, health: dict[str, Health], bad_chips: dict[str, set[str]],
                     diag: Diagnostics) -> None:
        """Running ranks on an unhealthy node or chip: upstream's rescheduler restarts them."""
        faults = sorted(rank for rank, node in spec.bound.items()
                        if health.get(node) is Health.UNHEALTHY
                        or set(spec.bound_chips.get(rank, ())) & bad_chips.get(node, set()))
        if faults:
            diag.warn(spec.obj, f"running ranks {listing(faults)} sit on an unhealthy node or "
                      "chip: upstream's rescheduler will restart the job; a running job has no "
                      "fault ranks in a scenario (simulate can evict it with fault: true)")

    def _pending(self, spec: JobSpec, cache: _Cache,
                 health: dict[str, Health], now: int, base: Scenario,
                 diag: Diagnostics) -> dict[str, Any] | None:
        faults = {r for r in spec.failed_ranks if r < spec.tasks}
        running = {r: n for r, n in sorted(spec.bound.items()) if n in health}
        lost = sorted(r for r in spec.bound if r not in running)
        if lost:
            diag.warn(spec.obj, f"ranks {listing(lost)} run on nodes that are not imported: "
                      "planned as pending ranks")
        if spec.owner is not None:  # the owner's entries, by rank or by entry: the fewer
            owned = ((e for r in range(spec.tasks) if (e := cache.get((spec.owner, r))))
                     if spec.tasks <= len(cache) else
                     (e for (o, r), e in cache.items() if o == spec.owner and r < spec.tasks))
            for entry in owned:
                if health.get(entry["node"]) is Health.UNHEALTHY:
                    faults.add(entry["rank"])
        records = self.reschedule.get(spec.name) or []
        if records and records[-1]:
            latest = records[-1]
            since = spec.pods_created or spec.created
            if not since or latest[0].time >= since - RESCHEDULE_SLACK_SECONDS:
                faults.update(t.rank for t in latest if t.rank < spec.tasks)
        item: dict[str, Any] = {"name": spec.name, "policy": spec.policy, "tasks": spec.tasks,
                                "npu-per-task": spec.npu_per_task, **spec.fields,
                                "priority": spec.priority}
        if spec.owner:
            item["owner-uid"] = spec.owner
        faults -= set(running)  # a running pod is not a fault pod (yet)
        if faults:
            item["fault-ranks"] = sorted(faults)
        if running:
            item["running-ranks"] = running
            sick = sorted(r for r, n in running.items() if health.get(n) is Health.UNHEALTHY)
            if sick:
                diag.warn(spec.obj, f"running ranks {listing(sick)} sit on an unhealthy node: kept "
                          "where they are (the rescheduler has not deleted them yet)")
        job = _validated(Job, item, spec.obj, _JOB_FIELDS, diag)
        if job is None:
            return None
        shape, errors = derive_shape(job, base)
        if running and shape is not None:
            item["pending-sessions"] = inferred_pending_sessions(job, shape)
        if errors:
            diag.warn(spec.obj, "pending job that upstream's ValidNPUJob rejects, not imported ("
                      + "; ".join(f"{f}: {t}" for f, t in errors) + ")")
            return None
        return item


def queue_key(spec: JobSpec) -> tuple[int, int, str]:
    """The import's order of jobs: priority (highest first), creation time, name."""
    return (-spec.priority, spec.created, spec.name)


def image_sizes(records: Iterable[NodeRecord]) -> dict[str, float]:
    """Image name -> size in GB, from every node's ``status.images`` (the last node that
    lists an image wins)."""
    sizes: dict[str, float] = {}
    for record in records:
        sizes.update(record.images)
    return sizes


def set_image_size(spec: JobSpec, sizes: dict[str, float]) -> None:
    """The job's ``image.size-gb`` from ``sizes`` (left out when no node lists it)."""
    image = spec.fields.get("image")
    if isinstance(image, dict) and image.get("name") in sizes:
        image["size-gb"] = sizes[image["name"]]
