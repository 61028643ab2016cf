"""Inference placement paths: the infer service (``inferserviceid``) and MindIE.

Upstream's dispatcher (reference §2.3 "Selection dispatcher", §2.5.6) sends a super-pod
job with the label ``inferserviceid`` to the infer-service path and an A3 job with the
labels ``app`` and ``jobID`` to the MindIE path instead of the normal selection.  Both
choose super pods (or 950 racks) for whole blocks; inside the chosen domain the nodes are
taken by the same carving as the normal path (RFC level 2: cached nodes first, then
healthy, sub-healthy, former fault nodes; a fault rank off its old node when possible),
where upstream takes them in Go map order.

Infer service, A3 / 850 (§2.3.5, ``infer_service.go``)
    ``sameSPs`` = super pods used by other jobs of the same ``inferserviceid``.  For each
    of the job's blocks: the super pods with at least ``spBlock`` free candidate nodes,
    those of ``sameSPs`` first, then more free nodes first (tie: lower super-pod id); the
    first gives the block and joins ``sameSPs``.  Fewer blocks than needed: "infer service
    schedule failed, required %d sp-block, got %d".  Reference E24 (cases 01–04, 07).
    A job with fewer candidate nodes than tasks fails first with §2.2's "not enough node"
    (the scheduler's order); E24 case 07 calls the selection alone
    (:func:`infer_service_blocks`), hence its infer-service text.
Infer service, 950 (§2.5.6)
    Items are (super pod, rack) pairs with at least ``spBlock`` free nodes; a block is
    taken from one rack.  Group 1: racks the service uses (more free nodes first); group
    2: other racks of super pods it uses; group 3: the rest.  Groups 2 and 3 are ordered
    by more fully idle racks (8 free nodes) in the super pod, then more free nodes in the
    rack, then more in the super pod; ties by (super pod, rack) id.
MindIE, A3 only (§2.3.4, ``mindie_job.go``)
    Super pods with at least ``spBlock`` candidates; ``Σ ⌊n/spBlock⌋ < blocks`` fails with
    "not enough virtual super-pod to schedule, required %d, total %d".  Affinity = the
    ``matchLabels`` of the job's first preferred pod-affinity term (``pod-affinity``): per
    super pod, the nodes outside the candidates running a pod of a job whose labels hold
    all of them.  Blocks are taken one by one from the first super pod by (``n − reserve
    >= spBlock`` first, more affinity, fewer free nodes — more with the job annotation
    ``sp-fit: idlest``, scenario field ``sp-fit``, upstream's ``isIdleResourceFit`` —, then
    lower id); its affinity grows by ``spBlock`` with each block.

"Other jobs of the same service" are the scenario's running jobs with that
``inferserviceid``, the running ranks of other pending jobs, and the jobs placed earlier
in the same batch (upstream: their ``SuperPods``, set earlier in the session).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from heuristics.base import JobOutcome
from heuristics.rack import _Selector
from heuristics.state import ClusterState
from heuristics.superpod import _Selection, superpod_candidates
from models.compiled import JobView, Problem
from models.validation import RACK_NODES


def _service_nodes(problem: Problem, job: JobView, state: ClusterState) -> list[int]:
    """Nodes running or planned for other jobs of ``job``'s infer service."""
    sid = job.inferserviceid
    index = problem.node_index
    out: list[int] = []
    for running in problem.scenario.running:
        if running.inferserviceid == sid:
            out += [index[n] for n in running.ranks.values() if n in index]
    for other in problem.jobs:
        if other.index == job.index or other.inferserviceid != sid:
            continue
        if other.partly_running:
            out += [int(n) for n in other.running if n >= 0]
        if other.index in state.placed:
            out += [int(n) for n in state.placed[other.index]]
    return out


def _labelled_nodes(problem: Problem, job: JobView, state: ClusterState,
                    match: dict[str, str]) -> set[int]:
    """Nodes running a pod of a job whose labels hold every ``match`` label."""
    def matches(labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in match.items())

    index = problem.node_index
    out: set[int] = set()
    for running in problem.scenario.running:
        if matches(running.labels):
            out.update(index[n] for n in running.ranks.values() if n in index)
    for other in problem.jobs:
        if other.index == job.index or not matches(problem.scenario.jobs[other.index].labels):
            continue
        if other.partly_running:
            out.update(int(n) for n in other.running if n >= 0)
        if other.index in state.placed:
            out.update(int(n) for n in state.placed[other.index])
    return out


def place_infer_service(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """The infer-service path of job ``j`` (A3/850 or 950): a node per rank or a reason."""
    job = problem.jobs[j]
    if job.rules.in_rack:
        return _infer_rack(problem, job, state)
    cand = superpod_candidates(problem, job, state)
    count = int(np.count_nonzero(cand))
    if job.tasks > count:  # §2.2 step 5 runs before the selection (step 6)
        return JobOutcome.fail(f"not enough node, npuTaskNum: {job.tasks}, nodes: {count}")
    return infer_service_blocks(problem, job, state, cand)


def infer_service_blocks(problem: Problem, job: JobView, state: ClusterState,
                         cand: np.ndarray) -> JobOutcome:
    """The A3 / 850 infer-service selection alone (§2.3.5, ``infer_service.go``) over the
    candidate mask ``cand``: what upstream's ``infer_service_test.go`` (reference E24)
    calls directly, without §2.2's node-count check in front of it."""
    sel = _Selection(problem, job, cand)
    same = {int(problem.super_pod[n]) for n in _service_nodes(problem, job, state)}
    got = 0
    for b in range(sel.k):
        fits = [s for s in sel.pod_ids if len(sel.pods[s]) >= sel.sp]
        if not fits:
            break
        s = min(fits, key=lambda s: (s not in same, -len(sel.pods[s]), s))
        sel.blocks[b] = sel.carve(s, range(b * sel.sp, (b + 1) * sel.sp))
        same.add(s)
        got += 1
    if got < sel.k:
        return JobOutcome.fail(f"infer service schedule failed, required {sel.k} sp-block, "
                               f"got {got}")
    return sel.result()


def _infer_rack(problem: Problem, job: JobView, state: ClusterState) -> JobOutcome:
    sel = _Selector(problem, job, state)
    nodes = _service_nodes(problem, job, state)
    same_racks = {(sel.sp_of[n], sel.rack_of[n]) for n in nodes}
    same_sps = {s for s, _ in same_racks}
    got = 0
    for b in range(sel.blocks):
        racks = sel.racks
        items = [(s, k) for s in racks for k in racks[s] if len(racks[s][k]) >= sel.spb]
        if not items:
            break
        idle = {s: sum(1 for k in racks[s] if len(racks[s][k]) >= RACK_NODES) for s in racks}
        total = {s: sum(len(v) for v in racks[s].values()) for s in racks}
        keys = []
        for s, k in items:
            size = len(racks[s][k])
            if (s, k) in same_racks:
                keys.append(((0, -size, 0, 0, s, k), s, k))
            else:
                group = 1 if s in same_sps else 2
                keys.append(((group, -idle[s], -size, -total[s], s, k), s, k))
        _, s, k = min(keys)
        sel._fill(s, k, list(sel._block_ranks(b)))
        same_racks.add((s, k))
        same_sps.add(s)
        got += 1
    if got < sel.blocks:
        return JobOutcome.fail(f"infer service schedule failed, required {sel.blocks} "
                               f"sp-block, got {got}")
    sel.keep_faults_away()
    return JobOutcome(np.asarray(sel.nodes, dtype=np.int64))


def place_mindie(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """The MindIE path of A3 job ``j``: a node per rank or upstream's reason."""
    job = problem.jobs[j]
    cand = superpod_candidates(problem, job, state)
    count = int(np.count_nonzero(cand))
    if job.tasks > count:
        return JobOutcome.fail(f"not enough node, npuTaskNum: {job.tasks}, nodes: {count}")
    sel = _Selection(problem, job, cand)
    sp = sel.sp
    total = sum(len(sel.pods[s]) // sp for s in sel.pod_ids)
    if total < sel.k:
        return JobOutcome.fail(f"not enough virtual super-pod to schedule, required {sel.k}, "
                               f"total {total}")
    match = dict(job.pod_affinity)
    affinity: Counter[int] = Counter()
    if match:
        for n in _labelled_nodes(problem, job, state, match):
            if not cand[n] and problem.super_pod[n] >= 0:
                affinity[int(problem.super_pod[n])] += 1
    reserve = problem.reserve_nodes
    idlest = job.sp_fit_idlest
    for b in range(sel.k):
        fits = [s for s in sel.pod_ids if len(sel.pods[s]) >= sp]
        # sp-fit: idlest → more free nodes first (upstream's ``>=``), else fewer first
        s = min(fits, key=lambda s: (len(sel.pods[s]) - reserve < sp, -affinity[s],
                                     -len(sel.pods[s]) if idlest else len(sel.pods[s]), s))
        sel.blocks[b] = sel.carve(s, range(b * sp, (b + 1) * sp))
        if match:
            affinity[s] += sp
    return sel.result()


__all__ = ["place_infer_service", "place_mindie"]
