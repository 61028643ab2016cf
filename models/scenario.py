"""Pydantic models of the public scenario contract (``scenario-format.md``).

Every key keeps the upstream (kebab-case) spelling through aliases, so that values can be
copied from PodGroup annotations and the scheduler's ``init-params`` unchanged.  The models
check *structure* (types, ranges of single fields); rules that relate several fields are
checked by :mod:`models.validation`, which reports every error of a file at once.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from models.documents import DocumentError, load_json
from models.limits import (
    MAX_CACHE_ENTRIES,
    MAX_IMAGE_SIZE_GB,
    MAX_JOBS,
    MAX_LABELS,
    MAX_NODES,
    MAX_PRIORITY,
    MAX_RUNNING_JOBS,
    MAX_TASKS,
    MAX_TEXT_CHARS,
    MAX_TIMESTAMP,
    LimitError,
    Name,
    Text,
    check_text,
    escape_text,
)

#: Upstream default of ``super-pod-size`` (``plugin/factory.go``).
DEFAULT_SUPER_POD_SIZE = 48
#: Upstream default of ``reserve-nodes``.
DEFAULT_RESERVE_NODES = 2
#: Upstream ``DefaultTTL`` of the previous-node cache: 72 h.
DEFAULT_CACHE_TTL_SECONDS = 72 * 3600
#: Default image size used by ``simulate`` to report avoided pulls.
DEFAULT_IMAGE_SIZE_GB = 25.0
#: Sanity limits that keep absurd values out of the int32 arrays and the engines' tables
#: (a typo such as ``tasks: 3000000000`` must be refused with a message, not crash).
MAX_NODE_NPUS = 1024
MAX_ID = 2**31 - 1
MAX_SUPER_POD_SIZE = 100_000
#: Largest ``pending-sessions`` accepted (upstream counts sessions in an int).
MAX_PENDING_SESSIONS = 1_000_000
#: Pod-level and inference keys of jobs and their defaults: left out of dumps
#: when they hold the default.
POD_LEVEL_DEFAULTS: dict[str, Any] = {
    "running-ranks": {}, "pod-rescheduling": False, "process-recover": False,
    "pending-sessions": 0, "pod-affinity": {}, "labels": {},
}
#: Most images one node may list (``nodes[].images``); kubelet reports at most 50 by
#: default (``nodeStatusMaxImages``), a larger cap keeps hand-written files easy.
MAX_NODE_IMAGES = 1024
#: Label naming a node's multilevel topology tree.
TOPOTREE_LABEL = "huawei.com/topotree"
#: Tree name used when a node carries no ``huawei.com/topotree`` label.
DEFAULT_TOPOTREE = "default"


class Health(StrEnum):
    """Node health as NodeD reports it."""

    HEALTHY = "healthy"
    SUBHEALTHY = "subhealthy"
    UNHEALTHY = "unhealthy"


class Policy(StrEnum):
    """Every ``huawei.com/schedule_policy`` value upstream knows (reference §1.5/§1.6)."""

    CHIP1_NODE2 = "chip1-node2"
    CHIP4_NODE4 = "chip4-node4"
    CHIP8_NODE8 = "chip8-node8"
    CHIP8_NODE16 = "chip8-node16"
    CHIP2_NODE16 = "chip2-node16"
    CHIP2_NODE16_SP = "chip2-node16-sp"
    CHIP2_NODE8 = "chip2-node8"
    CHIP2_NODE8_SP = "chip2-node8-sp"
    CHIP4_NODE8 = "chip4-node8"
    CHIP4_NODE16 = "chip4-node16"
    CHIP1_NODE8 = "chip1-node8"
    CHIP1_NODE16 = "chip1-node16"
    CHIP8_NODE8_SP = "chip8-node8-sp"
    CHIP8_NODE8_RA64_SP = "chip8-node8-ra64-sp"
    CHIP1_SOFT_SHARE_DEV = "chip1-softShareDev"
    MULTILEVEL = "multilevel"
    MODULE_A3_16 = "module-a3-16"


class Family(StrEnum):
    """Placement family: which greedy strategy and which hard constraints apply."""

    ORDINARY = "ordinary"
    SUPERPOD = "superpod"  # A3 chip2-node16-sp / chip2-node8-sp and chip8-node8-sp (850)
    RACK = "rack"  # chip8-node8-ra64-sp (950)
    MULTILEVEL = "multilevel"


SUPERPOD_POLICIES = frozenset(
    {Policy.CHIP2_NODE16_SP, Policy.CHIP2_NODE8_SP, Policy.CHIP8_NODE8_SP}
)
A3_SUPERPOD_POLICIES = frozenset({Policy.CHIP2_NODE16_SP, Policy.CHIP2_NODE8_SP})


def family_of(policy: Policy) -> Family:
    """Return the placement family of an upstream policy."""
    if policy in SUPERPOD_POLICIES:
        return Family.SUPERPOD
    if policy is Policy.CHIP8_NODE8_RA64_SP:
        return Family.RACK
    if policy is Policy.MULTILEVEL:
        return Family.MULTILEVEL
    return Family.ORDINARY


#: NPUs per node the upstream handler assumes for a policy (reference §1.2).
POLICY_NODE_NPUS: dict[Policy, int] = {
    Policy.CHIP1_NODE2: 8,
    Policy.CHIP4_NODE4: 4,
    Policy.CHIP8_NODE8: 8,
    Policy.CHIP8_NODE16: 16,
    Policy.CHIP2_NODE16: 16,
    Policy.CHIP2_NODE8: 16,
    Policy.MODULE_A3_16: 16,
    Policy.CHIP2_NODE16_SP: 16,
    Policy.CHIP2_NODE8_SP: 8,
    Policy.CHIP4_NODE8: 8,
    Policy.CHIP4_NODE16: 16,
    Policy.CHIP1_NODE8: 8,
    Policy.CHIP1_NODE16: 16,
    Policy.CHIP8_NODE8_SP: 8,
    Policy.CHIP8_NODE8_RA64_SP: 8,
    Policy.CHIP1_SOFT_SHARE_DEV: 8,
    Policy.MULTILEVEL: 16,
}


class SuperPodAffinity(StrEnum):
    """Job label ``super-pod-affinity``."""

    HARD = "hard"
    SOFT = "soft"


def _strict_unless_soft(value: Any) -> Any:
    """Upstream label ``super-pod-affinity``: "soft" is soft; any other value is strict."""
    if isinstance(value, str) and value != "soft":
        return "hard"
    return value


#: A rank number (running jobs' ``ranks`` keys).
RankNumber = Annotated[int, Field(ge=0, lt=MAX_TASKS)]

#: The ``super-pod-affinity`` field type of jobs and running jobs.
AffinityLabel = Annotated[SuperPodAffinity, BeforeValidator(_strict_unless_soft)]


class _Model(BaseModel):
    model_config = ConfigDict(
        populate_by_name=True, extra="forbid", frozen=True, validate_default=True
    )


class LevelConfig(_Model):
    """One level of a multilevel resource tree (``resource-level-config``)."""

    label: Text = Field(min_length=1, description=(
        "The node label whose value names this level's domain (nodes sharing the value "
        "are in one domain)."), examples=["rack-id", "switch-id"])
    reserved_node: int = Field(0, alias="reservedNode", ge=0, le=MAX_NODES, description=(
        "Nodes per domain of this level kept free for fault replacement (upstream "
        "reservedNode; read on level1)."))


class Config(_Model):
    """The scheduler's ``init-params`` that placement reads."""

    super_pod_size: int | None = Field(None, alias="super-pod-size", le=MAX_SUPER_POD_SIZE,
                                       description=(
        "Most nodes in one physical super pod (A3, chip8-node8-sp, chip8-node8-ra64-sp); "
        "absent, zero or negative: 48, as upstream."), examples=[48])
    reserve_nodes: int | None = Field(None, alias="reserve-nodes", description=(
        "Nodes per physical super pod kept free for fault replacement (A3, chip8-node8-sp); "
        "absent: 2; 0: no reserve; not below super-pod-size: upstream's defaulting."),
        examples=[2])
    prefer_previous_node: bool = Field(True, alias="prefer-previous-node", description=(
        "Prefer each pod's previous node (the RFC's origin-node preference); false places "
        "as upstream does without it."))
    image_locality: bool = Field(True, alias="image-locality", description=(
        "npu-place addition: ranks without a usable origin prefer nodes that already hold "
        "the job's image (objective term and greedy tie-break, always below an origin "
        "hit); false restores upstream's order exactly (conformance runs)."))
    resource_level_config: dict[Text, dict[Text, LevelConfig]] = Field(
        default_factory=dict, alias="resource-level-config", description=(
            "Multilevel trees: tree name (a node's huawei.com/topotree label, 'default' "
            "when missing) -> level name (level1 closest to the node) -> its label and "
            "reservedNode.  Also accepted as upstream's JSON string."),
        examples=[{"default": {"level1": {"label": "rack-id", "reservedNode": 1},
                               "level2": {"label": "switch-id"}}}],
    )

    @field_validator("resource_level_config", mode="before")
    @classmethod
    def _parse_json_string(cls, value: Any) -> Any:
        # Upstream stores the tree config as a JSON string in init-params; accept both.
        if isinstance(value, str):
            try:
                value = load_json(value)  # then canonicalise its keys like a mapping
            except DocumentError as exc:
                raise ValueError(str(exc)) from None
        if isinstance(value, dict):
            # Go's JSON decoding is case-insensitive on field names: accept "Label".
            fixed: dict[str, Any] = {}
            for tree, levels in value.items():
                if isinstance(levels, dict):
                    fixed[tree] = {
                        lvl: (
                            {_canon_level_key(k): v for k, v in spec.items()}
                            if isinstance(spec, dict)
                            else spec
                        )
                        for lvl, spec in levels.items()
                    }
                else:
                    fixed[tree] = levels
            return fixed
        return value

    @property
    def effective_super_pod_size(self) -> int:
        """``super-pod-size`` as A3/850 use it: 48 when absent, zero or negative."""
        if self.super_pod_size is None or self.super_pod_size <= 0:
            return DEFAULT_SUPER_POD_SIZE
        return self.super_pod_size

    @property
    def effective_reserve_nodes(self) -> int:
        """``reserve-nodes`` after upstream's defaulting (``getReserveNodes``).

        Absent means 2.  An explicit 0 means no reserve (upstream would turn 0 into 2; a
        planning tool needs a way to switch the reserve off).  A reserve not smaller than
        the super-pod size becomes 2 when the size is above 2, else 0, as upstream.
        """
        reserve = DEFAULT_RESERVE_NODES if self.reserve_nodes is None else self.reserve_nodes
        size = self.effective_super_pod_size
        if reserve >= size:
            reserve = DEFAULT_RESERVE_NODES if size > DEFAULT_RESERVE_NODES else 0
        return max(0, reserve)


def _canon_level_key(key: str) -> str:
    lowered = key.lower()
    if lowered == "label":
        return "label"
    if lowered == "reservednode":
        return "reservedNode"
    return key


class VnpuDvpp(StrEnum):
    """DVPP of a vNPU slice (pod label ``vnpu-dvpp``) or a chip's free DVPP state."""

    YES = "yes"
    NO = "no"
    NULL = "null"


class VnpuLevel(StrEnum):
    """AI-CPU level of a vNPU request (pod label ``vnpu-level``)."""

    LOW = "low"
    HIGH = "high"


#: The vNPU chip kinds, each with a template table in :data:`models.vnpu_rules.TEMPLATES`
#: (a test keeps the two equal; listed here for the schema's enum, without the import).
VNPU_CHIP_KINDS = ("Ascend310P", "910B1", "910B2C", "910B2", "910B3", "910B4", "910B4-1",
                   "Ascend910A3-20", "Ascend910A3-24")


class RingController(StrEnum):
    """A vNPU job's ``ring-controller.atlas`` label: which upstream handler (chip family)
    takes the job (upstream ``GetPluginNameByReq``)."""

    ASCEND_910 = "ascend-910"
    ASCEND_910B = "ascend-910b"
    HUAWEI_NPU = "huawei.com.npu"
    ASCEND_310P = "ascend-310P"


class VnpuChip(_Model):
    """One chip of a vNPU node with its free resources (``nodes[].vnpu.chips[]``)."""

    id: int = Field(ge=0, lt=MAX_NODE_NPUS, description="The chip's ID on its node.")
    free_cores: int | None = Field(None, alias="free-cores", ge=0, le=MAX_NODE_NPUS,
                                   description="Free AI cores (absent: all of the kind's).")
    free_cpus: int | None = Field(None, alias="free-cpus", ge=0, le=MAX_NODE_NPUS,
                                  description="Free AI CPUs (absent: all of the kind's).")
    segmented: bool = Field(False, description=(
        "The chip already holds vNPU slices (a whole card then never goes on it)."))
    dvpp: VnpuDvpp = Field(VnpuDvpp.YES, description=(
        "The chip's free DVPP state: yes, no or null."))
    unstable: bool = Field(False, description="No slice is cut on an unstable chip.")


class VnpuNode(_Model):
    """The dynamic-vNPU description of a node (``nodes[].vnpu``).

    ``chip-kind`` names the template table (``Ascend310P``, ``910B1`` … ``910B4-1``,
    ``Ascend910A3-20``, ``Ascend910A3-24``).  ``chips`` absent means ``npus`` untouched
    chips with IDs ``0..npus-1``; present, it lists exactly the healthy chips.
    """

    chip_kind: Text = Field(alias="chip-kind", min_length=1, description=(
        "The chip kind, naming its vNPU template table."),
        json_schema_extra={"enum": list(VNPU_CHIP_KINDS)}, examples=["Ascend310P"])
    ai_cores: int | None = Field(None, alias="ai-cores", gt=0, le=MAX_NODE_NPUS,
                                 description="AI cores per chip (default: the kind's).")
    ai_cpus: int | None = Field(None, alias="ai-cpus", gt=0, le=MAX_NODE_NPUS,
                                description="AI CPUs per chip (default: the kind's).")
    chips: list[VnpuChip] | None = Field(None, max_length=MAX_NODE_NPUS, description=(
        "The healthy chips with their free resources; absent: npus untouched chips with "
        "IDs 0..npus-1."))
    unfinished_templates: list[Text] = Field(default_factory=list,
                                             alias="unfinished-templates", max_length=64,
                                             description=(
        "Templates of slices allocated on the node but not yet cut (one template per node "
        "while any is unfinished)."))


#: An image size in GB (``nodes[].images`` values, ``image.size-gb``).
ImageSizeGb = Annotated[float, Field(ge=0, le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False)]


class JobImage(_Model):
    """The container image a job runs (``jobs[].image``, image locality).

    ``size-gb`` absent: the job's ``image-size-gb``.
    """

    name: Text = Field(min_length=1, description=(
        "The image reference as the pods name it (up to 1,024 characters)."),
        examples=["registry.local/train:v3"])
    size_gb: ImageSizeGb | None = Field(None, alias="size-gb", description=(
        "Its size in GB; absent: the job's image-size-gb."), examples=[28.5])


_ONLY_STR = {str}


class Node(_Model):
    """One Kubernetes node with its NPU state."""

    name: Name = Field(min_length=1, description="The Kubernetes node name (unique).",
                       examples=["node-000"])
    npus: int = Field(gt=0, le=MAX_NODE_NPUS, description="NPU chips on the node.",
                      examples=[8, 16])
    free: int = Field(description=(
        "Free, usable chips now (0..npus); a node with free < npus runs other pods."),
        examples=[8])
    health: Health = Field(Health.HEALTHY, description=(
        "As NodeD reports it: healthy, subhealthy (used at a penalty) or unhealthy (never "
        "placed on)."))
    super_pod_id: int | None = Field(None, alias="super-pod-id", le=MAX_ID, description=(
        "The physical super pod; absent or negative (device-info reports -1): in none."),
        examples=[0])
    rack_id: int | None = Field(None, alias="rack-id", le=MAX_ID, description=(
        "The physical rack (a global ID); absent or negative: in none."), examples=[0])
    labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_LABELS, description=(
        "Kubernetes node labels; multilevel reads huawei.com/topotree and each level's "
        "label."), examples=[{"huawei.com/topotree": "default", "rack-id": "r0"}])
    vnpu: VnpuNode | None = Field(None, description=(
        "Dynamic vNPU state; a vNPU node serves vnpu-jobs only."))
    images: dict[Text, ImageSizeGb] | None = Field(None, max_length=MAX_NODE_IMAGES, description=(
        "Image locality: the images the node holds, name -> size in GB "
        "(node.status.images); absent: unknown, the node holds none as far as placement "
        "knows."), examples=[{"registry.local/train:v3": 28.5}])

    @field_validator("labels", mode="before")
    @classmethod
    def _stringify_labels(cls, value: Any) -> Any:
        # Kubernetes label values are strings; YAML may read ``rack: 7`` as a number.  A
        # mapping or a list is not a label value: refused, never turned into its repr.
        # Keys and values are checked here, in one pass (a 100,000-node file has 600,000).
        if not isinstance(value, dict) or len(value) > MAX_LABELS:
            return value  # pydantic reports the type or the count
        texts = [*value, *value.values()]
        if not texts or (set(map(type, texts)) == _ONLY_STR
                         and max(map(len, texts)) <= MAX_TEXT_CHARS
                         and "".join(texts).isprintable()):
            return value  # the common case, checked in C: strings, short, printable
        plain = True
        for key, item in value.items():
            if type(item) is not str or type(key) is not str:
                plain = False
                if isinstance(item, (dict, list)):
                    kind = "mapping" if isinstance(item, dict) else "list"
                    raise ValueError(f"label '{escape_text(str(key), 60)}': a label value must "
                                     f"be a string (or a number or boolean), not a {kind}")
                key, item = str(key), str(item)
            for what, text in (("key", key), ("value", item)):
                try:
                    check_text(text, MAX_TEXT_CHARS)
                except LimitError as exc:
                    raise ValueError(f"label {what} {exc}") from None
        return value if plain else {str(k): str(v) for k, v in value.items()}


class CacheEntry(_Model):
    """One previous-node record: owner UID, rank → node."""

    owner_uid: Name = Field(alias="owner-uid", min_length=1, description=(
        "The owner's UID (a job's owner-uid: its PodGroup's controller UID)."))
    rank: int = Field(ge=0, lt=MAX_TASKS, description="The rank (pod index) remembered.")
    node: Name = Field(min_length=1, description="The node the rank last ran on.")
    updated: int = Field(0, ge=-MAX_TIMESTAMP, le=MAX_TIMESTAMP, description=(
        "Unix seconds of the record; older than now - ttl-seconds: expired, not a "
        "candidate."))
    previous: Name | None = Field(None, description=(
        "The node before this one (upstream RecordAssignment's rollback anchor)."))


class AffinityCacheModel(_Model):
    """The previous-node cache as stored in a scenario file."""

    ttl_seconds: int = Field(DEFAULT_CACHE_TTL_SECONDS, alias="ttl-seconds", gt=0,
                             le=MAX_TIMESTAMP, description=(
        "Entries updated before now - ttl-seconds are ignored (default 72 h, as "
        "upstream)."))
    entries: list[CacheEntry] = Field(default_factory=list, max_length=MAX_CACHE_ENTRIES,
                                      description="owner-uid, rank -> node records.")


class Job(_Model):
    """A pending gang job of this session."""

    name: Name = Field(min_length=1, description="The job's name (unique among jobs).",
                       examples=["train-a"])
    owner_uid: Name | None = Field(None, alias="owner-uid", description=(
        "The PodGroup's controller UID: the key of its affinity-cache entries."),
        examples=["9f1c-..."])
    policy: Text = Field(description=(
        "Upstream's huawei.com/schedule_policy: it selects the placement family (ordinary, "
        "A3/850 super pod, 950 rack, multilevel) and the node size."),
        json_schema_extra={"enum": [p.value for p in Policy]}, examples=["chip8-node8-sp"])
    tasks: int = Field(gt=0, le=MAX_TASKS, description=(
        "Gang size: all ranks 0..tasks-1 are placed, or none."), examples=[32])
    npu_per_task: int = Field(alias="npu-per-task", gt=0, le=MAX_NODE_NPUS, description=(
        "NPUs each rank asks for."), examples=[8])
    sp_block: int | None = Field(None, alias="sp-block", description=(
        "NPUs per logical super pod (upstream annotation sp-block); super-pod policies "
        "only; default: the job's total NPUs."), examples=[128])
    ra_block: int | None = Field(None, alias="ra-block", description=(
        "NPUs per rack window (upstream annotation ra-block), chip8-node8-ra64-sp only: 1, "
        "2, 4, 8, 16, 32 or 64; default 8."), examples=[16])
    affinity_config: Text | None = Field(None, alias="affinity-config", description=(
        "Multilevel only (upstream annotation huawei.com/affinity-config): pods per group "
        "of each level, each dividing the next and the last dividing tasks."),
        examples=["level1=2,level2=4"])
    super_pod_affinity: AffinityLabel = Field(SuperPodAffinity.HARD, alias="super-pod-affinity",
                                              description=(
        "Upstream label super-pod-affinity: soft lets a block span super pods (and a rack "
        "window racks) at a penalty; any other value is hard."))
    ub_memory: bool = Field(False, alias="ub-memory", description=(
        "chip8-node8-ra64-sp only (upstream annotation huawei.com/schedule_ubmemory): the "
        "whole job in one UB-memory domain of 16 consecutive racks."))
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description=(
        "Higher is more important when not every job fits."))
    fault_ranks: list[int] = Field(default_factory=list, alias="fault-ranks",
                                   max_length=MAX_TASKS, description=(
        "Ranks whose previous pod failed: they should not return to their cached node."),
        examples=[[3]])
    image_size_gb: float = Field(DEFAULT_IMAGE_SIZE_GB, alias="image-size-gb", ge=0,
                                 le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False, description=(
        "The job's image size, for the pulls simulate and replay report."))
    # Pod-level rescheduling: ranks of this job still running, which stay on
    # their nodes (their chips are not in the nodes' ``free``); the other ranks are placed
    # around them.  Upstream's job labels ``pod-rescheduling=on`` and
    # ``process-recover-enable=on`` and the rescheduler's ``PendingSessionNum``.
    running_ranks: dict[RankNumber, Name] = Field(default_factory=dict, alias="running-ranks",
                                                  max_length=MAX_TASKS, description=(
        "Pod-level rescheduling: rank -> node of the ranks still running; they stay, and "
        "their chips are not in the nodes' free."), examples=[{"0": "node-003"}])
    pod_rescheduling: bool = Field(False, alias="pod-rescheduling", description=(
        "Upstream's job label pod-rescheduling=on."))
    process_recover: bool = Field(False, alias="process-recover", description=(
        "Upstream's job label process-recover-enable=on."))
    pending_sessions: int = Field(0, alias="pending-sessions", ge=0, le=MAX_PENDING_SESSIONS,
                                  description=(
        "Upstream's PendingSessionNum: sessions the repair has stayed pending (selects the "
        "repair stage)."))
    # Inference paths: upstream's job label ``inferserviceid`` (A3, 850 and 950), and
    # MindIE's labels ``app`` and ``jobID`` with the ``matchLabels`` of the first preferred
    # pod-affinity term (A3 only).  ``labels`` are the job's own labels, matched by other
    # jobs' ``pod-affinity``.
    inferserviceid: Text | None = Field(None, description=(
        "Upstream's job label inferserviceid (A3, 850, 950): instances of one service are "
        "drawn to the super pods and racks its running instances use."))
    app: Text | None = Field(None, description=(
        "MindIE's label app (A3; the MindIE path runs when app and jobID are both set)."))
    job_id: Text | None = Field(None, alias="jobID", description="MindIE's label jobID.")
    pod_affinity: dict[Text, Text] = Field(default_factory=dict, alias="pod-affinity",
                                           max_length=MAX_LABELS, description=(
        "The matchLabels of the first preferred pod-affinity term (MindIE)."))
    # MindIE's super-pod order (upstream's job annotation ``sp-fit``): ``idlest`` takes
    # super pods with more free nodes first, else fewer first (reference §2.3.4)
    sp_fit: Literal["idlest"] | None = Field(None, alias="sp-fit", description=(
        "Upstream's annotation sp-fit on a MindIE A3 job: idlest takes super pods with "
        "more free nodes first."))
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=MAX_LABELS,
                                     description=(
        "The job's own labels, matched by other jobs' pod-affinity."))
    image: JobImage | None = Field(None, description=(
        "Image locality: the image the job's pods run; absent: no image preference."))


class RunningJob(_Model):
    """A job already running (used by ``simulate`` and for a cache cold start)."""

    name: Name = Field(min_length=1, description="The job's name (unique among running jobs).")
    owner_uid: Name | None = Field(None, alias="owner-uid", description=(
        "The controller UID: its ranks' nodes become affinity-cache entries."))
    policy: Text = Field("chip8-node8", description=(
        "Upstream's huawei.com/schedule_policy, as on jobs."),
        json_schema_extra={"enum": [p.value for p in Policy]})
    npu_per_task: int = Field(8, alias="npu-per-task", gt=0, le=MAX_NODE_NPUS,
                              description="NPUs each rank uses.")
    ranks: dict[RankNumber, Name] = Field(default_factory=dict, max_length=MAX_TASKS,
                                          description=(
        "rank -> node of the running ranks (their chips are not in the nodes' free)."),
        examples=[{"0": "node-001", "1": "node-002"}])
    # The job's spec, so that ``simulate`` can evict and re-place it (all optional; the
    # meaning is the same as on Job).  ``tasks`` is the desired rank count (default: the
    # highest running rank + 1); ranks below it that are not running are pending.
    tasks: int | None = Field(None, ge=0, le=MAX_TASKS, description=(
        "Desired ranks (default: the highest running rank + 1); ranks below it that are "
        "not running are pending; 0: parked."))
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="As on jobs.")
    image_size_gb: float = Field(DEFAULT_IMAGE_SIZE_GB, alias="image-size-gb", ge=0,
                                 le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False,
                                 description="As on jobs.")
    sp_block: int | None = Field(None, alias="sp-block", description="As on jobs.")
    ra_block: int | None = Field(None, alias="ra-block", description="As on jobs.")
    affinity_config: Text | None = Field(None, alias="affinity-config",
                                         description="As on jobs.")
    super_pod_affinity: AffinityLabel = Field(SuperPodAffinity.HARD, alias="super-pod-affinity",
                                              description="As on jobs.")
    ub_memory: bool = Field(False, alias="ub-memory", description="As on jobs.")
    # Read by the inference paths of pending jobs: a running job of the same
    # ``inferserviceid`` draws its service's next instances to its super pods / racks, and
    # its ``labels`` are matched by MindIE jobs' ``pod-affinity``.
    inferserviceid: Text | None = Field(None, description=(
        "Draws pending instances of the same service to this job's super pods and racks."))
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=MAX_LABELS,
                                     description=(
        "The job's labels, matched by pending jobs' pod-affinity."))
    # Upstream's pod-level switches: ``simulate`` deletes only a fault pod of such a job
    # and repairs the job around the running ones.
    pod_rescheduling: bool = Field(False, alias="pod-rescheduling", description=(
        "simulate repairs a fault of this job at pod level (only the fault pod moves)."))
    process_recover: bool = Field(False, alias="process-recover", description=(
        "Upstream's job label process-recover-enable=on."))
    image: JobImage | None = Field(None, description="Image locality, as on jobs.")


class VnpuJob(_Model):
    """A pending dynamic-vNPU job (``huawei.com/npu-core``), one entry of ``vnpu-jobs``.

    Each task asks for ``ai-cores`` AI cores (with ``vnpu-level`` and ``vnpu-dvpp`` as the
    pod labels), or names a ``template`` of the node's table.  ``ring-controller`` is the
    job's ``ring-controller.atlas`` label: ``ascend-310P`` binds the job to 310P nodes, the
    910 values to 910 nodes; absent, the job may take either family, but all its tasks take
    one.
    """

    name: Name = Field(min_length=1, description="The job's name (unique among all jobs).",
                       examples=["infer-chat"])
    owner_uid: Name | None = Field(None, alias="owner-uid", description=(
        "The controller UID: the key of its affinity-cache entries."))
    tasks: int = Field(gt=0, le=MAX_TASKS, description="Gang size, as on jobs.")
    ai_cores: int | None = Field(None, alias="ai-cores", gt=0, le=MAX_NODE_NPUS * 32,
                                 description=(
        "AI cores per task (huawei.com/npu-core); or give template."), examples=[4])
    template: Text | None = Field(None, min_length=1, description=(
        "A template name of the nodes' chip kind instead of ai-cores."),
        examples=["vir04"])
    vnpu_level: VnpuLevel = Field(VnpuLevel.LOW, alias="vnpu-level", description=(
        "Pod label vnpu-level: high, or low (any other value is low, as upstream)."))
    vnpu_dvpp: VnpuDvpp = Field(VnpuDvpp.NULL, alias="vnpu-dvpp", description=(
        "Pod label vnpu-dvpp: null (either), yes or no."))
    ring_controller: RingController | None = Field(None, alias="ring-controller", description=(
        "The job's ring-controller.atlas label: ascend-310P binds it to 310P nodes, the 910 "
        "values to 910 nodes; absent, either family, but all its tasks take one."))
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="As on jobs.")
    image_size_gb: float = Field(DEFAULT_IMAGE_SIZE_GB, alias="image-size-gb", ge=0,
                                 le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False,
                                 description="As on jobs.")
    image: JobImage | None = Field(None, description="Image locality, as on jobs.")

    @field_validator("vnpu_level", mode="before")
    @classmethod
    def _unknown_level_is_low(cls, value: Any) -> Any:
        # upstream: any vnpu-level other than "high" means "low"
        return VnpuLevel.HIGH if value == "high" else VnpuLevel.LOW


class Scenario(_Model):
    """One scheduling session frozen in a file."""

    now: int | None = Field(None, ge=0, le=MAX_TIMESTAMP, description=(
        "Unix seconds of this session (the cache TTL is measured from it); absent: the "
        "clock."), examples=[1764400000])
    config: Config = Field(default_factory=Config, description=(
        "The scheduler's init-params that placement reads."))
    nodes: list[Node] = Field(default_factory=list, max_length=MAX_NODES,
                              description="The cluster's nodes with their NPU state.")
    affinity_cache: AffinityCacheModel = Field(
        default_factory=AffinityCacheModel, alias="affinity-cache", description=(
            "The previous-node cache: owner UID, rank -> node.")
    )
    jobs: list[Job] = Field(default_factory=list, max_length=MAX_JOBS, description=(
        "The pending gang jobs of this session, in queue order."))
    running: list[RunningJob] = Field(default_factory=list, max_length=MAX_RUNNING_JOBS,
                                      description=(
        "Jobs already running (their chips are not in the nodes' free); read by simulate "
        "and the inference paths."))
    vnpu_jobs: list[VnpuJob] = Field(default_factory=list, alias="vnpu-jobs",
                                     max_length=MAX_JOBS, description=(
        "Pending dynamic-vNPU jobs (huawei.com/npu-core)."))

    def to_dict(self) -> dict[str, Any]:
        """Return the scenario with the contract's key names, for YAML/JSON output.

        The pod-level and inference fields are written only when set, so that
        a scenario without them dumps as before.
        """
        data = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        for section in ("jobs", "running"):
            for item in data.get(section, []):
                for key, default in POD_LEVEL_DEFAULTS.items():
                    if key in item and item[key] == default:
                        del item[key]
        if not data.get("vnpu-jobs"):
            data.pop("vnpu-jobs", None)  # additive key: absent when there are none
        if data.get("config", {}).get("image-locality") is True:
            del data["config"]["image-locality"]  # additive key: absent at its default
        return data
