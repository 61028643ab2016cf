"""The objective: metrics of a placement, the weights, and the scalar objective.

One function of ``(scenario, placement)`` measures every engine identically.  The terms
(all counted after the whole placement of the batch):

``placed-jobs``
    Jobs placed.  In the objective each placed job ``j`` is worth
    ``W_place × (1 + p_j)`` where ``p_j`` is the dense rank of its priority among the
    scenario's distinct priorities (0 for the lowest).
``origin-hits`` / ``origin-candidates``
    A rank not in ``fault-ranks`` whose owner has a live cache entry ``(owner, rank) → n``
    is a candidate; it is a hit when placed on ``n``.
``fault-returns``
    A rank in ``fault-ranks`` placed on its cached node (bad).
``subhealthy-nodes``
    Distinct sub-healthy nodes hosting at least one rank.
``reserve-used``
    A3/850: per physical super pod ``s``, ``max(0, U_s − max(0, W_s − reserve-nodes))``
    where ``W_s`` counts the completely free, usable nodes of ``s`` and ``U_s`` those of
    them that host ranks of super-pod (A3/850) jobs.  Multilevel: the same per level1
    domain of a tree, with that tree's level1 ``reservedNode`` and multilevel ranks.
``affinity-spill`` (added to the contract)
    For ``super-pod-affinity: soft`` jobs: per block, the nodes outside the block's most
    used super pod; for 950 jobs also per rack window, the nodes outside the window's most
    used rack.  Zero for hard jobs (the validator forbids spilling).
``fragment-score``
    Upstream's multilevel fragment score (reference §2.6.5),
    ``frag(D) = (sub(D) mod m) × child_size + 10 × Σ frag(children)``, applied to the
    nodes left free for each *placed* job's own hierarchy and summed over placed jobs.
    ``left`` nodes are the job's eligible nodes (completely free, not unhealthy, of the
    job's node size, in the job's kind of domain) that no placed rank uses.

    * A3/850 (``B = spBlock``): ``Σ_s (left_s mod B)`` over super pods.
    * 950 (``T = tpBlock``, ``W = spBlock / tpBlock``): per super pod
      ``((Σ_k ⌊left_k / T⌋) mod W) × T + 10 × Σ_k (left_k mod T)`` over its racks ``k``,
      summed over super pods.
    * multilevel (``a1..aK``, on the topotree the job uses): a level1 domain scores
      ``left mod a1`` and holds ``⌊left / a1⌋`` groups; a level ``i`` domain scores
      ``(sub mod m_i) × a_(i-1) + 10 × Σ children`` with ``sub`` the children's groups and
      ``m_i = a_i / a_(i-1)``; summed over level K domains.  Reserved leaves count as free.
    * ordinary: the nodes hosting the job that are left partly used
      (``0 < free − used < npus``).

The scalar objective (maximised) is::

    Σ_j placed_j · W_place · (1 + p_j) + W_hit · hits
      − w_fault · fault_returns − w_spill · spill − w_sub · subhealthy
      − w_reserve · reserve_used − w_frag · fragment

With the default (automatic) ``W_hit`` and ``W_place`` the order is lexicographic:
``W_hit`` exceeds the largest possible total of the lower terms and ``W_place`` exceeds
every hit and lower term together, so placing a job outweighs everything below it and one
more origin hit outweighs any combination of the terms below it.  The automatic weights
are derived from bounds of this scenario and kept below 2^31 in total (see
:func:`resolve_weights`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from models.compiled import SUBHEALTHY, UNHEALTHY, JobView, Problem, compile_scenario
from models.limits import MAX_WEIGHT
from models.placement import MetricsModel, PlacementFile
from models.scenario import Family, Scenario

#: CP-SAT misreports optimality when the objective's coefficients get larger than this.
COEFFICIENT_LIMIT = 2**31 - 1


class Weights(BaseModel):
    """Objective weights.  ``None`` for ``placed``/``origin_hit`` means automatic.

    The automatic values make the objective lexicographic (placed jobs, then origin hits,
    then the weighted sum of the lower terms) for the scenario at hand.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    placed: int | None = Field(None, ge=0, le=MAX_WEIGHT)
    origin_hit: int | None = Field(None, alias="origin-hit", ge=0, le=MAX_WEIGHT)
    fault_return: int = Field(64, alias="fault-return", ge=0, le=MAX_WEIGHT)
    affinity_spill: int = Field(16, alias="affinity-spill", ge=0, le=MAX_WEIGHT)
    subhealthy: int = Field(4, ge=0, le=MAX_WEIGHT)
    reserve: int = Field(2, ge=0, le=MAX_WEIGHT)
    fragment: int = Field(1, ge=0, le=MAX_WEIGHT)
    priority_levels: bool = Field(True, alias="priority-levels")


@dataclass(frozen=True)
class ResolvedWeights:
    """Integer weights for one scenario."""

    job_placed: tuple[int, ...]  # per job index
    origin_hit: int
    fault_return: int
    affinity_spill: int
    subhealthy: int
    reserve: int
    fragment: int
    notes: tuple[str, ...] = ()


@dataclass
class Metrics:
    """Every metric of a placement plus its scalar objective."""

    placed_jobs: int = 0
    origin_hits: int = 0
    origin_candidates: int = 0
    fault_returns: int = 0
    subhealthy_nodes: int = 0
    reserve_used: int = 0
    fragment_score: int = 0
    affinity_spill: int = 0
    achievable_origin_hits: int = 0
    objective: int = 0
    per_job_hits: dict[str, int] = field(default_factory=dict)
    per_job_candidates: dict[str, int] = field(default_factory=dict)
    per_job_fragment: dict[str, int] = field(default_factory=dict)

    def to_model(self) -> MetricsModel:
        """The contract's ``metrics`` object."""
        return MetricsModel(
            placed_jobs=self.placed_jobs,
            origin_hits=self.origin_hits,
            origin_candidates=self.origin_candidates,
            fault_returns=self.fault_returns,
            subhealthy_nodes=self.subhealthy_nodes,
            reserve_used=self.reserve_used,
            fragment_score=self.fragment_score,
            affinity_spill=self.affinity_spill,
            achievable_origin_hits=self.achievable_origin_hits,
            objective=self.objective,
        )


# --------------------------------------------------------------------------- eligibility


def eligible_nodes(problem: Problem, job: JobView, tree: int | None = None) -> np.ndarray:
    """Boolean mask of nodes a whole-node task of ``job`` may use (ignoring other jobs).

    For multilevel jobs pass the tree index (into ``problem.tree_names``).
    """
    mask = problem.whole_free & (problem.npus == job.npu_per_task)
    if job.family is Family.SUPERPOD:
        mask &= problem.super_pod >= 0
    elif job.family is Family.RACK:
        mask &= (problem.super_pod >= 0) & (problem.rack >= 0)
    elif job.family is Family.MULTILEVEL:
        if tree is None:
            raise ValueError("multilevel eligibility needs a tree")
        mask &= problem.trees[problem.tree_names[tree]].member
    return mask


def node_usable_for(problem: Problem, job: JobView, n: int) -> bool:
    """Whether node ``n`` can host one task of ``job`` on its own (no other jobs)."""
    if problem.health[n] == UNHEALTHY:
        return False
    if job.whole_node:
        if not (problem.free[n] == problem.npus[n] == job.npu_per_task):
            return False
    elif problem.free[n] < job.npu_per_task:
        return False
    if job.family in (Family.SUPERPOD, Family.RACK) and problem.super_pod[n] < 0:
        return False
    if job.family is Family.RACK and problem.rack[n] < 0:
        return False
    if job.family is Family.MULTILEVEL:
        t = int(problem.node_tree[n])
        if t < 0 or not problem.trees[problem.tree_names[t]].member[n]:
            return False
        if problem.trees[problem.tree_names[t]].depth < len(job.levels):
            return False
    return True


def achievable_hits(problem: Problem, job: JobView) -> int:
    """Upper bound on origin hits of ``job``: candidates whose cached node is usable.

    For whole-node jobs a node counts once even if several ranks name it.
    """
    nodes = [int(n) for n, f in zip(job.origin, job.fault, strict=True) if n >= 0 and not f]
    usable = [n for n in nodes if node_usable_for(problem, job, n)]
    if job.whole_node:
        return len(set(usable))
    per_node = Counter(usable)
    return sum(min(c, int(problem.free[n]) // job.npu_per_task) for n, c in per_node.items())


# --------------------------------------------------------------------------- fragment


def domain_keys(problem: Problem, tree: int, level: int) -> np.ndarray:
    """Per node, an integer id of its level-``level`` domain in ``tree`` (-1 outside).

    A level-i domain is identified by the node's label values at levels i..D of the tree.
    """
    view = problem.trees[problem.tree_names[tree]]
    keys: dict[tuple[int, ...], int] = {}
    out = np.full(problem.num_nodes, -1, dtype=np.int64)
    for n in np.flatnonzero(view.member):
        key = tuple(int(view.level_value[i][n]) for i in range(level - 1, view.depth))
        out[n] = keys.setdefault(key, len(keys))
    return out


def multilevel_fragment(
    left_per_l1: dict[int, int], parents: list[dict[int, int]], levels: tuple[int, ...]
) -> int:
    """Upstream's recursive fragment score over level domains.

    ``left_per_l1`` maps level1 domain id → left nodes; ``parents[i]`` maps a level
    ``i+1`` domain id → its level ``i+2`` domain id (for i = 0..K-2).
    """
    frag = {g: left % levels[0] for g, left in left_per_l1.items()}
    alloc = {g: left // levels[0] for g, left in left_per_l1.items()}
    for i in range(1, len(levels)):
        m = levels[i] // levels[i - 1]
        sub: dict[int, int] = defaultdict(int)
        acc: dict[int, int] = defaultdict(int)
        for g, parent in parents[i - 1].items():
            if g in alloc:
                sub[parent] += alloc[g]
                acc[parent] += frag[g]
        frag = {d: (sub[d] % m) * levels[i - 1] + 10 * acc[d] for d in sub}
        alloc = {d: sub[d] // m for d in sub}
    return int(sum(frag.values()))


def job_fragment(
    problem: Problem, job: JobView, used: np.ndarray, nodes: list[int], tree: int | None
) -> int:
    """Fragment score of placed ``job`` given the chips ``used`` per node by the batch."""
    if job.family is Family.ORDINARY:
        count = 0
        for n in set(nodes):
            left = int(problem.free[n]) - int(used[n])
            if 0 < left < int(problem.npus[n]):
                count += 1
        return count
    left_mask = eligible_nodes(problem, job, tree) & (used == 0)
    if job.family is Family.SUPERPOD:
        if job.sp_block <= 1:
            return 0
        counts = Counter(problem.super_pod[left_mask].tolist())
        return int(sum(c % job.sp_block for c in counts.values()))
    if job.family is Family.RACK:
        per_rack = Counter(
            zip(problem.super_pod[left_mask].tolist(), problem.rack[left_mask].tolist(),
                strict=True)
        )
        windows = job.sp_block // job.tp_block
        per_pod_alloc: dict[int, int] = defaultdict(int)
        per_pod_frag: dict[int, int] = defaultdict(int)
        for (sp, _rack), c in per_rack.items():
            per_pod_alloc[sp] += c // job.tp_block
            per_pod_frag[sp] += c % job.tp_block
        return int(
            sum((per_pod_alloc[sp] % windows) * job.tp_block + 10 * per_pod_frag[sp]
                for sp in per_pod_alloc)
        )
    assert tree is not None
    l1 = domain_keys(problem, tree, 1)
    left_per_l1 = Counter(l1[left_mask].tolist())
    # include empty level1 domains of eligible nodes so the recursion sees them (frag 0)
    for g in set(l1[eligible_nodes(problem, job, tree)].tolist()):
        left_per_l1.setdefault(g, 0)
    parents = []
    for i in range(1, len(job.levels)):
        lower = domain_keys(problem, tree, i)
        upper = domain_keys(problem, tree, i + 1)
        mapping = {}
        for n in np.flatnonzero(lower >= 0).tolist():
            mapping[int(lower[n])] = int(upper[n])
        parents.append(mapping)
    return multilevel_fragment(dict(left_per_l1), parents, job.levels)


# --------------------------------------------------------------------------- weights


def _fragment_bound(problem: Problem, job: JobView) -> int:
    if job.family is Family.ORDINARY:
        return min(job.tasks, problem.num_nodes)
    if job.family is Family.SUPERPOD:
        if job.sp_block <= 1:
            return 0
        mask = eligible_nodes(problem, job)
        counts = Counter(problem.super_pod[mask].tolist())
        return sum(min(job.sp_block - 1, c) for c in counts.values())
    if job.family is Family.RACK:
        mask = eligible_nodes(problem, job)
        per_rack = Counter(zip(problem.super_pod[mask].tolist(), problem.rack[mask].tolist(),
                               strict=True))
        pods = {sp for sp, _ in per_rack}
        windows = job.sp_block // job.tp_block
        return (len(pods) * (windows - 1) * job.tp_block
                + 10 * sum(min(job.tp_block - 1, c) for c in per_rack.values()))
    best = 0
    for t, name in enumerate(problem.tree_names):
        if problem.trees[name].depth < len(job.levels):
            continue
        mask = eligible_nodes(problem, job, t)
        l1 = domain_keys(problem, t, 1)
        left = {g: min(job.levels[0] - 1, c) for g, c in Counter(l1[mask].tolist()).items()}
        bound = dict(left)
        for i in range(1, len(job.levels)):
            lower = domain_keys(problem, t, i)
            upper = domain_keys(problem, t, i + 1)
            parent = {int(lower[n]): int(upper[n]) for n in np.flatnonzero(lower >= 0)}
            step = (job.levels[i] // job.levels[i - 1] - 1) * job.levels[i - 1]
            acc: dict[int, int] = defaultdict(int)
            for g, b in bound.items():
                acc[parent[g]] += b
            bound = {d: step + 10 * a for d, a in acc.items()}
        best = max(best, sum(bound.values()))
    return best


def _reserve_bound(problem: Problem) -> int:
    total = 0
    families = {job.family for job in problem.jobs}
    whole = problem.whole_free
    if Family.SUPERPOD in families and problem.reserve_nodes > 0:
        counts = Counter(problem.super_pod[whole & (problem.super_pod >= 0)].tolist())
        total += sum(min(problem.reserve_nodes, c) for c in counts.values())
    if Family.MULTILEVEL in families:
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            if view.reserved_nodes <= 0:
                continue
            l1 = domain_keys(problem, t, 1)
            counts = Counter(l1[whole & view.member].tolist())
            total += sum(min(view.reserved_nodes, c) for c in counts.values())
    return total


def resolve_weights(problem: Problem, weights: Weights | None = None) -> ResolvedWeights:
    """Integer weights for ``problem``; automatic ones make the objective lexicographic.

    When the automatic weights would make the sum of absolute coefficients exceed 2^31
    (CP-SAT misreports optimality beyond that), they are degraded in this order, each
    step recorded in ``notes``: the fragment weight drops to 0, then priority levels stop
    multiplying the placement weight, then the other lower terms leave the objective
    (placed jobs still outweigh origin hits).  Explicit weights that are too large raise
    ``ValueError``.
    """
    weights = weights or Weights()
    fault_bound = sum(int(((job.origin >= 0) & job.fault).sum()) for job in problem.jobs)
    spill_bound = sum(
        job.tasks * (2 if job.family is Family.RACK else 1)
        for job in problem.jobs
        if job.soft and job.family in (Family.SUPERPOD, Family.RACK)
    )
    sub_bound = int((problem.health == SUBHEALTHY).sum())
    reserve_bound = _reserve_bound(problem)
    frag_bound = sum(_fragment_bound(problem, job) for job in problem.jobs)
    candidates = sum(int(((job.origin >= 0) & ~job.fault).sum()) for job in problem.jobs)
    priorities = sorted({job.priority for job in problem.jobs})
    prio_rank = {p: i for i, p in enumerate(priorities)}
    notes: list[str] = []
    frag_w = weights.fragment
    use_levels = weights.priority_levels
    lower_on = True
    automatic = weights.placed is None and weights.origin_hit is None
    while True:
        lower = (weights.fault_return * fault_bound + weights.affinity_spill * spill_bound
                 + weights.subhealthy * sub_bound + weights.reserve * reserve_bound
                 + frag_w * frag_bound) if lower_on else 0
        if weights.origin_hit is not None:
            hit = weights.origin_hit
        else:
            hit = lower + 1 if problem.prefer_previous_node else 0
        base = weights.placed if weights.placed is not None else hit * candidates + lower + 1
        job_w = tuple(
            base * (1 + prio_rank[job.priority]) if use_levels else base for job in problem.jobs
        )
        total = sum(job_w) + hit * candidates + lower
        if total <= COEFFICIENT_LIMIT:
            break
        if frag_w > 0 and weights.placed is None:
            frag_w = 0
            notes.append("fragment weight set to 0 to keep the objective below 2^31")
            continue
        if use_levels and len(priorities) > 1:
            use_levels = False
            notes.append("priority levels no longer multiply the placement weight (2^31 limit)")
            continue
        if automatic and lower_on:
            lower_on = False
            notes.append("fault returns, spill, sub-healthy and reserve no longer count in "
                         "the objective (2^31 limit); placed jobs and origin hits still do")
            continue
        raise ValueError(
            f"the automatic objective weights for this scenario sum to {total}, above 2^31; "
            "pass explicit weights (placed, origin-hit) small enough"
        )
    return ResolvedWeights(
        job_placed=job_w,
        origin_hit=hit,
        fault_return=weights.fault_return if lower_on else 0,
        affinity_spill=weights.affinity_spill if lower_on else 0,
        subhealthy=weights.subhealthy if lower_on else 0,
        reserve=weights.reserve if lower_on else 0,
        fragment=frag_w,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- evaluate


def _as_problem(scenario: Scenario | Problem) -> Problem:
    return scenario if isinstance(scenario, Problem) else compile_scenario(scenario)


def placement_nodes(problem: Problem, placement: PlacementFile) -> dict[int, list[int]]:
    """Node index per rank of every placed job in ``placement`` (by job index)."""
    out: dict[int, list[int]] = {}
    for jp in placement.jobs:
        j = problem.job_index.get(jp.name)
        if j is None or not jp.placed:
            continue
        job = problem.jobs[j]
        out[j] = [problem.node_index[jp.ranks[str(r)]] for r in range(job.tasks)]
    return out


def evaluate(
    scenario: Scenario | Problem,
    placement: PlacementFile | dict[int, list[int]],
    weights: Weights | ResolvedWeights | None = None,
) -> Metrics:
    """Measure a placement: every metric and the scalar objective.

    Parameters
    ----------
    scenario
        The scenario or its compiled view.
    placement
        A placement file, or a mapping job index → node index per rank.  The placement
        should pass :func:`models.check.check`; evaluation assumes a valid placement.
    weights
        Objective weights (default: automatic lexicographic weights).
    """
    problem = _as_problem(scenario)
    resolved = (weights if isinstance(weights, ResolvedWeights)
                else resolve_weights(problem, weights))
    placed = (placement_nodes(problem, placement) if isinstance(placement, PlacementFile)
              else placement)
    used = np.zeros(problem.num_nodes, dtype=np.int64)
    for j, nodes in placed.items():
        np.add.at(used, np.asarray(nodes, dtype=np.int64), problem.jobs[j].npu_per_task)
    metrics = Metrics()
    objective = 0
    hosting_any: set[int] = set()
    sp_hosts: set[int] = set()
    ml_hosts: set[int] = set()
    for job in problem.jobs:
        candidates = int(((job.origin >= 0) & ~job.fault).sum())
        metrics.origin_candidates += candidates
        metrics.per_job_candidates[job.name] = candidates
        metrics.achievable_origin_hits += achievable_hits(problem, job)
        found = placed.get(job.index)
        if found is None:
            metrics.per_job_hits[job.name] = 0
            continue
        nodes = found
        metrics.placed_jobs += 1
        objective += resolved.job_placed[job.index]
        arr = np.asarray(nodes, dtype=np.int32)
        on_origin = (arr == job.origin) & (job.origin >= 0)
        hits = int((on_origin & ~job.fault).sum())
        metrics.per_job_hits[job.name] = hits
        metrics.origin_hits += hits
        metrics.fault_returns += int((on_origin & job.fault).sum())
        hosting_any.update(nodes)
        if job.family is Family.SUPERPOD:
            sp_hosts.update(nodes)
        elif job.family is Family.MULTILEVEL:
            ml_hosts.update(nodes)
        tree = int(problem.node_tree[nodes[0]]) if job.family is Family.MULTILEVEL else None
        frag = job_fragment(problem, job, used, nodes, tree)
        metrics.per_job_fragment[job.name] = frag
        metrics.fragment_score += frag
        if job.soft and job.family in (Family.SUPERPOD, Family.RACK):
            metrics.affinity_spill += block_spill(problem, job, nodes)
    metrics.subhealthy_nodes = sum(1 for n in hosting_any if problem.health[n] == SUBHEALTHY)
    metrics.reserve_used = _reserve_used(problem, sp_hosts, ml_hosts)
    objective += resolved.origin_hit * metrics.origin_hits
    objective -= resolved.fault_return * metrics.fault_returns
    objective -= resolved.affinity_spill * metrics.affinity_spill
    objective -= resolved.subhealthy * metrics.subhealthy_nodes
    objective -= resolved.reserve * metrics.reserve_used
    objective -= resolved.fragment * metrics.fragment_score
    metrics.objective = objective
    return metrics


def block_spill(problem: Problem, job: JobView, nodes: list[int]) -> int:
    """Affinity spill of a placed soft job (0 for hard jobs): see the module docstring."""
    if not job.soft or job.family not in (Family.SUPERPOD, Family.RACK):
        return 0
    spill = 0
    size = job.sp_block
    for b in range(job.tasks // size):
        pods = Counter(int(problem.super_pod[n]) for n in nodes[b * size:(b + 1) * size])
        spill += size - max(pods.values())
    if job.family is Family.RACK:
        window = job.tp_block
        for w in range(job.tasks // window):
            racks = Counter(int(problem.rack[n]) for n in nodes[w * window:(w + 1) * window])
            spill += window - max(racks.values())
    return spill


def _reserve_used(problem: Problem, sp_hosts: set[int], ml_hosts: set[int]) -> int:
    whole = problem.whole_free
    total = 0
    if sp_hosts and problem.reserve_nodes > 0:
        free_per_pod = Counter(problem.super_pod[whole & (problem.super_pod >= 0)].tolist())
        used_per_pod = Counter(int(problem.super_pod[n]) for n in sp_hosts
                               if whole[n] and problem.super_pod[n] >= 0)
        for sp, used in used_per_pod.items():
            total += max(0, used - max(0, free_per_pod[sp] - problem.reserve_nodes))
    if ml_hosts:
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            if view.reserved_nodes <= 0:
                continue
            l1 = domain_keys(problem, t, 1)
            free_per = Counter(l1[whole & view.member].tolist())
            used_per = Counter(int(l1[n]) for n in ml_hosts if whole[n] and l1[n] >= 0)
            for g, used in used_per.items():
                total += max(0, used - max(0, free_per[g] - view.reserved_nodes))
    return total
