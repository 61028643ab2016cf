"""Jobs of a generated batch: sizes (heavy-tailed fresh jobs, log-uniform returning jobs), a
valid job of each family, and a returning job scaled down or up."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.generators.params import HEAVY_TAIL, ML_FANOUT, POLICY, RACK_NODES, RESERVE_NODES
from benchmarks.generators.topology import Topology


@dataclass
class JobSpec:
    """A generated job before it becomes contract data (:meth:`to_dict`)."""

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


def pow2_floor(value: float) -> int:
    """The largest power of two not above ``value`` (1 below 2)."""
    return 1 if value < 2 else 2 ** math.floor(math.log2(value))


def heavy_tail_npus(rng: np.random.Generator, max_npus: int) -> int:
    """A fresh job's NPU count: ``2^k`` with ``P(k) ∝ 0.6^k``, ``2^k ≤ max_npus``."""
    top = int(math.log2(pow2_floor(max(1, max_npus))))
    weights = HEAVY_TAIL ** np.arange(top + 1)
    k = int(rng.choice(top + 1, p=weights / weights.sum()))
    return int(2**k)


def log_uniform_nodes(rng: np.random.Generator, low: int, high: int) -> int:
    """``2^k`` nodes with ``k`` uniform over ``[log2 low, log2 high]`` (powers of two)."""
    lo = int(math.log2(pow2_floor(max(1, low))))
    hi = max(lo, int(math.log2(pow2_floor(max(1, high)))))
    return int(2 ** int(rng.integers(lo, hi + 1)))


def usable_nodes(topo: Topology) -> int:
    """Nodes a job may use: the reserve nodes and multilevel reserved leaves left out."""
    if topo.family in ("a3", "850"):
        pods = topo.size // topo.pod_nodes
        return pods * max(1, topo.pod_nodes - RESERVE_NODES)
    if topo.family == "multilevel":
        return topo.size * (ML_FANOUT[0] - 1) // ML_FANOUT[0]
    return topo.size


def make_job(topo: Topology, rng: np.random.Generator, total_npus: int, soft_prob: float,
              name: str, owner: str) -> JobSpec:
    """A valid job of the family asking for about ``total_npus`` NPUs."""
    family = topo.family
    node_npus = int(topo.npus[0])
    policy = POLICY[family]
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
        return JobSpec(name, owner, policy, tasks, npt)
    if family == "multilevel":
        n = max(1, total_npus // node_npus)
        levels = _multilevel_levels(topo, rng, n)
        return JobSpec(name, owner, policy, n, node_npus, levels=levels)
    if total_npus < node_npus or (total_npus == node_npus and rng.random() < 0.5):
        # a single-task super-pod job: sp-block equals its request
        npt = total_npus
        return JobSpec(name, owner, policy, 1, npt, sp_block=npt, soft=soft)
    n = total_npus // node_npus
    limit = topo.pod_nodes - (RESERVE_NODES if family in ("a3", "850") else 0)
    if family == "950":
        tp = int(rng.choice([t for t in (1, 2, 4, 8) if t <= n]))
        blocks = [b for b in (tp, 2 * tp, 4 * tp, 8 * tp, 16 * tp, 32 * tp)
                  if b <= min(n, limit, 256)]
        sp = int(rng.choice(blocks)) if blocks else tp
        ub = n > 1 and n * node_npus <= 1024 and bool(rng.random() < 0.2)
        return JobSpec(name, owner, policy, n, node_npus, sp_block=sp * node_npus,
                        ra_block=tp * RACK_NODES, soft=soft, ub_memory=ub)
    choices = [b for b in (2, 4, 8, 16, 32) if b <= min(n, limit)] or [1]
    sp = int(rng.choice(choices))
    return JobSpec(name, owner, policy, n, node_npus, sp_block=sp * node_npus, soft=soft)


def _multilevel_levels(topo: Topology, rng: np.random.Generator, n: int) -> tuple[int, ...]:
    """``a1..aK`` for an ``n``-node job: powers of two, nested, within domain sizes."""
    if n == 1:
        return (1,)
    k = int(rng.integers(1, topo.depth + 1)) if rng.random() < 0.3 else topo.depth
    levels = [min(n, int(rng.choice([2, 4])))]
    span = ML_FANOUT[0]
    for level in range(1, k):
        span *= ML_FANOUT[level]
        cap = pow2_floor(span * (ML_FANOUT[0] - 1) / ML_FANOUT[0] / 2)
        value = min(n, levels[-1] * int(rng.choice([2, 4])), max(levels[-1], cap))
        levels.append(value)
    return tuple(levels)


def resize(job: JobSpec, rng: np.random.Generator, max_nodes: int) -> None:
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
