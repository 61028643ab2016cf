"""The generators' parameters (:class:`GenParams`), families and constants, and a generated case."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from models.scenario import Family, Scenario

#: The generator families, in the order reports list them.
FAMILIES: tuple[str, ...] = ("a3", "850", "950", "multilevel", "ordinary")
#: Placement family of each generator family.
FAMILY_OF: dict[str, Family] = {
    "a3": Family.SUPERPOD,
    "850": Family.SUPERPOD,
    "950": Family.RACK,
    "multilevel": Family.MULTILEVEL,
    "ordinary": Family.ORDINARY,
}
#: Session time of every generated scenario (fixed for reproducibility).
NOW = 1_764_400_000
#: Label keys of the multilevel tree, level1 first.
ML_LABELS = (
    "huawei.com/topotree.rackid",
    "huawei.com/topotree.switchid",
    "huawei.com/topotree.spineid",
    "huawei.com/topotree.zoneid",
)
#: Children per multilevel domain: nodes per rack, racks per switch, switches per spine,
#: spines per zone.
ML_FANOUT = (8, 4, 8, 4)
A3_POD_NODES = 48
RESERVE_NODES = 2
RACK_NODES = 8
UB_RACKS = 16
#: Largest returning job, in nodes (upstream documents 4,000–5,000-pod jobs as its limit).
MAX_JOB_NODES = 2048
#: Heavy-tail ratio of fresh job sizes: ``P(2^k NPUs) ∝ HEAVY_TAIL ** k``.
HEAVY_TAIL = 0.6

FAMILY_CODE = {name: i for i, name in enumerate(FAMILIES)}
POLICY = {
    "a3": "chip2-node16-sp",
    "850": "chip8-node8-sp",
    "950": "chip8-node8-ra64-sp",
    "multilevel": "multilevel",
    "ordinary": "chip8-node8",
}
NODE_NPUS = {"a3": 16, "850": 8, "950": 8, "multilevel": 16, "ordinary": 8}


@dataclass(frozen=True)
class GenParams:
    """Parameters of one generated scenario.

    Attributes
    ----------
    family
        One of :data:`FAMILIES`.
    nodes
        Target cluster size; the cluster is rounded up to whole super pods / racks.
    seed
        Seed of the numpy generator.
    jobs
        Pending jobs: 1 for a single returning job, more for a batch.
    occupancy
        Share of the cluster used by other tenants (nodes; NPUs for ``ordinary``).
    subhealthy, unhealthy
        Shares of nodes drawn sub-healthy / unhealthy.
    returning
        Share of a batch's jobs that ran before (have cache entries); a single job always
        returns.
    evict_fraction
        Share of a returning job's ranks whose nodes a preemptor took.
    taken_fraction
        Probability that another tenant took each origin node.
    scale_change
        Probability that a returning job comes back scaled down or up.
    fault_prob
        Probability that a returning job has fault ranks.
    expired
        Probability that a returning job's cache entries have expired.
    soft_prob
        Probability of ``super-pod-affinity: soft`` for super-pod and 950 jobs.
    depth
        Multilevel tree depth (2–4); ``None`` picks it from the scale.
    pod_nodes
        Nodes per super pod (850/950); ``None`` picks it from the scale.
    history
        ``"auto"`` (greedy, else the simple layout), ``"greedy"`` or ``"layout"``.
    """

    family: str
    nodes: int = 64
    seed: int = 0
    jobs: int = 1
    occupancy: float = 0.35
    subhealthy: float = 0.03
    unhealthy: float = 0.01
    returning: float = 0.6
    evict_fraction: float = 0.1
    taken_fraction: float = 0.05
    scale_change: float = 0.15
    fault_prob: float = 0.25
    expired: float = 0.05
    soft_prob: float = 0.1
    depth: int | None = None
    pod_nodes: int | None = None
    history: str = "auto"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"unknown family '{self.family}'; choose one of "
                             f"{', '.join(FAMILIES)}")
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {self.jobs}")
        for name in ("occupancy", "subhealthy", "unhealthy", "returning", "evict_fraction",
                     "taken_fraction", "scale_change", "fault_prob", "expired", "soft_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.subhealthy + self.unhealthy > 1.0:
            raise ValueError("subhealthy + unhealthy must not exceed 1")
        if self.depth is not None and not 1 <= self.depth <= len(ML_LABELS):
            raise ValueError(f"depth must be in 1..{len(ML_LABELS)}, got {self.depth}")
        if self.pod_nodes is not None and not 1 <= self.pod_nodes <= 1024:
            raise ValueError(f"pod_nodes must be in 1..1024, got {self.pod_nodes}")
        if self.history not in ("auto", "greedy", "layout"):
            raise ValueError(f"history must be auto, greedy or layout, got {self.history!r}")

    @property
    def mix(self) -> str:
        """``single`` or ``batch``."""
        return "single" if self.jobs == 1 else "batch"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-friendly)."""
        return asdict(self)


@dataclass
class GeneratedCase:
    """A generated scenario with what the generator knows about it."""

    params: GenParams
    scenario: Scenario
    history_engine: str  # greedy | layout | mixed | none
    returning_jobs: int
    notes: list[str] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        """Nodes of the generated cluster."""
        return len(self.scenario.nodes)
