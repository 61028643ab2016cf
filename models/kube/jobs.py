"""Pods, PodGroups, PriorityClasses and the reschedule history: jobs, running jobs, cache.

Sources (cluster-integration.md A.1 "Fault and reschedule history", A.4, A.6):

* pods are grouped into jobs by the annotation ``scheduling.k8s.io/group-name``; the job
  is named ``<namespace>/<podgroup>`` (Volcano's JobID);
* the PodGroup's annotations are used as they are; for a few keys a missing annotation is
  copied from the first pod (upstream ``annotationKeysForPodGroup``); labels are the
  PodGroup's merged with every pod's;
* the owner UID is the PodGroup's controller owner reference (the previous-node cache key);
* a pod's rank is ``hccl/rankIndex`` (not for failed pods), else the suffix of label
  ``statefulset.kubernetes.io/pod-name``, else the env ``VC_TASK_INDEX``;
* ``mindx-dl/job-reschedule-reason`` gives the fault history (``recent-reschedule-records``).

Why this file is long: the annotation, label and environment keys at its top are the one
table both halves read: the per-object readers (pods, PodGroups, PriorityClasses, the
reschedule ConfigMap) and :func:`job_spec`, which joins one job's records into the
contract's job with upstream's precedence (PodGroup over first pod, labels merged).  A
split would separate that table from one of its readers or the precedence from the
records it ranks; the file is only just over the limit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zlib import crc32

from models.kube.nodes import NPU_RESOURCES, OTHER_ASCEND_RESOURCES, parse_count
from models.kube.source import Diagnostics, describe, parse_json_field, string_map
from models.limits import (
    MAX_ABS_INT,
    MAX_NAME_CHARS,
    MAX_PRIORITY,
    MAX_TEXT_CHARS,
    LimitError,
    check_text,
    escape_text,
    listing,
)
from models.numbers import parse_int
from models.scenario import A3_SUPERPOD_POLICIES, Family, Policy, family_of

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
RANK_ANNOTATION = "hccl/rankIndex"
STATEFULSET_LABEL = "statefulset.kubernetes.io/pod-name"
TASK_INDEX_ENV = "VC_TASK_INDEX"
POLICY_ANNOTATION = "huawei.com/schedule_policy"
AFFINITY_CONFIG_ANNOTATION = "huawei.com/affinity-config"
UB_MEMORY_ANNOTATION = "huawei.com/schedule_ubmemory"
SP_BLOCK = "sp-block"
RA_BLOCK = "ra-block"
SP_FIT = "sp-fit"
ACCELERATOR_TYPE = "accelerator-type"
#: Pod annotations holding the chips a pod uses, in the order the plugin prefers them.
CHIP_ANNOTATIONS = ("huawei.com/AscendReal", "huawei.com/Ascend910", "huawei.com/npu")
#: PodGroup annotation keys filled from the first pod when missing (upstream list).
COPIED_ANNOTATIONS = (SP_BLOCK, RA_BLOCK, POLICY_ANNOTATION, SP_FIT,
                      "huawei.com/schedule_minAvailable", "huawei.com/recover_policy_path",
                      "huawei.com/infer_service_schedule", AFFINITY_CONFIG_ANNOTATION)
#: Pod annotations kept (the copied keys and the UB-memory switch).
KEPT_ANNOTATIONS = (*COPIED_ANNOTATIONS, UB_MEMORY_ANNOTATION)
#: Job labels that matter to the plugin.
JOB_LABELS = ("super-pod-affinity", "tor-affinity", "subHealthyStrategy",
              "podgroup-sched-enable", "fault-scheduling", "pod-rescheduling", "inferserviceid",
              "process-recover-enable", "app", "jobID")
#: MindIE's labels (reference §2.3.4), also written as a job's ``labels``.
MINDIE_LABELS = ("app", "jobID")
RESCHEDULE_NAMESPACE = "mindx-dl"
RESCHEDULE_CM = "job-reschedule-reason"
RESCHEDULE_KEY = "recent-reschedule-records"
#: ``accelerator-type`` node selector → the contract policy of the handler it selects.
#: [I] module910x8 (no selector, or ``module``) and module910bx8 have no contract policy of
#: their own; they are whole-chip 8-NPU handlers and map to ``chip8-node8``.
ACCELERATOR_POLICIES = {
    "": Policy.CHIP8_NODE8.value,
    "module": Policy.CHIP8_NODE8.value,
    "module-910b-8": Policy.CHIP8_NODE8.value,
    "module-910b-16": Policy.CHIP8_NODE16.value,
    "module-a3-16": Policy.MODULE_A3_16.value,
    "module-a3-16-super-pod": Policy.CHIP2_NODE16_SP.value,
    "module-a3-8-super-pod": Policy.CHIP2_NODE8_SP.value,
    "half": Policy.CHIP4_NODE4.value,
}


#: The grain of a bound rank's cache time: an owner's bound ranks are stamped with ``now``
#: rounded down to a multiple of this many seconds after the owner's own phase
#: (:func:`bound_stamp`), so a watcher's import at a moving clock re-stamps each owner
#: once a grain, at its own second, instead of every owner every second.
BOUND_STAMP_GRAIN_SECONDS = 60


def bound_stamp(owner: str, now: int, grain: int = BOUND_STAMP_GRAIN_SECONDS) -> int:
    """The ``updated`` time of ``owner``'s bound ranks in an import at ``now``.

    ``now`` rounded down to the owner's grid: multiples of ``grain`` seconds shifted by
    the owner's phase (the CRC-32 of its uid modulo ``grain``, the same in every process).
    The result is in ``(now - grain, now]``: the owner's liveness (its newest time not
    older than ``now - ttl-seconds``) is reckoned at most ``grain - 1`` seconds early, and
    the stamp changes once a grain, at a second that differs from owner to owner, so the
    re-stamps of a moving clock are spread over the grain.

    Examples
    --------
    >>> stamps = {bound_stamp("uid-a", t) for t in range(1_000_000, 1_000_060)}
    >>> len(stamps) <= 2 and all(1_000_000 - 60 < s <= 1_000_059 for s in stamps)
    True
    """
    phase = crc32(owner.encode()) % grain
    return now - (now - phase) % grain


def parse_time(text: Any) -> int | None:
    """RFC 3339 time (``2026-11-29T10:00:00Z``) as unix seconds; ``None`` when absent."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def controller_uid(meta: dict[str, Any]) -> str | None:
    """UID of the ``controller: true`` owner reference.

    Raises
    ------
    ValueError
        When that UID is not a string a scenario accepts (printable, at most
        :data:`~models.limits.MAX_NAME_CHARS` characters).
    """
    refs = meta.get("ownerReferences") or []
    if isinstance(refs, list):
        for ref in refs:
            if isinstance(ref, dict) and ref.get("controller") and ref.get("uid"):
                uid = ref["uid"]
                if not isinstance(uid, str):
                    raise ValueError(f"the controller's uid must be a string, got "
                                     f"{type(uid).__name__}")
                return check_text(uid)
    return None


def _priority(value: Any, who: str, field_name: str, diag: Diagnostics) -> int | None:
    """A Kubernetes priority: an int32 (``None``, with an error, when it is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        shown = escape_text(repr(value), 40)
        diag.error(who, field_name, f"expected an integer, got {shown}")
        return None
    if not -MAX_PRIORITY <= value <= MAX_PRIORITY:
        shown = escape_text(str(value), 40) if value.bit_length() < 1000 else "a huge integer"
        diag.error(who, field_name, f"{shown} is out of range (a priority is a 32-bit "
                   f"integer, at most {MAX_PRIORITY} in absolute value)")
        return None
    return value


@dataclass(slots=True)
class PodRecord:
    """The fields of one Pod the importer needs."""

    obj: str
    namespace: str
    name: str
    phase: str
    node: str
    group: str | None
    resource: str | None
    request: int
    other_resource: str | None
    chips: list[str]
    rank: int | None
    created: int | None
    owner: str | None
    priority_class: str | None
    priority: int | None
    selector: str | None
    annotations: dict[str, str]
    labels: dict[str, str]
    # matchLabels of the first preferred pod-affinity term (MindIE, reference §2.3.4)
    affinity_labels: dict[str, str] = field(default_factory=dict)
    # dynamic vNPU (models.kube.vnpu): the npu-core request, its annotation, whether the
    # slice is cut (huawei.com/AscendReal present) and the vnpu-level/vnpu-dvpp labels
    # (and ring-controller.atlas, the job's handler family)
    npu_core: int = 0
    # image locality: the first container's image
    image: str | None = None
    vnpu_annotation: str | None = None
    vnpu_real: bool = False
    vnpu_labels: dict[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Bound to a node and not finished (its chips are in use)."""
        return bool(self.node) and self.phase not in ("Failed", "Succeeded")


def _rank_of(value: Any, who: str, where: str, diag: Diagnostics) -> int | None:
    rank = parse_int(str(value).strip(), signed=True)
    if rank is None:
        diag.error(who, where, f"not an integer rank: '{escape_text(str(value), 40)}'")
        return None
    if rank < 0:
        diag.error(who, where, f"negative rank {rank}")
        return None
    return rank


def pod_record(obj: dict[str, Any], diag: Diagnostics) -> PodRecord | None:
    """Extract a :class:`PodRecord` (errors go to ``diag``)."""
    who = describe(obj, "Pod")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        diag.error(who, "metadata.name", "missing or not a string")
        return None
    raw_annotations = meta.get("annotations") or {}
    raw_labels = meta.get("labels") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    for part, value in (("metadata.annotations", raw_annotations),
                        ("metadata.labels", raw_labels), ("spec", spec), ("status", status)):
        if not isinstance(value, dict):
            diag.error(who, part, "not a mapping")
            return None
    annotations = string_map(raw_annotations, who, "metadata.annotations", diag)
    labels = string_map(raw_labels, who, "metadata.labels", diag)
    if annotations is None or labels is None:
        return None
    try:
        owner = controller_uid(meta)
    except ValueError as exc:
        diag.error(who, "metadata.ownerReferences[controller].uid", str(exc))
        return None
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        diag.error(who, "spec.containers", "not a list")
        return None
    requests: Counter[str] = Counter()
    env_rank: Any = None
    for index, container in enumerate(containers):
        if not isinstance(container, dict):
            diag.error(who, f"spec.containers[{index}]", "not a mapping")
            return None
        resources = container.get("resources") or {}
        if not isinstance(resources, dict):
            diag.error(who, f"spec.containers[{index}].resources", "not a mapping")
            return None
        asked = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if not isinstance(asked, dict) or not isinstance(limits, dict):
            diag.error(who, f"spec.containers[{index}].resources", "not a mapping")
            return None
        for res in (*NPU_RESOURCES, *OTHER_ASCEND_RESOURCES):
            # extended resources: the request defaults to the limit
            part, value = ("requests", asked[res]) if res in asked else (
                ("limits", limits[res]) if res in limits else ("", None))
            if not part:
                continue
            try:
                requests[res] += parse_count(value)
            except ValueError as exc:
                diag.error(who, f"spec.containers[{index}].resources.{part}[{res}]", str(exc))
                return None
        envs = container.get("env") or []
        if not isinstance(envs, list):
            diag.error(who, f"spec.containers[{index}].env", "not a list")
            return None
        for env in envs:
            if isinstance(env, dict) and env.get("name") == TASK_INDEX_ENV:
                env_rank = env.get("value")
    resource = next((r for r in NPU_RESOURCES if requests[r] > 0), None)
    other = next((r for r in OTHER_ASCEND_RESOURCES if requests[r] > 0), None)
    phase = str(status.get("phase") or "Pending")
    rank: int | None = None
    raw_rank = annotations.get(RANK_ANNOTATION)
    if raw_rank is not None:
        rank = _rank_of(raw_rank, who, f"metadata.annotations.{RANK_ANNOTATION}", diag)
    elif STATEFULSET_LABEL in labels:
        suffix = str(labels[STATEFULSET_LABEL]).rsplit("-", 1)[-1]
        rank = _rank_of(suffix, who, f"metadata.labels.{STATEFULSET_LABEL}", diag)
    elif env_rank is not None:
        rank = _rank_of(env_rank, who, f"spec.containers[].env.{TASK_INDEX_ENV}", diag)
    chips: list[str] = []
    for key in CHIP_ANNOTATIONS:
        if annotations.get(key):
            chips = [c.strip() for c in str(annotations[key]).split(",") if c.strip()]
            break
    if not isinstance(spec.get("priorityClassName") or "", str):
        diag.error(who, "spec.priorityClassName", "not a string")
        return None
    priority: int | None = None
    if spec.get("priority") is not None:
        priority = _priority(spec["priority"], who, "spec.priority", diag)
        if priority is None:
            return None
    selector = spec.get("nodeSelector") or {}
    group = annotations.get(GROUP_ANNOTATION)
    affinity_labels = _preferred_match_labels(spec)
    return PodRecord(
        obj=who, namespace=str(meta.get("namespace") or "default"), name=meta["name"],
        phase=phase, node=str(spec.get("nodeName") or ""),
        group=str(group) if group else None, resource=resource,
        request=requests[resource] if resource else 0, other_resource=other, chips=chips,
        rank=rank, created=parse_time(meta.get("creationTimestamp")),
        owner=owner, priority_class=spec.get("priorityClassName") or None, priority=priority,
        selector=str(selector.get(ACCELERATOR_TYPE)) if isinstance(selector, dict)
        and ACCELERATOR_TYPE in selector else None,
        annotations={k: annotations[k] for k in KEPT_ANNOTATIONS if k in annotations},
        labels={k: labels[k] for k in JOB_LABELS if k in labels},
        affinity_labels=affinity_labels,
        npu_core=requests["huawei.com/npu-core"],
        image=_first_image(containers),
        vnpu_annotation=(annotations["huawei.com/npu-core"]
                         if annotations.get("huawei.com/npu-core") else None),
        vnpu_real=bool(annotations.get("huawei.com/AscendReal")),
        vnpu_labels={k: labels[k] for k in ("vnpu-level", "vnpu-dvpp", "ring-controller.atlas")
                     if k in labels})


def _first_image(containers: list[Any]) -> str | None:
    """The first container's image (image locality); None when absent or not
    printable text of at most 1,024 characters."""
    image = containers[0].get("image") if containers and isinstance(containers[0], dict) \
        else None
    if not isinstance(image, str) or not image:
        return None
    try:
        return check_text(image, MAX_TEXT_CHARS)
    except LimitError:
        return None


def _preferred_match_labels(spec: dict[str, Any]) -> dict[str, str]:
    """``matchLabels`` of the first preferred pod-affinity term (``{}`` when absent or not
    shaped as Kubernetes writes it: MindIE's affinity is a preference, never an error)."""
    affinity = spec.get("affinity")
    terms = (affinity.get("podAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution") if isinstance(affinity, dict) \
        else None
    if not isinstance(terms, list) or not terms or not isinstance(terms[0], dict):
        return {}
    term = terms[0].get("podAffinityTerm") or {}
    selector = term.get("labelSelector") if isinstance(term, dict) else None
    match = selector.get("matchLabels") if isinstance(selector, dict) else None
    if not isinstance(match, dict):
        return {}
    return {str(k): str(v) for k, v in match.items()}


@dataclass(slots=True)
class PodGroupRecord:
    """The fields of one PodGroup the importer needs."""

    obj: str
    namespace: str
    name: str
    owner: str | None
    annotations: dict[str, str]
    labels: dict[str, str]
    min_member: int
    priority_class: str | None
    min_resources: dict[str, Any]
    created: int | None
    phase: str


def podgroup_record(obj: dict[str, Any], diag: Diagnostics) -> PodGroupRecord | None:
    """Extract a :class:`PodGroupRecord` (errors go to ``diag``)."""
    who = describe(obj, "PodGroup")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        diag.error(who, "metadata.name", "missing or not a string")
        return None
    spec = obj.get("spec") or {}
    raw_annotations = meta.get("annotations") or {}
    raw_labels = meta.get("labels") or {}
    for part, value in (("spec", spec), ("metadata.annotations", raw_annotations),
                        ("metadata.labels", raw_labels)):
        if not isinstance(value, dict):
            diag.error(who, part, "not a mapping")
            return None
    annotations = string_map(raw_annotations, who, "metadata.annotations", diag)
    labels = string_map(raw_labels, who, "metadata.labels", diag)
    if annotations is None or labels is None:
        return None
    namespace = str(meta.get("namespace") or "default")
    job_id = f"{namespace}/{meta['name']}"
    if len(job_id) > MAX_NAME_CHARS:
        diag.error(who, "metadata.name", f"the job's name '{escape_text(job_id, 60)}' "
                   f"(namespace/name) is {len(job_id)} characters; a scenario's names are at "
                   f"most {MAX_NAME_CHARS}")
        return None
    try:
        owner = controller_uid(meta)
    except ValueError as exc:
        diag.error(who, "metadata.ownerReferences[controller].uid", str(exc))
        return None
    min_member = spec.get("minMember", 0)
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 0:
        diag.error(who, "spec.minMember", f"expected a non-negative integer, got {min_member!r}")
        return None
    min_resources = spec.get("minResources") or {}
    if not isinstance(spec.get("priorityClassName") or "", str):
        diag.error(who, "spec.priorityClassName", "not a string")
        return None
    status = obj.get("status") or {}
    return PodGroupRecord(
        obj=who, namespace=namespace, name=meta["name"], owner=owner,
        annotations=annotations, labels=labels, min_member=min_member,
        priority_class=spec.get("priorityClassName") or None,
        min_resources=min_resources if isinstance(min_resources, dict) else {},
        created=parse_time(meta.get("creationTimestamp")),
        phase=str(status.get("phase", "")) if isinstance(status, dict) else "")


@dataclass(slots=True)
class PriorityClasses:
    """PriorityClass name → value, and the global default."""

    values: dict[str, int] = field(default_factory=dict)
    default: int | None = None

    def add(self, obj: dict[str, Any], diag: Diagnostics) -> None:
        """Take one PriorityClass object."""
        who = describe(obj, "PriorityClass")
        name = (obj.get("metadata") or {}).get("name")
        value = _priority(obj.get("value"), who, "value", diag)
        if value is None:
            return
        self.values[str(name)] = value
        if obj.get("globalDefault") is True:
            self.default = value


@dataclass(slots=True)
class RescheduleTask:
    """One ``ReasonOfTask`` entry of a reschedule record."""

    rank: int
    node: str
    reason: str
    time: int


def reschedule_records(obj: dict[str, Any], diag: Diagnostics
                       ) -> dict[str, list[list[RescheduleTask]]]:
    """``job-reschedule-reason``: JobID → records (each a list of tasks), oldest first."""
    who = describe(obj, "ConfigMap")
    data = obj.get("data") or {}
    raw = data.get(RESCHEDULE_KEY) if isinstance(data, dict) else None
    if not raw:
        return {}
    errors = len(diag.errors)
    parsed = parse_json_field(raw, who, f"data.{RESCHEDULE_KEY}", diag)
    if len(diag.errors) > errors:
        return {}
    if not isinstance(parsed, dict):
        diag.error(who, f"data.{RESCHEDULE_KEY}", "expected a JSON object of JobID -> record")
        return {}
    result: dict[str, list[list[RescheduleTask]]] = {}
    for job_id, entry in parsed.items():
        where = f"data.{RESCHEDULE_KEY}[{job_id}]"
        records = entry.get("RescheduleRecords") if isinstance(entry, dict) else None
        if not isinstance(records, list):
            diag.error(who, f"{where}.RescheduleRecords", "missing or not a list")
            continue
        out: list[list[RescheduleTask]] = []
        for i, record in enumerate(records):
            stamp = record.get("RescheduleTimeStamp") if isinstance(record, dict) else None
            tasks = record.get("ReasonOfTask") if isinstance(record, dict) else None
            if isinstance(stamp, bool) or not isinstance(stamp, int) or not isinstance(
                    tasks, list):
                diag.error(who, f"{where}.RescheduleRecords[{i}]", "expected "
                           "RescheduleTimeStamp (integer) and ReasonOfTask (list)")
                continue
            items = []
            for j, task in enumerate(tasks):
                spot = f"{where}.RescheduleRecords[{i}].ReasonOfTask[{j}]"
                if not isinstance(task, dict):
                    diag.error(who, spot, "not an object")
                    continue
                rank = _rank_of(task.get("NodeRankIndex"), who, f"{spot}.NodeRankIndex", diag)
                if rank is None:
                    continue
                items.append(RescheduleTask(rank, str(task.get("NodeName") or ""),
                                            str(task.get("RescheduleReason") or ""), stamp))
            out.append(items)
        out.sort(key=lambda tasks: tasks[0].time if tasks else 0)
        result[str(job_id)] = out
    return result


def resolve_policy(resource: str | None, annotations: dict[str, str],
                   selector: str | None) -> tuple[str | None, str]:
    """The contract policy of a job (upstream handler selection, reference §1.6).

    Returns
    -------
    tuple
        ``(policy, why)``: ``policy`` is ``None`` when the contract has no such handler,
        and ``why`` says which rule decided.
    """
    named = annotations.get(POLICY_ANNOTATION)
    known = {p.value for p in Policy}
    if named and named in known:
        return named, f"annotation {POLICY_ANNOTATION}={named}"
    if resource == "huawei.com/npu":
        return None, (f"requests huawei.com/npu without a known {POLICY_ANNOTATION} "
                      f"(got {named!r}): upstream finds no handler")
    if SP_BLOCK in annotations:
        policy = (Policy.CHIP2_NODE8_SP if selector == "module-a3-8-super-pod"
                  else Policy.CHIP2_NODE16_SP).value
        return policy, "annotation sp-block without a policy (A3 super pod)"
    value = selector or ""
    if "card" in value:
        return None, f"{ACCELERATOR_TYPE}={value} (card910x2) is not modelled"
    if value in ACCELERATOR_POLICIES:
        return ACCELERATOR_POLICIES[value], f"node selector {ACCELERATOR_TYPE}={value!r}"
    return None, f"node selector {ACCELERATOR_TYPE}={value!r} selects no modelled handler"


@dataclass
class JobGroup:
    """The pods of one Volcano job and its PodGroup."""

    job_id: str
    podgroup: PodGroupRecord | None
    pods: list[PodRecord] = field(default_factory=list)

    @property
    def obj(self) -> str:
        """The object to name in messages."""
        return self.podgroup.obj if self.podgroup else f"PodGroup {self.job_id} (no object)"


@dataclass
class JobSpec:
    """What the importer decided about one job (before it becomes a pending/running job)."""

    name: str
    obj: str
    owner: str | None
    policy: str
    family: Family
    tasks: int
    npu_per_task: int
    fields: dict[str, Any]
    priority: int
    created: int
    pods_created: int
    bound: dict[int, str]
    bound_chips: dict[int, list[str]]
    failed_ranks: set[int]
    pending_pods: int
    #: why the pending pods' ranks cannot be planned (two pods of one rank, a rank a bound
    #: pod holds, a rank outside ``0..tasks-1``); empty when they can
    rank_problem: str = ""


def _pod_level_fields(labels: dict[str, str], annotations: dict[str, str],
                      live: list[PodRecord], family: Family, policy: str,
                      fields: dict[str, Any], who: str, diag: Diagnostics) -> None:
    """Pod-level rescheduling switches, the inference labels and MindIE's ``sp-fit``
    annotation."""
    if labels.get("pod-rescheduling") == "on":
        fields["pod-rescheduling"] = True
    if labels.get("process-recover-enable") == "on":
        fields["process-recover"] = True
    service = labels.get("inferserviceid")
    if service:
        if family in (Family.SUPERPOD, Family.RACK):
            fields["inferserviceid"] = service
        else:
            diag.warn(who, f"label inferserviceid is not used by {policy} jobs: ignored")
    mindie = {k: labels[k] for k in MINDIE_LABELS if labels.get(k)}
    fit = annotations.get(SP_FIT)
    path = len(mindie) == len(MINDIE_LABELS) and Policy(policy) in A3_SUPERPOD_POLICIES
    if fit is not None:
        # upstream's isIdleResourceFit: the PodGroup annotation (else the first pod's)
        # equal to "idlest", read on A3's MindIE path only
        if not path:
            diag.warn(who, f"annotation {SP_FIT} is read only on the MindIE path (A3 "
                      "super-pod jobs with labels app and jobID): ignored")
        elif fit == "idlest":
            fields["sp-fit"] = "idlest"
        else:
            diag.warn(who, f"annotation {SP_FIT}={escape_text(fit, 40)!r} is not 'idlest': "
                      "upstream's default order (fewer free nodes first)")
    if not mindie:
        return
    fields["labels"] = mindie  # other jobs' pod-affinity may match them
    if Policy(policy) not in A3_SUPERPOD_POLICIES:
        return  # upstream's MindIE path is A3's only
    if "app" in mindie:
        fields["app"] = mindie["app"]
    if "jobID" in mindie:
        fields["jobID"] = mindie["jobID"]
    match = next((p.affinity_labels for p in live if p.affinity_labels), {})
    if match:
        fields["pod-affinity"] = dict(match)


def job_spec(group: JobGroup, classes: PriorityClasses, diag: Diagnostics) -> JobSpec | None:
    """Decide a job's contract fields from its PodGroup and pods (``None``: not importable)."""
    pg = group.podgroup
    live = [p for p in group.pods if p.phase != "Succeeded"]
    npu_pods = [p for p in live if p.resource]
    first = npu_pods[0] if npu_pods else (live[0] if live else None)
    annotations = dict(pg.annotations) if pg else {}
    if first is not None:
        for key in KEPT_ANNOTATIONS:
            if key not in annotations and key in first.annotations:
                annotations[key] = first.annotations[key]
    labels = {k: v for k, v in (pg.labels.items() if pg else ()) if k in JOB_LABELS}
    for pod in live:
        labels.update(pod.labels)
    other = next((p.other_resource for p in live if p.other_resource), None)
    if not npu_pods:
        if other:
            diag.warn(group.obj, f"requests {other}, which the scenario does not model: "
                      "job not imported")
            return None
        if pg is None or group.pods:
            return None  # pods that request no NPU (or all finished): not an NPU job
    resource = npu_pods[0].resource if npu_pods else None
    if npu_pods:
        counts = Counter(p.request for p in npu_pods)
        npu_per_task = max(counts)
        if len(counts) > 1:
            diag.warn(group.obj, f"pods request different NPU counts "
                      f"{listing(sorted(counts))}: the scenario has one npu-per-task; "
                      f"{npu_per_task} used")
        working = [p for p in npu_pods if p.phase != "Failed"]
        tasks = len(working) or len(npu_pods)  # failed pods stand in until recreated
    else:  # a PodGroup whose pods are not created yet: minMember and minResources
        assert pg is not None
        found = next(((r, v) for r, v in pg.min_resources.items() if r in NPU_RESOURCES), None)
        if found is None or pg.min_member <= 0:
            if pg.phase not in ("Completed", "") and pg.min_member > 0:
                diag.warn(pg.obj, "no pods and no NPU minResources: not imported")
            return None
        resource = found[0]
        try:
            total = parse_count(found[1])
        except ValueError as exc:
            diag.error(pg.obj, f"spec.minResources[{found[0]}]", str(exc))
            return None
        if total % pg.min_member:
            diag.warn(pg.obj, f"minResources {total} NPUs do not divide into minMember "
                      f"{pg.min_member} tasks: not imported")
            return None
        tasks, npu_per_task = pg.min_member, total // pg.min_member
        diag.warn(pg.obj, f"no pods yet: imported as a pending job of minMember {tasks} tasks "
                  f"x {npu_per_task} NPUs (from spec.minResources)")
    if pg is not None and npu_pods and pg.min_member and pg.min_member != tasks:
        diag.warn(pg.obj, f"spec.minMember {pg.min_member} but {tasks} NPU pods exist: the "
                  "scenario's gang size is the pod count")
    selector = first.selector if first is not None else None
    policy, why = resolve_policy(resource, annotations, selector)
    if policy is None:
        diag.warn(group.obj, f"{why}: job not imported")
        return None
    family = family_of(Policy(policy))
    fields: dict[str, Any] = {}
    who = group.obj
    for key in (SP_BLOCK, RA_BLOCK):
        if key not in annotations:
            continue
        allowed = family in (Family.SUPERPOD, Family.RACK) if key == SP_BLOCK else (
            family is Family.RACK)
        if not allowed:
            diag.warn(who, f"annotation {key} is not used by {policy} jobs: ignored")
            continue
        text = annotations[key].strip()
        # Go's strconv.Atoi: digits with an optional sign, within 64 bits
        value = parse_int(text, signed=True)
        if value is None or not -MAX_ABS_INT <= value <= MAX_ABS_INT:
            diag.error(who, f"metadata.annotations.{key}",
                       f"not a 64-bit integer: '{escape_text(annotations[key], 40)}'")
            return None
        fields[key] = value
    if AFFINITY_CONFIG_ANNOTATION in annotations:
        if family is Family.MULTILEVEL:
            fields["affinity-config"] = annotations[AFFINITY_CONFIG_ANNOTATION]
        else:
            diag.warn(who, f"annotation {AFFINITY_CONFIG_ANNOTATION} is not used by {policy} "
                      "jobs: ignored")
    if annotations.get(UB_MEMORY_ANNOTATION) == "true":
        if family is Family.RACK:
            fields["ub-memory"] = True
        else:
            diag.warn(who, f"annotation {UB_MEMORY_ANNOTATION} is not used by {policy} jobs: "
                      "ignored")
    if "super-pod-affinity" in labels:
        fields["super-pod-affinity"] = "soft" if labels["super-pod-affinity"] == "soft" else "hard"
    tor = labels.get("tor-affinity")
    if tor and tor != "null":
        diag.warn(who, f"label tor-affinity={tor} (switch affinity) cannot be expressed in a "
                  "scenario: ignored")
    strategy = labels.get("subHealthyStrategy")
    if strategy:
        diag.warn(who, f"label subHealthyStrategy={strategy} cannot be expressed: the scenario "
                  "allows sub-healthy nodes with a penalty (upstream forbids them unless "
                  "'ignore')")
    _pod_level_fields(labels, annotations, live, family, policy, fields, who, diag)
    priority = 0
    class_name = (pg.priority_class if pg else None) or (first.priority_class if first else None)
    if class_name and class_name in classes.values:
        priority = classes.values[class_name]
    elif class_name:
        pod_priority = first.priority if first else None
        if pod_priority is not None:
            priority = pod_priority
        else:
            diag.warn(who, f"PriorityClass '{class_name}' is not in the input: priority 0")
    elif first is not None and first.priority is not None:
        priority = first.priority
    elif classes.default is not None:
        priority = classes.default
    owner = pg.owner if pg else None
    if owner is None and first is not None and first.owner:
        owner = first.owner
        if pg is not None:
            diag.warn(pg.obj, "no controller owner reference: the pods' controller UID is the "
                      "cache key")
    if owner is None:
        diag.warn(who, "no controller owner: the job has no previous-node cache key")
    bound: dict[int, str] = {}
    chips: dict[int, list[str]] = {}
    failed: set[int] = set()
    unranked: list[PodRecord] = []
    for pod in npu_pods:
        if pod.phase == "Failed":
            if pod.rank is not None:
                failed.add(pod.rank)
            continue
        if not pod.node:
            continue
        if pod.rank is None:
            unranked.append(pod)
            continue
        if pod.rank in bound:
            diag.error(pod.obj, f"metadata.annotations.{RANK_ANNOTATION}",
                       f"rank {pod.rank} is also held by another bound pod of {who}")
            return None
        bound[pod.rank] = pod.node
        chips[pod.rank] = pod.chips
    if unranked:
        spare = (r for r in range(tasks) if r not in bound)
        for pod in sorted(unranked, key=lambda p: p.name):
            rank = next(spare, None)
            if rank is None:
                break
            bound[rank] = pod.node
            chips[rank] = pod.chips
        diag.warn(who, f"{len(unranked)} bound pods carry no rank ({RANK_ANNOTATION}, "
                  "statefulset name or VC_TASK_INDEX): free ranks assigned in pod-name order")
    pending = sum(1 for p in npu_pods if not p.node and p.phase != "Failed")
    # failed pods stand in for their ranks until recreated: the ranks run up to the pods
    rank_problem = _pending_rank_problem(npu_pods, bound, max(tasks, len(npu_pods)))
    pods_created = min((p.created for p in npu_pods
                        if p.created is not None and p.phase != "Failed"), default=0)
    created = pg.created if pg and pg.created is not None else pods_created
    image = next((p.image for p in (*npu_pods, *live) if p.image), None)
    if image is not None:
        fields["image"] = {"name": image}  # its size: the nodes' status.images (build)
    return JobSpec(name=group.job_id, obj=who, owner=owner, policy=policy, family=family,
                   tasks=tasks, npu_per_task=npu_per_task, fields=fields, priority=priority,
                   created=created or 0, pods_created=pods_created, bound=bound,
                   bound_chips=chips, failed_ranks=failed, pending_pods=pending,
                   rank_problem=rank_problem)


def _pending_rank_problem(npu_pods: list[PodRecord], bound: dict[int, str], tasks: int
                          ) -> str:
    """Why the pending pods' ranks cannot be planned rank by rank ("" when they can).

    Volcano numbers each task role from 0 (``master-0``, ``worker-0`` both carry
    ``VC_TASK_INDEX=0``), so two pending pods may carry one rank; a plan's rank then names
    two pods and steering would send both to one node."""
    ranks = Counter(p.rank for p in npu_pods
                    if not p.node and p.phase != "Failed" and p.rank is not None)
    twice = sorted(r for r, n in ranks.items() if n > 1)
    if twice:
        return (f"pending pods share rank(s) {listing(twice)} (hccl/rankIndex, statefulset "
                "ordinal or VC_TASK_INDEX): a plan cannot tell them apart")
    held = sorted(r for r in ranks if r in bound)
    if held:
        return f"pending pods carry rank(s) {listing(held)}, which bound pods hold"
    outside = sorted(r for r in ranks if r >= tasks)
    if outside:
        return (f"pending pods carry rank(s) {listing(outside)}, outside 0..{tasks - 1} "
                f"(the job's {tasks} NPU pods)")
    return ""
