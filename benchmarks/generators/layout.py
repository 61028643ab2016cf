"""A simple valid layout of a job (first fit in topology order), used when greedy cannot place
an earlier job."""

from __future__ import annotations

import numpy as np

from benchmarks.generators.jobs import JobSpec
from benchmarks.generators.params import RACK_NODES, UB_RACKS
from benchmarks.generators.topology import Topology


def simple_layout(topo: Topology, job: JobSpec, free: np.ndarray, rng: np.random.Generator
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


def _layout_blocks(topo: Topology, mask: np.ndarray, tasks: int, sp: int, tp: int,
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


def _layout_multilevel(topo: Topology, job: JobSpec, whole: np.ndarray,
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
