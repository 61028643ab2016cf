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
#: Pod-level and inference keys of jobs (issue 24) and their defaults: left out of dumps
#: when they hold the default.
POD_LEVEL_DEFAULTS: dict[str, Any] = {
    "running-ranks": {}, "pod-rescheduling": False, "process-recover": False,
    "pending-sessions": 0, "pod-affinity": {}, "labels": {},
}
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

    label: Text = Field(min_length=1)
    reserved_node: int = Field(0, alias="reservedNode", ge=0, le=MAX_NODES)


class Config(_Model):
    """The scheduler's ``init-params`` that placement reads."""

    super_pod_size: int | None = Field(None, alias="super-pod-size", le=MAX_SUPER_POD_SIZE)
    reserve_nodes: int | None = Field(None, alias="reserve-nodes")
    prefer_previous_node: bool = Field(True, alias="prefer-previous-node")
    resource_level_config: dict[Text, dict[Text, LevelConfig]] = Field(
        default_factory=dict, alias="resource-level-config"
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


class VnpuChip(_Model):
    """One chip of a vNPU node with its free resources (``nodes[].vnpu.chips[]``)."""

    id: int = Field(ge=0, lt=MAX_NODE_NPUS)
    free_cores: int | None = Field(None, alias="free-cores", ge=0, le=MAX_NODE_NPUS)
    free_cpus: int | None = Field(None, alias="free-cpus", ge=0, le=MAX_NODE_NPUS)
    segmented: bool = False
    dvpp: VnpuDvpp = VnpuDvpp.YES
    unstable: bool = False


class VnpuNode(_Model):
    """The dynamic-vNPU description of a node (``nodes[].vnpu``).

    ``chip-kind`` names the template table (``Ascend310P``, ``910B1`` … ``910B4-1``,
    ``Ascend910A3-20``, ``Ascend910A3-24``).  ``chips`` absent means ``npus`` untouched
    chips with IDs ``0..npus-1``; present, it lists exactly the healthy chips.
    """

    chip_kind: Text = Field(alias="chip-kind", min_length=1)
    ai_cores: int | None = Field(None, alias="ai-cores", gt=0, le=MAX_NODE_NPUS)
    ai_cpus: int | None = Field(None, alias="ai-cpus", gt=0, le=MAX_NODE_NPUS)
    chips: list[VnpuChip] | None = Field(None, max_length=MAX_NODE_NPUS)
    unfinished_templates: list[Text] = Field(default_factory=list,
                                             alias="unfinished-templates", max_length=64)


_ONLY_STR = {str}


class Node(_Model):
    """One Kubernetes node with its NPU state."""

    name: Name = Field(min_length=1)
    npus: int = Field(gt=0, le=MAX_NODE_NPUS)
    free: int
    health: Health = Health.HEALTHY
    super_pod_id: int | None = Field(None, alias="super-pod-id", le=MAX_ID)
    rack_id: int | None = Field(None, alias="rack-id", le=MAX_ID)
    labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_LABELS)
    vnpu: VnpuNode | None = None

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

    owner_uid: Name = Field(alias="owner-uid", min_length=1)
    rank: int = Field(ge=0, lt=MAX_TASKS)
    node: Name = Field(min_length=1)
    updated: int = Field(0, ge=-MAX_TIMESTAMP, le=MAX_TIMESTAMP)
    previous: Name | None = None


class AffinityCacheModel(_Model):
    """The previous-node cache as stored in a scenario file."""

    ttl_seconds: int = Field(DEFAULT_CACHE_TTL_SECONDS, alias="ttl-seconds", gt=0,
                             le=MAX_TIMESTAMP)
    entries: list[CacheEntry] = Field(default_factory=list, max_length=MAX_CACHE_ENTRIES)


class Job(_Model):
    """A pending gang job of this session."""

    name: Name = Field(min_length=1)
    owner_uid: Name | None = Field(None, alias="owner-uid")
    policy: Text
    tasks: int = Field(gt=0, le=MAX_TASKS)
    npu_per_task: int = Field(alias="npu-per-task", gt=0, le=MAX_NODE_NPUS)
    sp_block: int | None = Field(None, alias="sp-block")
    ra_block: int | None = Field(None, alias="ra-block")
    affinity_config: Text | None = Field(None, alias="affinity-config")
    super_pod_affinity: AffinityLabel = Field(SuperPodAffinity.HARD, alias="super-pod-affinity")
    ub_memory: bool = Field(False, alias="ub-memory")
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    fault_ranks: list[int] = Field(default_factory=list, alias="fault-ranks",
                                   max_length=MAX_TASKS)
    image_size_gb: float = Field(DEFAULT_IMAGE_SIZE_GB, alias="image-size-gb", ge=0,
                                 le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False)
    # Pod-level rescheduling (issue 24): ranks of this job still running, which stay on
    # their nodes (their chips are not in the nodes' ``free``); the other ranks are placed
    # around them.  Upstream's job labels ``pod-rescheduling=on`` and
    # ``process-recover-enable=on`` and the rescheduler's ``PendingSessionNum``.
    running_ranks: dict[RankNumber, Name] = Field(default_factory=dict, alias="running-ranks",
                                                  max_length=MAX_TASKS)
    pod_rescheduling: bool = Field(False, alias="pod-rescheduling")
    process_recover: bool = Field(False, alias="process-recover")
    pending_sessions: int = Field(0, alias="pending-sessions", ge=0, le=MAX_PENDING_SESSIONS)
    # Inference paths: upstream's job label ``inferserviceid`` (A3, 850 and 950), and
    # MindIE's labels ``app`` and ``jobID`` with the ``matchLabels`` of the first preferred
    # pod-affinity term (A3 only).  ``labels`` are the job's own labels, matched by other
    # jobs' ``pod-affinity``.
    inferserviceid: Text | None = None
    app: Text | None = None
    job_id: Text | None = Field(None, alias="jobID")
    pod_affinity: dict[Text, Text] = Field(default_factory=dict, alias="pod-affinity",
                                           max_length=MAX_LABELS)
    # MindIE's super-pod order (upstream's job annotation ``sp-fit``): ``idlest`` takes
    # super pods with more free nodes first, else fewer first (reference §2.3.4)
    sp_fit: Literal["idlest"] | None = Field(None, alias="sp-fit")
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=MAX_LABELS)


class RunningJob(_Model):
    """A job already running (used by ``simulate`` and for a cache cold start)."""

    name: Name = Field(min_length=1)
    owner_uid: Name | None = Field(None, alias="owner-uid")
    policy: Text = "chip8-node8"
    npu_per_task: int = Field(8, alias="npu-per-task", gt=0, le=MAX_NODE_NPUS)
    ranks: dict[RankNumber, Name] = Field(default_factory=dict, max_length=MAX_TASKS)
    # The job's spec, so that ``simulate`` can evict and re-place it (all optional; the
    # meaning is the same as on Job).  ``tasks`` is the desired rank count (default: the
    # highest running rank + 1); ranks below it that are not running are pending.
    tasks: int | None = Field(None, ge=0, le=MAX_TASKS)
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    image_size_gb: float = Field(DEFAULT_IMAGE_SIZE_GB, alias="image-size-gb", ge=0,
                                 le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False)
    sp_block: int | None = Field(None, alias="sp-block")
    ra_block: int | None = Field(None, alias="ra-block")
    affinity_config: Text | None = Field(None, alias="affinity-config")
    super_pod_affinity: AffinityLabel = Field(SuperPodAffinity.HARD, alias="super-pod-affinity")
    ub_memory: bool = Field(False, alias="ub-memory")
    # Read by the inference paths of pending jobs (issue 24): a running job of the same
    # ``inferserviceid`` draws its service's next instances to its super pods / racks, and
    # its ``labels`` are matched by MindIE jobs' ``pod-affinity``.
    inferserviceid: Text | None = None
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=MAX_LABELS)
    # Upstream's pod-level switches: ``simulate`` deletes only a fault pod of such a job
    # and repairs the job around the running ones (issue 24).
    pod_rescheduling: bool = Field(False, alias="pod-rescheduling")
    process_recover: bool = Field(False, alias="process-recover")


class VnpuJob(_Model):
    """A pending dynamic-vNPU job (``huawei.com/npu-core``), one entry of ``vnpu-jobs``.

    Each task asks for ``ai-cores`` AI cores (with ``vnpu-level`` and ``vnpu-dvpp`` as the
    pod labels), or names a ``template`` of the node's table.
    """

    name: Name = Field(min_length=1)
    owner_uid: Name | None = Field(None, alias="owner-uid")
    tasks: int = Field(gt=0, le=MAX_TASKS)
    ai_cores: int | None = Field(None, alias="ai-cores", gt=0, le=MAX_NODE_NPUS * 32)
    template: Text | None = Field(None, min_length=1)
    vnpu_level: VnpuLevel = Field(VnpuLevel.LOW, alias="vnpu-level")
    vnpu_dvpp: VnpuDvpp = Field(VnpuDvpp.NULL, alias="vnpu-dvpp")
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    image_size_gb: float = Field(DEFAULT_IMAGE_SIZE_GB, alias="image-size-gb", ge=0,
                                 le=MAX_IMAGE_SIZE_GB, allow_inf_nan=False)

    @field_validator("vnpu_level", mode="before")
    @classmethod
    def _unknown_level_is_low(cls, value: Any) -> Any:
        # upstream: any vnpu-level other than "high" means "low"
        return VnpuLevel.HIGH if value == "high" else VnpuLevel.LOW


class Scenario(_Model):
    """One scheduling session frozen in a file."""

    now: int | None = Field(None, ge=0, le=MAX_TIMESTAMP)
    config: Config = Field(default_factory=Config)
    nodes: list[Node] = Field(default_factory=list, max_length=MAX_NODES)
    affinity_cache: AffinityCacheModel = Field(
        default_factory=AffinityCacheModel, alias="affinity-cache"
    )
    jobs: list[Job] = Field(default_factory=list, max_length=MAX_JOBS)
    running: list[RunningJob] = Field(default_factory=list, max_length=MAX_RUNNING_JOBS)
    vnpu_jobs: list[VnpuJob] = Field(default_factory=list, alias="vnpu-jobs",
                                     max_length=MAX_JOBS)

    def to_dict(self) -> dict[str, Any]:
        """Return the scenario with the contract's key names, for YAML/JSON output.

        The pod-level and inference fields (issue 24) are written only when set, so that
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
        return data
