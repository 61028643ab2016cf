"""Seeded generators of realistic Ascend NPU clusters, caches and pending jobs.

Every generator takes a :class:`GenParams` (family, scale, seed and the knobs below) and
returns a :class:`models.scenario.Scenario` that passes input validation.  All randomness
comes from one ``numpy.random.Generator`` seeded with ``SeedSequence([seed, family,
nodes, jobs])``, so a scenario is a pure function of its parameters (and of the greedy
engine's code, when the earlier placement is made by greedy; see below).

Families
--------
``a3``
    Atlas 900 A3 SuperPoD, policy ``chip2-node16-sp``: super pods of 48 nodes × 16 dies,
    ``super-pod-size`` 48, ``reserve-nodes`` 2.
``850``
    Atlas 850 SuperPoD, policy ``chip8-node8-sp``: 8 NPUs per node, super pods of 16 to
    128 nodes (one 5808 switch holds 16 servers; two switch layers give the 1K-NPU super
    pod), ``reserve-nodes`` 2.
``950``
    Atlas 950 SuperPoD, policy ``chip8-node8-ra64-sp``: racks of 8 nodes × 8 NPUs,
    super pods of up to 1,024 nodes (``super-pod-size`` set to the pod size, inside the
    valid range [1, 1024]), UB-memory domains of 16 consecutive racks.
``multilevel``
    16-NPU nodes under a 2–4 level ``resource-level-config`` tree: level1 = rack
    (8 nodes, ``reservedNode`` 1), level2 = switch (4 racks), level3 = spine (8 switches),
    level4 = zone (4 spines), labelled ``huawei.com/topotree.rackid`` / ``.switchid`` /
    ``.spineid`` / ``.zoneid``.
``ordinary``
    Atlas 800T A2 style ``chip8-node8`` nodes; ranks may share nodes.

How a scenario is made
----------------------
1. The clean cluster of the family at the requested scale (all nodes free and healthy).
2. The *earlier placement*: the returning jobs, at their original sizes, are placed on the
   clean cluster by the greedy engine (``solve(..., engine="greedy")``).  When greedy does
   not support the family yet (``EngineNotAvailable``), or leaves a job unplaced, a simple
   valid layout (first fit in topology order from a random starting domain) places it
   instead; every earlier placement is checked by :func:`models.check.check`.  Each rank's
   node is recorded in the affinity cache, as upstream's ``RecordAssignment`` does.
3. Other tenants occupy ``occupancy`` of the cluster (nodes for whole-node families, NPUs
   for ordinary nodes) on the nodes the returning jobs did not use, in runs of
   consecutive nodes (tenant jobs are gangs too), some nodes only partly.
4. The returning jobs are evicted (they are pending again; upstream keeps their cache
   entries on eviction) and events happen:

   * **eviction of a fraction of ranks** (``evict_fraction``): a preemptor took the nodes
     of a consecutive range of ranks and still runs there;
   * **other jobs take origin nodes** (``taken_fraction``): each origin node is taken
     (wholly or partly) by another tenant with this probability;
   * **scale-down / scale-up** (``scale_change``): the job comes back with a quarter fewer
     or more ranks, in whole blocks (cached ranks beyond the new size are ignored; new
     ranks have no entry);
   * **node faults with fault ranks** (``fault_prob``): one or a few ranks failed; they are
     listed in ``fault-ranks`` and their node turned unhealthy (50 %), sub-healthy (25 %)
     or stayed healthy (25 %: the pod failed, not the node);
   * **expired cache** (``expired``): the owner's entries are older than the TTL.

5. The health mix is drawn over all nodes (default 3 % sub-healthy, 1 % unhealthy).
6. Fresh jobs (no cache) complete the batch; jobs get priorities 0, 5 or 10.

Gang sizes (approximations of published traces)
------------------------------------------------
The traces we lean on report GPU counts per job, not NPU gangs, and we do not fit them;
we only reproduce their qualitative shape, as an approximation:

* Microsoft Philly (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for
  DNN Training Workloads", USENIX ATC'19; public subset of 117,325 jobs submitted
  Aug–Dec 2017): gang-scheduled DNN training jobs, most of which use a single GPU or a
  single server, with a minority of multi-server jobs.
* Alibaba PAI (Weng et al., "MLaaS in the Wild", USENIX NSDI'22; trace
  ``cluster-trace-gpu-v2020``, about 6,500 GPUs on about 1,800 machines, July–August
  2020): a mix of training and inference jobs whose GPU requests span orders of
  magnitude, most of them small.

So fresh jobs request ``2^k`` NPUs with ``P(k) ∝ 0.6^k`` (heavy tail: about four jobs in
five need at most 4 NPUs, yet sizes reach hundreds of nodes), at most an eighth of the
usable cluster.  Returning jobs — the large distributed training jobs the origin-node RFC
is about — get ``2^k`` nodes with ``k`` uniform (log-uniform sizes), at most half the
usable cluster for a single job and a quarter in a batch, and at most 2,048 nodes.  Jobs
below one node's NPUs become single-task jobs, as upstream allows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from models.check import check
from models.compiled import compile_scenario
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import DEFAULT_CACHE_TTL_SECONDS, TOPOTREE_LABEL, Family, Scenario

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

_FAMILY_CODE = {name: i for i, name in enumerate(FAMILIES)}
_POLICY = {
    "a3": "chip2-node16-sp",
    "850": "chip8-node8-sp",
    "950": "chip8-node8-ra64-sp",
    "multilevel": "multilevel",
    "ordinary": "chip8-node8",
}
_NODE_NPUS = {"a3": 16, "850": 8, "950": 8, "multilevel": 16, "ordinary": 8}


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


# --------------------------------------------------------------------------- topology


@dataclass
class _Topology:
    family: str
    names: list[str]
    npus: np.ndarray
    super_pod: np.ndarray  # -1: none
    rack: np.ndarray  # -1: none
    labels: list[dict[str, str]] | None
    config: dict[str, Any]
    pod_nodes: int
    depth: int
    domain: list[np.ndarray]  # multilevel: level-i domain index per node (i = 0..depth-1)

    @property
    def size(self) -> int:
        return len(self.names)


def default_pod_nodes(family: str, nodes: int) -> int:
    """Nodes per super pod the generator uses at a scale (850/950; A3 is always 48)."""
    if family == "a3":
        return A3_POD_NODES
    if family == "850":
        return int(min(128, max(16, 2 ** math.floor(math.log2(max(1, nodes // 4))))))
    if family == "950":
        return int(min(1024, max(64, 2 ** math.floor(math.log2(max(1, nodes // 2))))))
    return 0


def default_depth(nodes: int) -> int:
    """Multilevel tree depth the generator uses at a scale."""
    if nodes <= 128:
        return 2
    if nodes <= 2048:
        return 3
    return 4


def _build_topology(params: GenParams) -> _Topology:
    family = params.family
    npus_per = _NODE_NPUS[family]
    labels: list[dict[str, str]] | None = None
    domain: list[np.ndarray] = []
    depth = 0
    config: dict[str, Any] = {"prefer-previous-node": True}
    if family in ("a3", "850", "950"):
        pod = params.pod_nodes or default_pod_nodes(family, params.nodes)
        if family == "a3":
            pod = params.pod_nodes or A3_POD_NODES
        if family == "950":
            pod = max(RACK_NODES, pod - pod % RACK_NODES)
        pods = max(1, math.ceil(params.nodes / pod))
        count = pods * pod
        index = np.arange(count)
        super_pod = (index // pod).astype(np.int32)
        local = index % pod
        if family == "950":
            rack = (index // RACK_NODES).astype(np.int32)
            names = [f"sp{p}-r{r}-n{i}" for p, r, i in
                     zip(super_pod.tolist(), rack.tolist(), (local % RACK_NODES).tolist(),
                         strict=True)]
        else:
            rack = np.full(count, -1, dtype=np.int32)
            prefix = "a3-sp" if family == "a3" else "sp"
            names = [f"{prefix}{p}-node-{i}" for p, i in
                     zip(super_pod.tolist(), local.tolist(), strict=True)]
        config["super-pod-size"] = pod
        config["reserve-nodes"] = RESERVE_NODES
    elif family == "multilevel":
        depth = params.depth or default_depth(params.nodes)
        racks = max(1, math.ceil(params.nodes / ML_FANOUT[0]))
        count = racks * ML_FANOUT[0]
        index = np.arange(count)
        span = 1
        for level in range(depth):
            span *= ML_FANOUT[level]
            domain.append((index // span).astype(np.int32))
        kinds = ("rack", "sw", "spine", "zone")
        labels = []
        for n in range(count):
            node_labels = {TOPOTREE_LABEL: "default"}
            for level in range(depth):
                node_labels[ML_LABELS[level]] = f"{kinds[level]}-{int(domain[level][n])}"
            labels.append(node_labels)
        names = [f"r{int(domain[0][n])}-n{n % ML_FANOUT[0]}" for n in range(count)]
        super_pod = np.full(count, -1, dtype=np.int32)
        rack = np.full(count, -1, dtype=np.int32)
        levels: dict[str, Any] = {}
        for level in range(depth):
            spec: dict[str, Any] = {"label": ML_LABELS[level]}
            if level == 0:
                spec["reservedNode"] = 1
            levels[f"level{level + 1}"] = spec
        config["resource-level-config"] = {"default": levels}
        pod = 0
    else:
        count = params.nodes
        names = [f"node-{i}" for i in range(count)]
        super_pod = np.full(count, -1, dtype=np.int32)
        rack = np.full(count, -1, dtype=np.int32)
        pod = 0
    return _Topology(
        family=family,
        names=names,
        npus=np.full(len(names), npus_per, dtype=np.int32),
        super_pod=super_pod,
        rack=rack,
        labels=labels,
        config=config,
        pod_nodes=pod,
        depth=depth,
        domain=domain,
    )


# --------------------------------------------------------------------------- jobs


@dataclass
class _JobSpec:
    name: str
    owner: str
    policy: str
    tasks: int
    npu_per_task: int
    sp_block: int | None = None  # NPUs
    ra_block: int | None = None  # NPUs
    levels: tuple[int, ...] = ()
    soft: bool = False
    ub_memory: bool = False
    priority: int = 0
    fault_ranks: list[int] = field(default_factory=list)

    @property
    def whole_node(self) -> bool:
        return self.policy == "multilevel" or (
            self.policy != "chip8-node8" and self.tasks > 1
        )

    @property
    def unit(self) -> int:
        """Rank granularity a scale change keeps (blocks / top groups)."""
        if self.levels:
            return self.levels[-1]
        if self.sp_block is not None and self.tasks > 1:
            return max(1, self.sp_block // self.npu_per_task)
        return 1

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "owner-uid": self.owner,
            "policy": self.policy,
            "tasks": self.tasks,
            "npu-per-task": self.npu_per_task,
        }
        if self.sp_block is not None:
            data["sp-block"] = self.sp_block
        if self.ra_block is not None:
            data["ra-block"] = self.ra_block
        if self.levels:
            data["affinity-config"] = ",".join(
                f"level{i}={a}" for i, a in enumerate(self.levels, start=1)
            )
        if self.soft:
            data["super-pod-affinity"] = "soft"
        if self.ub_memory:
            data["ub-memory"] = True
        if self.priority:
            data["priority"] = self.priority
        if self.fault_ranks:
            data["fault-ranks"] = sorted(self.fault_ranks)
        return data


def _pow2_floor(value: float) -> int:
    return 1 if value < 2 else 2 ** math.floor(math.log2(value))


def heavy_tail_npus(rng: np.random.Generator, max_npus: int) -> int:
    """A fresh job's NPU count: ``2^k`` with ``P(k) ∝ 0.6^k``, ``2^k ≤ max_npus``."""
    top = int(math.log2(_pow2_floor(max(1, max_npus))))
    weights = HEAVY_TAIL ** np.arange(top + 1)
    k = int(rng.choice(top + 1, p=weights / weights.sum()))
    return int(2**k)


def log_uniform_nodes(rng: np.random.Generator, low: int, high: int) -> int:
    """``2^k`` nodes with ``k`` uniform over ``[log2 low, log2 high]`` (powers of two)."""
    lo = int(math.log2(_pow2_floor(max(1, low))))
    hi = max(lo, int(math.log2(_pow2_floor(max(1, high)))))
    return int(2 ** int(rng.integers(lo, hi + 1)))


def _usable_nodes(topo: _Topology) -> int:
    if topo.family in ("a3", "850"):
        pods = topo.size // topo.pod_nodes
        return pods * max(1, topo.pod_nodes - RESERVE_NODES)
    if topo.family == "multilevel":
        return topo.size * (ML_FANOUT[0] - 1) // ML_FANOUT[0]
    return topo.size


def _make_job(topo: _Topology, rng: np.random.Generator, total_npus: int, soft_prob: float,
              name: str, owner: str) -> _JobSpec:
    """A valid job of the family asking for about ``total_npus`` NPUs."""
    family = topo.family
    node_npus = int(topo.npus[0])
    policy = _POLICY[family]
    soft = family in ("a3", "850", "950") and bool(rng.random() < soft_prob)
    if family == "ordinary":
        if total_npus <= node_npus:
            if rng.random() < 0.3:  # an inference service: small replicas
                npt = int(rng.choice([1, 2]))
                tasks = int(rng.choice([2, 4, 8]))
            else:
                npt, tasks = total_npus, 1
        else:
            npt, tasks = node_npus, total_npus // node_npus
        return _JobSpec(name, owner, policy, tasks, npt)
    if family == "multilevel":
        n = max(1, total_npus // node_npus)
        levels = _multilevel_levels(topo, rng, n)
        return _JobSpec(name, owner, policy, n, node_npus, levels=levels)
    if total_npus < node_npus or (total_npus == node_npus and rng.random() < 0.5):
        # a single-task super-pod job: sp-block equals its request
        npt = total_npus
        return _JobSpec(name, owner, policy, 1, npt, sp_block=npt, soft=soft)
    n = total_npus // node_npus
    limit = topo.pod_nodes - (RESERVE_NODES if family in ("a3", "850") else 0)
    if family == "950":
        tp = int(rng.choice([t for t in (1, 2, 4, 8) if t <= n]))
        blocks = [b for b in (tp, 2 * tp, 4 * tp, 8 * tp, 16 * tp, 32 * tp)
                  if b <= min(n, limit, 256)]
        sp = int(rng.choice(blocks)) if blocks else tp
        ub = n > 1 and n * node_npus <= 1024 and bool(rng.random() < 0.2)
        return _JobSpec(name, owner, policy, n, node_npus, sp_block=sp * node_npus,
                        ra_block=tp * RACK_NODES, soft=soft, ub_memory=ub)
    choices = [b for b in (2, 4, 8, 16, 32) if b <= min(n, limit)] or [1]
    sp = int(rng.choice(choices))
    return _JobSpec(name, owner, policy, n, node_npus, sp_block=sp * node_npus, soft=soft)


def _multilevel_levels(topo: _Topology, rng: np.random.Generator, n: int) -> tuple[int, ...]:
    """``a1..aK`` for an ``n``-node job: powers of two, nested, within domain sizes."""
    if n == 1:
        return (1,)
    k = int(rng.integers(1, topo.depth + 1)) if rng.random() < 0.3 else topo.depth
    levels = [min(n, int(rng.choice([2, 4])))]
    span = ML_FANOUT[0]
    for level in range(1, k):
        span *= ML_FANOUT[level]
        cap = _pow2_floor(span * (ML_FANOUT[0] - 1) / ML_FANOUT[0] / 2)
        value = min(n, levels[-1] * int(rng.choice([2, 4])), max(levels[-1], cap))
        levels.append(value)
    return tuple(levels)


def _resize(job: _JobSpec, rng: np.random.Generator, max_nodes: int) -> None:
    """Scale a returning job down or up by about a quarter, in whole units."""
    unit = job.unit
    if job.tasks < 2:
        return
    step = unit * max(1, math.ceil(0.25 * job.tasks / unit))
    down = bool(rng.random() < 0.5)
    if down and job.tasks - step >= unit:
        job.tasks -= step
    elif job.tasks + step <= max_nodes and not (
        job.ub_memory and (job.tasks + step) * job.npu_per_task > 1024
    ):
        job.tasks += step
    elif job.tasks - step >= unit:
        job.tasks -= step


# --------------------------------------------------------------------------- layout


def _layout(topo: _Topology, job: _JobSpec, free: np.ndarray, rng: np.random.Generator
            ) -> list[int] | None:
    """A simple valid placement of ``job`` on ``free`` (healthy nodes), or None.

    First fit in natural node order (generated clusters list nodes in natural order, so
    this is ascending node index), starting from a random domain and wrapping around, so
    that earlier placements spread over the cluster.
    """
    npt = job.npu_per_task
    whole = free == topo.npus
    if not job.whole_node:
        eligible = free >= npt
        if topo.family in ("a3", "850", "950"):
            eligible &= topo.super_pod >= 0
        start = int(rng.integers(topo.size))
        order = np.roll(np.arange(topo.size), -start)[np.roll(eligible, -start)].tolist()
        left = free.copy()
        out: list[int] = []
        pos = 0
        for _ in range(job.tasks):
            # a node that could not take a rank never can again: `left` only decreases
            while pos < len(order) and left[order[pos]] < npt:
                pos += 1
            if pos == len(order):
                return None
            left[order[pos]] -= npt
            out.append(order[pos])
        return out
    if topo.family in ("a3", "850"):
        sp = (job.sp_block or job.tasks * npt) // npt
        return _layout_blocks(topo, whole, job.tasks, sp, 1, rng)
    if topo.family == "950":
        sp = (job.sp_block or job.tasks * npt) // npt
        tp = max(1, ((job.ra_block or 8) + RACK_NODES - 1) // RACK_NODES)
        if job.ub_memory:
            domains = (topo.rack // UB_RACKS).astype(np.int64)
            count = int(domains.max()) + 1
            first = int(rng.integers(count))
            # UB-memory domains in ascending id from a random start, wrapping around
            for d in [(first + i) % count for i in range(count)]:
                got = _layout_blocks(topo, whole & (domains == d), job.tasks, sp, tp, rng)
                if got is not None:
                    return got
            return None
        return _layout_blocks(topo, whole, job.tasks, sp, tp, rng)
    return _layout_multilevel(topo, job, whole, rng)


def _layout_blocks(topo: _Topology, mask: np.ndarray, tasks: int, sp: int, tp: int,
                   rng: np.random.Generator) -> list[int] | None:
    """Blocks of ``sp`` nodes in one super pod, windows of ``tp`` nodes in one rack."""
    pods = int(topo.super_pod.max()) + 1
    # free nodes per (super pod, rack window unit): racks for 950, the pod itself otherwise
    unit = topo.rack if topo.family == "950" else topo.super_pod
    units: dict[int, list[int]] = {}
    unit_pod: dict[int, int] = {}
    for n in np.flatnonzero(mask).tolist():
        units.setdefault(int(unit[n]), []).append(n)
        unit_pod[int(unit[n])] = int(topo.super_pod[n])
    pod_units: dict[int, list[int]] = {}
    for u in sorted(units):  # ascending rack id inside each pod
        pod_units.setdefault(unit_pod[u], []).append(u)
    step = tp if topo.family == "950" else 1
    first = int(rng.integers(pods))
    out: list[int] = []
    for _ in range(tasks // sp):
        block: list[int] | None = None
        # super pods in ascending id from a random start, wrapping around
        for p in [(first + i) % pods for i in range(pods)]:
            windows = sum(len(units[u]) // step for u in pod_units.get(p, []))
            if windows * step < sp:
                continue
            chosen: list[int] = []
            for u in pod_units[p]:
                while len(units[u]) >= step and len(chosen) < sp:
                    chosen += units[u][:step]
                    units[u] = units[u][step:]
            block = chosen
            break
        if block is None:
            return None
        out += block
    return out


def _layout_multilevel(topo: _Topology, job: _JobSpec, whole: np.ndarray,
                       rng: np.random.Generator) -> list[int] | None:
    """Nested groups: each level-i group of ``a_i`` ranks inside one level-i domain."""
    levels = job.levels
    k = len(levels)
    if k > topo.depth:
        return None
    dom = topo.domain
    avail: dict[int, list[int]] = {}
    for n in np.flatnonzero(whole).tolist():
        avail.setdefault(int(dom[0][n]), []).append(n)
    children: list[dict[int, list[int]]] = [{}]
    for level in range(1, k):
        kids: dict[int, set[int]] = {}
        for n in range(topo.size):
            kids.setdefault(int(dom[level][n]), set()).add(int(dom[level - 1][n]))
        children.append({d: sorted(c) for d, c in kids.items()})  # ascending domain ids

    def capacity(level: int, d: int) -> int:
        # complete level-`level` groups (0 = level1) that still fit in domain d
        if level == 0:
            return len(avail.get(d, [])) // levels[0]
        subs = sum(capacity(level - 1, c) for c in children[level].get(d, []))
        return subs // (levels[level] // levels[level - 1])

    def take(level: int, d: int) -> list[int]:
        # one level-`level` group inside domain d; the caller checked capacity >= 1
        if level == 0:
            got, avail[d] = avail[d][: levels[0]], avail[d][levels[0]:]
            return got
        need = levels[level] // levels[level - 1]
        got = []
        for c in children[level].get(d, []):
            while need and capacity(level - 1, c) > 0:
                got += take(level - 1, c)
                need -= 1
        return got

    top = k - 1
    domains = sorted(set(dom[top].tolist()))
    first = int(rng.integers(len(domains)))
    out: list[int] = []
    for _ in range(job.tasks // levels[top]):
        # top domains in ascending id from a random start, wrapping around
        for d in [domains[(first + i) % len(domains)] for i in range(len(domains))]:
            if capacity(top, d) > 0:
                out += take(top, d)
                break
        else:
            return None
    return out


# --------------------------------------------------------------------------- scenario


def _nodes_data(topo: _Topology, free: np.ndarray, health: list[str]) -> list[dict[str, Any]]:
    nodes = []
    for n in range(topo.size):
        node: dict[str, Any] = {
            "name": topo.names[n],
            "npus": int(topo.npus[n]),
            "free": int(free[n]),
            "health": health[n],
        }
        if topo.super_pod[n] >= 0:
            node["super-pod-id"] = int(topo.super_pod[n])
        if topo.rack[n] >= 0:
            node["rack-id"] = int(topo.rack[n])
        if topo.labels is not None:
            node["labels"] = dict(topo.labels[n])
        nodes.append(node)
    return nodes


def _history(topo: _Topology, jobs: list[_JobSpec], rng: np.random.Generator, mode: str
             ) -> tuple[dict[str, list[int]], str, list[str]]:
    """Place ``jobs`` on the clean cluster; return rank → node index lists per job name."""
    free = topo.npus.copy()
    health = ["healthy"] * topo.size
    notes: list[str] = []
    placed: dict[str, list[int]] = {}
    engines: set[str] = set()
    if not jobs:
        return placed, "none", notes
    data = {"now": NOW, "config": topo.config, "nodes": _nodes_data(topo, free, health),
            "jobs": [j.to_dict() for j in jobs]}
    scenario = Scenario.model_validate(data)
    problem = compile_scenario(scenario, "<history>")
    plan = Plan.empty(problem)
    if mode in ("auto", "greedy"):
        from heuristics.greedy import EngineNotAvailable
        from solver.facade import InvalidAnswer, solve

        try:
            plan = solve(problem, engine="greedy").plan
        except (EngineNotAvailable, InvalidAnswer) as exc:
            if mode == "greedy":
                raise
            notes.append(f"earlier placement by the simple layout: {exc}")
    for j, job in enumerate(jobs):
        nodes = plan.nodes[j]
        if nodes is not None:
            placed[job.name] = [int(n) for n in nodes]
            np.subtract.at(free, np.asarray(nodes, dtype=np.int64), job.npu_per_task)
            engines.add("greedy")
    for j, job in enumerate(jobs):
        if plan.nodes[j] is not None:
            continue
        layout = _layout(topo, job, free, rng)
        if layout is None:
            notes.append(f"{job.name}: no earlier placement fits; it returns without cache")
            continue
        placed[job.name] = layout
        np.subtract.at(free, np.asarray(layout, dtype=np.int64), job.npu_per_task)
        engines.add("layout")
    final = Plan.empty(problem)
    for j, job in enumerate(jobs):
        if job.name in placed:
            final.nodes[j] = np.asarray(placed[job.name], dtype=np.int32)
        else:
            final.reasons[j] = "not placed"
    violations = check(problem, to_placement(problem, final, engine="history",
                                             status=Status.GREEDY))
    if violations:  # a generator bug: never hand out a cache that no valid placement made
        raise AssertionError(f"invalid earlier placement: {violations[:3]}")
    engine = "mixed" if len(engines) > 1 else (engines.pop() if engines else "none")
    return placed, engine, notes


def _occupy(topo: _Topology, free: np.ndarray, blocked: np.ndarray, share: float,
            rng: np.random.Generator) -> None:
    """Other tenants: runs of consecutive nodes (whole or partly used) up to ``share``."""
    size = topo.size
    if share <= 0 or size == 0:
        return
    if topo.family == "ordinary":
        target = round(share * int(topo.npus.sum()))
        used = 0
        candidates = np.flatnonzero(~blocked)
        if len(candidates) == 0:
            return
        tries = 0
        while used < target and tries < 20 * size:
            tries += 1
            n = int(candidates[int(rng.integers(len(candidates)))])
            take = int(rng.choice([1, 2, 4, 8]))
            if free[n] >= take:
                free[n] -= take
                used += take
        return
    target = round(share * size)
    taken = 0
    tries = 0
    while taken < target and tries < 10 * size:
        tries += 1
        run = min(64, _pow2_floor(heavy_tail_npus(rng, 512)))
        start = int(rng.integers(size))
        for n in range(start, min(size, start + run)):
            if taken >= target:
                break
            if blocked[n] or free[n] < topo.npus[n]:
                continue
            if rng.random() < 0.1:  # a partly used node (a small inference pod)
                free[n] = topo.npus[n] - int(rng.choice([1, 2, 4]))
            else:
                free[n] = 0
            taken += 1


def generate_case(params: GenParams) -> GeneratedCase:
    """Generate one scenario and what is known about it.

    Parameters
    ----------
    params
        The generator parameters.

    Returns
    -------
    GeneratedCase
        The scenario (valid input) with the engine of the earlier placement and notes.
    """
    rng = np.random.default_rng(
        np.random.SeedSequence([params.seed, _FAMILY_CODE[params.family], params.nodes,
                                params.jobs])
    )
    topo = _build_topology(params)
    node_npus = int(topo.npus[0])
    usable = _usable_nodes(topo)
    big_cap = min(MAX_JOB_NODES, max(1, usable // 2))
    if topo.family in ("a3", "850"):
        pods = topo.size // topo.pod_nodes
        big_cap = min(big_cap, max(1, (topo.pod_nodes - RESERVE_NODES) * max(1, pods // 2)))
    uid = rng.integers(0, 2**32, dtype=np.uint64)

    # which jobs return: a single job always returns; a batch has `returning` of them
    count = params.jobs
    returning = [True] if count == 1 else [bool(rng.random() < params.returning)
                                           for _ in range(count)]
    if count > 1 and not any(returning):
        returning[0] = True
    specs: list[_JobSpec] = []
    for k, back in enumerate(returning):
        owner = f"{params.family}-{params.seed}-{k}-{int(uid):08x}"
        if back:
            low = 2 if count == 1 else 1
            size = log_uniform_nodes(rng, low, big_cap if count == 1 else max(1, big_cap // 2))
            job = _make_job(topo, rng, size * node_npus, params.soft_prob, f"train-{k}", owner)
        else:
            cap = max(1, big_cap // 4) * node_npus
            job = _make_job(topo, rng, heavy_tail_npus(rng, cap), params.soft_prob,
                            f"job-{k}", owner)
        job.priority = int(rng.choice([0, 0, 0, 5, 10])) if count > 1 else 0
        specs.append(job)

    back_specs = [s for s, back in zip(specs, returning, strict=True) if back]
    history, engine, notes = _history(topo, back_specs, rng, params.history)

    # other tenants fill the nodes the returning jobs do not use
    free = topo.npus.copy()
    blocked = np.zeros(topo.size, dtype=bool)
    for used in history.values():
        blocked[np.asarray(used)] = True
    _occupy(topo, free, blocked, params.occupancy, rng)

    # health mix
    health = np.zeros(topo.size, dtype=np.int8)
    order = rng.permutation(topo.size)
    n_unhealthy = round(params.unhealthy * topo.size)
    n_sub = round(params.subhealthy * topo.size)
    health[order[:n_unhealthy]] = 2
    health[order[n_unhealthy:n_unhealthy + n_sub]] = 1

    # events on the returning jobs
    entries: list[dict[str, Any]] = []
    ttl = DEFAULT_CACHE_TTL_SECONDS
    for job in back_specs:
        if job.name not in history:
            continue
        nodes = history[job.name]
        old_tasks = job.tasks
        if params.evict_fraction > 0:
            run = round(params.evict_fraction * old_tasks)
            if run:
                start = int(rng.integers(0, old_tasks - run + 1))
                for n in nodes[start:start + run]:
                    free[n] = 0  # the preemptor runs there now
        for n in sorted(set(nodes)):
            if rng.random() < params.taken_fraction:
                if topo.family == "ordinary" or rng.random() < 0.3:
                    free[n] = max(0, int(free[n]) - int(rng.integers(1, node_npus + 1)))
                else:
                    free[n] = 0
        if rng.random() < params.scale_change:
            _resize(job, rng, big_cap)
        if rng.random() < params.fault_prob:
            ranks = min(job.tasks, old_tasks)
            k = min(ranks, int(rng.integers(1, 1 + max(1, min(4, ranks // 32)))))
            job.fault_ranks = sorted(int(r) for r in rng.choice(ranks, size=k, replace=False))
            for r in job.fault_ranks:
                roll = rng.random()
                if roll < 0.5:
                    health[nodes[r]] = 2
                elif roll < 0.75:
                    health[nodes[r]] = max(int(health[nodes[r]]), 1)
        expired = bool(rng.random() < params.expired)
        updated = NOW - (ttl + 3600 if expired else int(rng.integers(600, 48 * 3600)))
        entries += [{"owner-uid": job.owner, "rank": r, "node": topo.names[n],
                     "updated": updated} for r, n in enumerate(nodes)]

    names = {0: "healthy", 1: "subhealthy", 2: "unhealthy"}
    order_jobs = rng.permutation(len(specs)).tolist()
    data = {
        "now": NOW,
        "config": topo.config,
        "nodes": _nodes_data(topo, free, [names[int(h)] for h in health]),
        "affinity-cache": {"ttl-seconds": ttl, "entries": entries},
        "jobs": [specs[i].to_dict() for i in order_jobs],
    }
    scenario = Scenario.model_validate(data)
    compile_scenario(scenario, f"<generated {params.family} n={params.nodes} seed={params.seed}>")
    return GeneratedCase(params=params, scenario=scenario, history_engine=engine,
                         returning_jobs=len(history), notes=notes)


def generate(params: GenParams) -> Scenario:
    """Generate one valid scenario (see :func:`generate_case`)."""
    return generate_case(params).scenario


def case_name(params: GenParams) -> str:
    """A short unique name of a generated case: ``family-n<nodes>-<mix>-s<seed>``."""
    extra = f"-d{params.depth}" if params.family == "multilevel" and params.depth else ""
    return f"{params.family}-n{params.nodes}-{params.mix}{params.jobs}{extra}-s{params.seed}"



def cluster_nodes(family: str, nodes: int, pod_nodes: int | None = None,
                  depth: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A clean cluster of one family: node mappings (all free, healthy) and its config.

    The topology is the generators' (see the module docstring); ``replay`` builds its
    node pools with it.
    """
    topo = _build_topology(GenParams(family, nodes=nodes, pod_nodes=pod_nodes, depth=depth))
    return _nodes_data(topo, topo.npus.copy(), ["healthy"] * topo.size), dict(topo.config)
