"""The workload SPEC of ``npu-place replay --workload SPEC.yaml``: a cluster and its day.

Example (every field below; defaults in the comments)::

    name: sharing-850                # the day's name (reports)
    hours: 24                        # length of the day (1..48)
    session-minutes: 10              # one scheduling session every ... minutes (1..120)
    cluster:
      pools:                         # node pools; names prefix their nodes ("sp-sp0-node-3")
        - {name: sp, family: "850", nodes: 64, pod-nodes: 16}
        - {name: ord, family: ordinary, nodes: 32}
        - {name: v, family: vnpu, nodes: 8, chip-kind: Ascend310P, chips: 4}
          # dynamic vNPU nodes ("v-node-0"): chips of AI cores (chip-kind's table; default
          # Ascend310P, 4 chips); they serve vNPU jobs only
      image-disk-gb: 300             # image disk per node, 1..100,000 (an assumption)
      pull-gb-per-minute: 2.0        # pull bandwidth per node, 0.01..1000 (RFC: 15-40 GB
                                     # in 5-20 min)
      gc: {high-percent: 85, low-percent: 80, min-age-seconds: 120}   # kubelet defaults
    images:                          # container images and their sizes
      - {name: llm-serve, size-gb: 22}
      - {name: llm-train, size-gb: 35}
    services:                        # inference: replicas follow a diurnal curve
      - name: chat
        image: llm-serve
        npu-per-pod: 8               # chip8-node8 pods (ordinary policy, any node)
        min-replicas: 4              # at the trough
        max-replicas: 12             # at a peak
        peak-hours: [11, 20]         # hours of the day (0..24); default [14]
        jitter: 0.05                 # relative noise of each session's demand (default 0)
        priority: 100
      - name: ocr                    # a vNPU service: each pod a slice of a vNPU chip
        image: ocr-serve
        ai-cores: 4                  # AI cores per pod (huawei.com/npu-core); needs a vnpu pool
        vnpu-level: low              # pod label vnpu-level (low/high; default low)
        vnpu-dvpp: "yes"             # pod label vnpu-dvpp (yes/no/null; default null)
        min-replicas: 2
        max-replicas: 8
    training:                        # gang arrivals (Poisson) per class
      - name: llm
        pool: sp                     # 850/950/a3/multilevel/ordinary pool the gangs use
        images: [llm-train]          # each gang picks one (uniformly)
        initial: 4                   # gangs submitted at the start of the day
        arrivals-per-hour: 1.5
        gang-nodes: {1: 0.40, 2: 0.25, 4: 0.18, 8: 0.12, 16: 0.05}   # weights 0..1e6
        duration-minutes: {median: 120, sigma: 1.0, min: 10, max: 1440}   # log-normal
        priority: 0
      - name: finetune               # on a vnpu pool: each rank a whole-card vNPU request
        pool: v
        images: [ft-train]
        chips-per-rank: 4            # whole chips per rank (vnpu pools; default: a node's)
        gang-nodes: {1: 0.6, 2: 0.4}
    reclaim: true                    # inference scale-up evicts training gangs (preempt/reclaim)
    faults:                          # per node-day / per pod-day
      node-fault-rate: 0.01          # node turns unhealthy; repaired after repair-minutes
      repair-minutes: 240
      subhealth-rate: 0.02           # node turns sub-healthy for subhealth-minutes
      subhealth-minutes: 120
      pod-fault-rate: 0.005          # one training rank fails (job-level rescheduling)

Bad specs are refused with :class:`models.validation.InputError`, one message per problem,
each naming the file and the field (``cluster.pools.0.nodes``).  Besides each field's range,
the bounds bound the work: the vnpu pools hold at most :data:`MAX_VNPU_CHIPS` chips, and
sessions x (nodes + vNPU chips) x pods (:data:`MAX_DAY_WORK`, ``WorkloadSpec._work_problems``)
is capped (``docs/unusual-input.md``).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from benchmarks.replay.images import (
    DEFAULT_GC_HIGH_PERCENT,
    DEFAULT_GC_LOW_PERCENT,
    DEFAULT_GC_MIN_AGE_SECONDS,
    DEFAULT_IMAGE_DISK_GB,
    DEFAULT_PULL_GB_PER_MINUTE,
    GcPolicy,
)
from models.errors import InputError
from models.limits import MAX_IMAGE_SIZE_GB, MAX_PRIORITY, Name
from models.scenario import MAX_NODE_NPUS, VnpuDvpp, VnpuJob, VnpuLevel
from models.vnpu_rules import CHIP_GEOMETRY, request_error

#: Pool families (the generators' families).
PoolFamily = Literal["a3", "850", "950", "multilevel", "ordinary", "vnpu"]
#: Families whose pools set the scheduler's ``super-pod-size`` (one such pool per day).
SUPER_POD_FAMILIES = ("a3", "850", "950")
#: Nodes per pool and per day (CI and the bundled days stay far below).
MAX_POOL_NODES = 4096
#: Gang sizes in nodes a training class may ask for.
MAX_GANG_NODES = 256
#: Largest weight of one gang size in ``gang-nodes`` (the weights are relative): finite
#: weights whose sum stays finite.
MAX_GANG_WEIGHT = 1e6
#: Slowest pull bandwidth per node (GB per minute): pull times stay finite.
MIN_PULL_GB_PER_MINUTE = 0.01
#: Smallest image disk per node (GB).
MIN_IMAGE_DISK_GB = 1.0
#: Chips on all vnpu pools of a day (4,096 nodes of the default 4 chips): each chip is a
#: record the simulation keeps and the vNPU placement visits.
MAX_VNPU_CHIPS = 16_384
#: The day's work bound: sessions x places (nodes plus vNPU chips) x pods (services at
#: their maximum plus the training gangs' ranks: initial and arriving gangs at their
#: largest size).  The bundled days are below 10^7; a 4,096-node, 144-session day with
#: 3,000 pods is 1.8 x 10^9.
MAX_DAY_WORK = 2 * 10**9

#: Default gang size histogram (nodes -> weight).  A hand-written histogram with the shape
#: the public traces report for multi-node jobs (SenseTime Helios, SC'21, ``node_num`` of
#: 3.36 M jobs; Shanghai AI Lab Acme, NSDI'24, ``node_num`` of 880 k jobs; both CC BY 4.0):
#: small gangs are the most frequent, a few large gangs hold much of the capacity.  Not a fit.
DEFAULT_GANG_NODES: dict[int, float] = {1: 0.40, 2: 0.25, 4: 0.18, 8: 0.12, 16: 0.05}
#: Chip kind and chips per node of a vnpu pool by default (Atlas 300I Duo: 4 x 310P).
DEFAULT_VNPU_CHIP_KIND = "Ascend310P"
DEFAULT_VNPU_CHIPS = 4


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Pool(_Spec):
    """A node pool of one family."""

    name: Name = Field(min_length=1, max_length=20, pattern=r"^[a-z0-9][a-z0-9-]*$")
    family: PoolFamily
    nodes: int = Field(ge=1, le=MAX_POOL_NODES)
    pod_nodes: int | None = Field(None, alias="pod-nodes", ge=8, le=1024)
    depth: int | None = Field(None, ge=2, le=4)
    chip_kind: str | None = Field(None, alias="chip-kind", min_length=1, max_length=40)
    chips: int | None = Field(None, ge=1, le=MAX_NODE_NPUS)

    @model_validator(mode="after")
    def _vnpu(self) -> Pool:
        if self.family != "vnpu":
            given = [k for k, v in (("chip-kind", self.chip_kind), ("chips", self.chips))
                     if v is not None]
            if given:
                raise ValueError(f"{' and '.join(given)} apply to family vnpu only (this pool "
                                 f"is {self.family})")
        elif self.chip_kind is not None and self.chip_kind not in CHIP_GEOMETRY:
            raise ValueError(f"chip-kind '{self.chip_kind}' is not a dynamic-vNPU chip kind "
                             f"(known: {', '.join(CHIP_GEOMETRY)})")
        return self

    @property
    def vnpu_kind(self) -> str:
        """The chip kind of a vnpu pool (default Ascend310P)."""
        return self.chip_kind or DEFAULT_VNPU_CHIP_KIND

    @property
    def vnpu_chips(self) -> int:
        """Chips per node of a vnpu pool (default 4, an Atlas 300I Duo server)."""
        return self.chips or DEFAULT_VNPU_CHIPS


class Gc(_Spec):
    """Image GC thresholds (kubelet defaults)."""

    high_percent: float = Field(DEFAULT_GC_HIGH_PERCENT, alias="high-percent", gt=0, le=100)
    low_percent: float = Field(DEFAULT_GC_LOW_PERCENT, alias="low-percent", ge=0, lt=100)
    min_age_seconds: int = Field(DEFAULT_GC_MIN_AGE_SECONDS, alias="min-age-seconds", ge=0,
                                 le=86400)

    @model_validator(mode="after")
    def _order(self) -> Gc:
        if self.low_percent >= self.high_percent:
            raise ValueError(f"low-percent {self.low_percent:g} must be below high-percent "
                             f"{self.high_percent:g}")
        return self

    def policy(self) -> GcPolicy:
        """As a :class:`GcPolicy`."""
        return GcPolicy(self.high_percent, self.low_percent, self.min_age_seconds)


class Cluster(_Spec):
    """The nodes, their image disks and their pull bandwidth."""

    pools: list[Pool] = Field(min_length=1, max_length=8)
    image_disk_gb: float = Field(DEFAULT_IMAGE_DISK_GB, alias="image-disk-gb",
                                 ge=MIN_IMAGE_DISK_GB, le=100_000)
    pull_gb_per_minute: float = Field(DEFAULT_PULL_GB_PER_MINUTE, alias="pull-gb-per-minute",
                                      ge=MIN_PULL_GB_PER_MINUTE, le=1000)
    gc: Gc = Field(default_factory=Gc)

    @model_validator(mode="after")
    def _pools(self) -> Cluster:
        names = [p.name for p in self.pools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"pool names must be unique: {', '.join(twice)} twice")
        sp = [p.name for p in self.pools if p.family in SUPER_POD_FAMILIES]
        if len(sp) > 1:
            raise ValueError(f"at most one a3/850/950 pool (they set the scheduler's one "
                             f"super-pod-size): {', '.join(sp)}")
        ml = [p.name for p in self.pools if p.family == "multilevel"]
        if len(ml) > 1:
            raise ValueError(f"at most one multilevel pool: {', '.join(ml)}")
        if sum(p.nodes for p in self.pools) > MAX_POOL_NODES:
            raise ValueError(f"at most {MAX_POOL_NODES} nodes in all pools")
        if self.vnpu_chips > MAX_VNPU_CHIPS:
            shown = ", ".join(f"'{p.name}' {p.nodes} x {p.vnpu_chips}" for p in self.pools
                              if p.family == "vnpu")
            raise ValueError(f"the vnpu pools hold {self.vnpu_chips:,} chips (nodes x chips: "
                             f"{shown}); at most {MAX_VNPU_CHIPS:,}")
        return self

    @property
    def vnpu_chips(self) -> int:
        """Chips on all vnpu pools."""
        return sum(p.nodes * p.vnpu_chips for p in self.pools if p.family == "vnpu")


class Image(_Spec):
    """A container image."""

    name: Name = Field(min_length=1)
    size_gb: float = Field(alias="size-gb", gt=0, le=MAX_IMAGE_SIZE_GB)


class Service(_Spec):
    """An inference service whose replicas follow a diurnal curve."""

    name: Name = Field(min_length=1, max_length=40, pattern=r"^[a-z0-9][a-z0-9-]*$")
    image: Name
    npu_per_pod: Literal[1, 2, 4, 8] = Field(8, alias="npu-per-pod")
    min_replicas: int = Field(alias="min-replicas", ge=0, le=512)
    max_replicas: int = Field(alias="max-replicas", ge=1, le=512)
    peak_hours: list[float] = Field(default_factory=lambda: [14.0], alias="peak-hours",
                                    min_length=1, max_length=6)
    jitter: float = Field(0.0, ge=0, le=1)
    priority: int = Field(100, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    ai_cores: int | None = Field(None, alias="ai-cores", gt=0, le=MAX_NODE_NPUS * 32)
    vnpu_level: VnpuLevel | None = Field(None, alias="vnpu-level")
    vnpu_dvpp: VnpuDvpp | None = Field(None, alias="vnpu-dvpp")

    @property
    def is_vnpu(self) -> bool:
        """A vNPU service (``ai-cores`` given): its pods are slices on vnpu pools."""
        return self.ai_cores is not None

    def vnpu_job(self, name: str, tasks: int, image_size_gb: float,
                 image: str | None = None) -> VnpuJob:
        """The service as a ``vnpu-jobs`` entry of ``tasks`` pods (running ``image``)."""
        return VnpuJob.model_validate({
            "name": name, "owner-uid": f"rs-{self.name}", "tasks": tasks,
            "ai-cores": self.ai_cores, "vnpu-level": self.vnpu_level or VnpuLevel.LOW,
            "vnpu-dvpp": self.vnpu_dvpp or VnpuDvpp.NULL, "priority": self.priority,
            "image-size-gb": image_size_gb}
            | ({"image": {"name": image, "size-gb": image_size_gb}} if image else {}))

    @model_validator(mode="after")
    def _replicas(self) -> Service:
        if self.ai_cores is None:
            given = [k for k, v in (("vnpu-level", self.vnpu_level),
                                    ("vnpu-dvpp", self.vnpu_dvpp)) if v is not None]
            if given:
                raise ValueError(f"{' and '.join(given)} apply to vNPU services only (give "
                                 "ai-cores)")
        elif "npu_per_pod" in self.model_fields_set:
            raise ValueError("a vNPU service (ai-cores) takes no npu-per-pod")
        bad = [h for h in self.peak_hours if not 0 <= h <= 24]
        if bad:
            raise ValueError(f"peak-hours {bad} must be hours of the day (0..24)")
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min-replicas {self.min_replicas} exceeds max-replicas "
                             f"{self.max_replicas}")
        return self


class Duration(_Spec):
    """A log-normal duration in minutes, clamped to ``[min, max]``."""

    median: float = Field(120.0, gt=0, le=10_080)
    sigma: float = Field(1.0, ge=0, le=4)
    min: float = Field(10.0, gt=0, le=10_080)
    max: float = Field(1440.0, gt=0, le=10_080)

    @model_validator(mode="after")
    def _bounds(self) -> Duration:
        if self.min > self.max:
            raise ValueError(f"min {self.min:g} exceeds max {self.max:g}")
        return self


class Training(_Spec):
    """A class of training gangs arriving through the day."""

    name: Name = Field(min_length=1, max_length=40, pattern=r"^[a-z0-9][a-z0-9-]*$")
    pool: Name
    images: list[Name] = Field(min_length=1, max_length=64)
    initial: int = Field(0, ge=0, le=256)
    arrivals_per_hour: float = Field(1.0, alias="arrivals-per-hour", ge=0, le=100)
    gang_nodes: dict[int, float] = Field(default_factory=lambda: dict(DEFAULT_GANG_NODES),
                                         alias="gang-nodes", min_length=1, max_length=16)
    duration_minutes: Duration = Field(default_factory=Duration,
                                       alias="duration-minutes")
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    chips_per_rank: int | None = Field(None, alias="chips-per-rank", ge=1, le=MAX_NODE_NPUS)

    @field_validator("gang_nodes")
    @classmethod
    def _gangs(cls, value: dict[int, float]) -> dict[int, float]:
        for size, weight in value.items():
            if not 1 <= size <= MAX_GANG_NODES or size & (size - 1):
                raise ValueError(f"size {size} must be a power of two in 1..{MAX_GANG_NODES}")
            if not 0 <= weight <= MAX_GANG_WEIGHT:
                raise ValueError(f"the weight of size {size} must be in 0..{MAX_GANG_WEIGHT:g} "
                                 f"(got {weight:g})")
        if not sum(value.values()) > 0:
            raise ValueError("the weights sum to 0")
        return value


class Faults(_Spec):
    """Fault rates (per node-day, per pod-day) and repair times."""

    node_fault_rate: float = Field(0.0, alias="node-fault-rate", ge=0, le=10)
    repair_minutes: float = Field(240.0, alias="repair-minutes", gt=0, le=10_080)
    subhealth_rate: float = Field(0.0, alias="subhealth-rate", ge=0, le=10)
    subhealth_minutes: float = Field(120.0, alias="subhealth-minutes", gt=0, le=10_080)
    pod_fault_rate: float = Field(0.0, alias="pod-fault-rate", ge=0, le=10)


class WorkloadSpec(_Spec):
    """A cluster and the day replayed on it."""

    name: Name = Field(min_length=1, max_length=60)
    description: str = Field("", max_length=2000)
    hours: float = Field(24.0, ge=0.1, le=48)
    session_minutes: int = Field(10, alias="session-minutes", ge=1, le=120)
    cluster: Cluster
    images: list[Image] = Field(min_length=1, max_length=256)
    services: list[Service] = Field(default_factory=list, max_length=64)
    training: list[Training] = Field(default_factory=list, max_length=16)
    reclaim: bool = True
    faults: Faults = Field(default_factory=Faults)

    @model_validator(mode="after")
    def _references(self) -> WorkloadSpec:
        images = {i.name for i in self.images}
        problems: list[str] = []
        names = [i.name for i in self.images]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"images: names must be unique: {', '.join(twice)} twice")
        pools = {p.name: p for p in self.cluster.pools}
        jobs = [s.name for s in self.services] + [t.name for t in self.training]
        twice = sorted({n for n in jobs if jobs.count(n) > 1})
        if twice:
            problems.append(f"services/training: names must be unique: {', '.join(twice)}")
        vnpu_pools = [p for p in self.cluster.pools if p.family == "vnpu"]
        for k, service in enumerate(self.services):
            if service.image not in images:
                problems.append(f"services.{k}.image: unknown image '{service.image}'")
            if not service.is_vnpu:
                continue
            if not vnpu_pools:
                problems.append(f"services.{k}.ai-cores: a vNPU service needs a pool of "
                                "family vnpu")
            probe = service.vnpu_job("probe", 1, 0.0)
            for vpool in vnpu_pools:
                text = request_error(probe, vpool.vnpu_kind)
                if text is not None:
                    problems.append(f"services.{k}.ai-cores: {service.ai_cores} AI cores do "
                                    f"not fit the {vpool.vnpu_kind} chips of pool "
                                    f"'{vpool.name}' ({text.replace('probe', service.name)})")
        for k, train in enumerate(self.training):
            for image in train.images:
                if image not in images:
                    problems.append(f"training.{k}.images: unknown image '{image}'")
            pool = pools.get(train.pool)
            if pool is None:
                problems.append(f"training.{k}.pool: unknown pool '{train.pool}' (pools: "
                                f"{', '.join(pools)})")
                continue
            if pool.family == "vnpu":
                chips = train.chips_per_rank or pool.vnpu_chips
                if chips > pool.vnpu_chips:
                    problems.append(f"training.{k}.chips-per-rank: {chips} chips per rank, "
                                    f"but the nodes of pool '{pool.name}' have "
                                    f"{pool.vnpu_chips}")
            elif train.chips_per_rank is not None:
                problems.append(f"training.{k}.chips-per-rank: applies to a vnpu pool only "
                                f"(pool '{pool.name}' is {pool.family})")
            limit = _largest_gang(pool)
            big = sorted(s for s in train.gang_nodes if s > limit)
            if big:
                problems.append(f"training.{k}.gang-nodes: sizes {big} do not fit pool "
                                f"'{pool.name}' (largest gang there: {limit} nodes)")
        if not problems:
            problems.extend(self._work_problems())
        if problems:
            raise ValueError("\n".join(problems))  # "path: text" lines (see load_spec)
        return self

    def _work_problems(self) -> list[str]:
        """The day's work bound (:data:`MAX_DAY_WORK`), as "path: text" lines."""
        places = sum(p.nodes for p in self.cluster.pools) + self.cluster.vnpu_chips
        service_pods = sum(s.max_replicas for s in self.services)
        training_pods = sum((t.initial + math.ceil(t.arrivals_per_hour * self.hours))
                            * max(t.gang_nodes) for t in self.training)
        work = self.sessions * places * (service_pods + training_pods)
        if work <= MAX_DAY_WORK:
            return []
        return [f"hours: the day's work is {self.sessions:,} sessions x {places:,} nodes and "
                f"vNPU chips (cluster.pools) x {service_pods + training_pods:,} pods "
                f"({service_pods:,} services.max-replicas, {training_pods:,} training gang "
                f"ranks: initial and arrivals-per-hour x hours at the largest gang-nodes) = "
                f"{work:,}; at most {MAX_DAY_WORK:,}: shorten the day, lengthen "
                "session-minutes, or use fewer nodes, chips, replicas or gangs"]

    @property
    def sessions(self) -> int:
        """Sessions of the day."""
        return max(1, int(self.hours * 60 // self.session_minutes))


def default_pod_nodes(pool: Pool) -> int:
    """Nodes per super pod of an a3/850/950 pool (48 for A3; else 16/64 or the pool)."""
    if pool.family == "a3":
        return 48
    if pool.pod_nodes is not None:
        return pool.pod_nodes
    return min(pool.nodes, 16 if pool.family == "850" else 64)


def _largest_gang(pool: Pool) -> int:
    """Largest gang (nodes) that fits one pool."""
    if pool.family in ("a3", "850"):
        return max(1, default_pod_nodes(pool) - 2)  # the reserve of two nodes
    if pool.family == "950":
        return min(pool.nodes, default_pod_nodes(pool))
    if pool.family == "multilevel":
        return 16  # level1=4 in racks of 8 (reservedNode 1), level2 within one switch
    return pool.nodes  # ordinary and vnpu pools


def load_spec(data: Any, source: str) -> WorkloadSpec:
    """Validate a spec document.

    Raises
    ------
    InputError
        One message per problem, naming ``source`` and the field.
    """
    if not isinstance(data, dict):
        raise InputError([f"{source}: expected a mapping (name, cluster, images, ...) at the "
                          f"top level, got {type(data).__name__}"])
    try:
        return WorkloadSpec.model_validate(data)
    except ValidationError as exc:
        messages = []
        for error in exc.errors():
            loc = ".".join(str(p) for p in error["loc"])
            text = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "value_error" and not loc:
                # the cross-reference checks give "path: text" lines
                for line in text.splitlines():
                    path, _, rest = line.partition(": ")
                    messages.append(f"{source}: field '{path}': {rest}")
                continue
            loc = loc or "(the spec)"
            if error["type"] == "extra_forbidden":
                text = "unknown field (check the spelling against the workload format)"
            elif "input" in error and error["type"] not in ("missing", "value_error"):
                shown = repr(error["input"])
                if len(shown) <= 60:
                    text = f"{text} (got {shown})"
            messages.append(f"{source}: field '{loc}': {text}")
        raise InputError(messages) from None
