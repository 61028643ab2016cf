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

``image-hits`` (image locality; an npu-place addition)
    Per placed job that names an ``image``, the distinct nodes hosting its placed ranks
    (vNPU jobs: its slices) that already hold the image (``nodes[].images``): pulls
    avoided, as the kubelet pulls once per node.  Each is worth
    ``w_image_j = image-gb × ⌈size_j⌉`` (``size_j`` the image's GB), a reward.  Off (0)
    with config ``image-locality: false``.  A rank on its origin node counts too, but
    ``W_hit`` exceeds the term's largest total, so the term only orders placements of
    equal hits: it acts on the ranks without a usable origin.

The scalar objective (maximised) is::

    Σ_j placed_j · W_place · (1 + p_j) + W_hit · hits + Σ_j w_image_j · image_hits_j
      − w_fault · fault_returns − w_spill · spill − w_sub · subhealthy
      − w_reserve · reserve_used − w_frag · fragment

With the default (automatic) ``W_hit`` and ``W_place`` the order is lexicographic:
``W_hit`` exceeds the largest possible total of the lower terms and ``W_place`` exceeds
every hit and lower term together, so placing a job outweighs everything below it and one
more origin hit outweighs any combination of the terms below it.  The automatic weights
are derived from bounds of this scenario and kept below 2^31 in total (see
:func:`resolve_weights`).

Which nodes a job may use is in :mod:`models.eligibility` and the fragment score's per-job
computation in :mod:`models.fragment`; the names importers use are re-exported here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from models.compiled import (
    SUBHEALTHY,
    JobView,
    Problem,
    compile_scenario,
    distinct,
)
from models.derived import Derived
from models.eligibility import achievable_hits, eligible_nodes
from models.eligibility import node_usable_for as node_usable_for  # re-exported for importers
from models.eligibility import usable_mask as usable_mask  # re-exported for importers
from models.fragment import (
    derived_arrays,
    domain_keys,
    domain_parents,
    job_fragment,
    rack_counts,
    sum_by,
)
from models.limits import MAX_WEIGHT
from models.placement import MetricsModel, PlacementFile
from models.scenario import Family, Scenario
from models.vnpu import achievable_vnpu_hits, compile_vnpu, vnpu_hosts

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
    # image locality: reward per GB of image already on a hosting node
    image_gb: int = Field(1, alias="image-gb", ge=0, le=MAX_WEIGHT)


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
    vnpu_placed: tuple[int, ...] = ()  # per vNPU job index (``vnpu-jobs``)
    # image locality: reward per node hosting a job that holds its image, per
    # job index and per vNPU job index (0: no image, no holder, or the term off)
    image: tuple[int, ...] = ()
    vnpu_image: tuple[int, ...] = ()

    def image_of(self, j: int) -> int:
        """The image reward of job ``j`` (0 when the term does not apply)."""
        return self.image[j] if j < len(self.image) else 0

    def vnpu_image_of(self, j: int) -> int:
        """The image reward of vNPU job ``j`` (0 when the term does not apply)."""
        return self.vnpu_image[j] if j < len(self.vnpu_image) else 0


@dataclass(frozen=True)
class ObjectiveTerm:
    """What one term of the objective contributed to a placement's objective.

    Attributes
    ----------
    name
        The metric's contract name (``placed-jobs``, ``origin-hits``, ...).
    count
        The metric's value.
    weight
        Its weight per unit (``None`` for ``placed-jobs``, whose weight per job depends
        on its priority level, and for ``image-hits``, whose weight per node depends on
        the job's image size).
    value
        The signed contribution: ``+`` for placed jobs and origin hits, ``-`` for the
        penalties; the contributions of a placement sum to its objective.
    """

    name: str
    count: int
    weight: int | None
    value: int


@dataclass
class Metrics:
    """Every metric of a placement plus its scalar objective (and, in ``terms``, what each
    term of the objective contributed, in the order of the module docstring's sum)."""

    placed_jobs: int = 0
    origin_hits: int = 0
    origin_candidates: int = 0
    fault_returns: int = 0
    subhealthy_nodes: int = 0
    reserve_used: int = 0
    fragment_score: int = 0
    affinity_spill: int = 0
    achievable_origin_hits: int = 0
    image_hits: int = 0  # nodes hosting a job that already hold its image
    image_hit_gb: float = 0.0  # their images' GB (pulls avoided)
    objective: int = 0
    per_job_hits: dict[str, int] = field(default_factory=dict)
    per_job_candidates: dict[str, int] = field(default_factory=dict)
    per_job_fragment: dict[str, int] = field(default_factory=dict)
    terms: list[ObjectiveTerm] = field(default_factory=list)

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


# --------------------------------------------------------------------------- weights


def _fragment_bound(problem: Problem, job: JobView) -> int:
    if not job.rules.grouped:
        return min(job.tasks, problem.num_nodes)
    if job.family is Family.SUPERPOD:
        if job.sp_block <= 1:
            return 0
        mask = eligible_nodes(problem, job)
        counts = np.bincount(problem.super_pod[mask])
        return int(np.minimum(job.sp_block - 1, counts).sum())
    if job.rules.in_rack:
        mask = eligible_nodes(problem, job)
        pods, counts = rack_counts(problem, mask)
        windows = job.sp_block // job.tp_block
        return int(len(distinct(pods)) * (windows - 1) * job.tp_block
                   + 10 * int(np.minimum(job.tp_block - 1, counts).sum()))
    best = 0
    for t, name in enumerate(problem.tree_names):
        if problem.trees[name].depth < len(job.levels):
            continue
        mask = eligible_nodes(problem, job, t)
        l1 = domain_keys(problem, t, 1)
        size = int(l1.max(initial=-1)) + 1
        counts = np.bincount(l1[mask], minlength=size).astype(np.int64)
        present = counts > 0
        bound = np.where(present, np.minimum(job.levels[0] - 1, counts), 0)
        for i in range(1, len(job.levels)):
            parent = domain_parents(problem, t, i)
            upper = int(domain_keys(problem, t, i + 1).max(initial=-1)) + 1
            step = (job.levels[i] // job.levels[i - 1] - 1) * job.levels[i - 1]
            acc = sum_by(parent, bound, upper)
            present = sum_by(parent, present.astype(np.int64), upper) > 0
            bound = np.where(present, step + 10 * acc, 0)
        best = max(best, int(bound.sum()))
    return best


def _reserve_bound(problem: Problem) -> int:
    total = 0
    families = {job.family for job in problem.jobs}
    whole = derived_arrays(problem).whole
    if Family.SUPERPOD in families and problem.reserve_nodes > 0:
        counts = np.bincount(problem.super_pod[whole & (problem.super_pod >= 0)])
        total += int(np.minimum(problem.reserve_nodes, counts).sum())
    if Family.MULTILEVEL in families:
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            if view.reserved_nodes <= 0:
                continue
            l1 = domain_keys(problem, t, 1)
            counts = np.bincount(l1[whole & view.member])
            total += int(np.minimum(view.reserved_nodes, counts).sum())
    return total


#: :func:`resolve_weights` with the default :class:`Weights` (once per problem).
DEFAULT_WEIGHTS: Derived[None, ResolvedWeights] = Derived("default weights")


def resolve_weights(problem: Problem, weights: Weights | None = None) -> ResolvedWeights:
    """Integer weights for ``problem``; automatic ones make the objective lexicographic.

    When the automatic weights would make the sum of absolute coefficients exceed 2^31
    (CP-SAT misreports optimality beyond that), they are degraded in this order, each
    step recorded in ``notes``: the fragment weight drops to 0, then priority levels stop
    multiplying the placement weight, then the other lower terms leave the objective
    (placed jobs still outweigh origin hits).  Explicit weights that are too large raise
    ``ValueError``.
    """
    if weights is None or weights == Weights():
        return problem.derived.get_or_compute(
            DEFAULT_WEIGHTS, None, lambda: _resolve_weights(problem, Weights()))
    return _resolve_weights(problem, weights)


def image_reward(problem: Problem, image: str | None, size_gb: float, weight: int) -> int:
    """The image term's reward per hosting node that holds ``image``:
    ``weight × ⌈size_gb⌉``, 0 when no node holds it or ``image-locality`` is off."""
    if weight <= 0 or problem.image_mask(image) is None:
        return 0
    return weight * math.ceil(size_gb)


def _image_rewards(problem: Problem, weight: int
                   ) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Per job and per vNPU job, the image reward; and the largest total of the term
    (each job's reward times the most nodes it can host that hold its image)."""
    rewards = []
    bound = 0
    for job in problem.jobs:
        reward = image_reward(problem, job.image, job.image_size_gb, weight)
        rewards.append(reward)
        if reward:
            holders = len(problem.image_holders[job.image or ""])
            bound += reward * min(int(job.to_place.sum()), holders)
    vrewards = []
    for vjob in compile_vnpu(problem).jobs:
        spec = vjob.spec.image
        size = spec.size_gb if spec is not None and spec.size_gb is not None \
            else vjob.image_size_gb
        reward = image_reward(problem, spec.name if spec else None, size, weight)
        vrewards.append(reward)
        if reward and spec is not None:
            bound += reward * min(vjob.tasks, len(problem.image_holders[spec.name]))
    return tuple(rewards), tuple(vrewards), bound


def _resolve_weights(problem: Problem, weights: Weights) -> ResolvedWeights:
    fault_bound = sum(int(((job.origin >= 0) & job.fault).sum()) for job in problem.jobs)
    spill_bound = sum(
        job.tasks * (2 if job.rules.in_rack else 1)
        for job in problem.jobs
        if job.soft and job.rules.in_super_pod
    )
    sub_bound = int((problem.health == SUBHEALTHY).sum())
    reserve_bound = _reserve_bound(problem)
    frag_bound = sum(_fragment_bound(problem, job) for job in problem.jobs)
    image_w, vnpu_image_w, image_bound = _image_rewards(problem, weights.image_gb)
    candidates = sum(int(((job.origin >= 0) & ~job.fault).sum()) for job in problem.jobs)
    vnpu = compile_vnpu(problem)  # vNPU ranks count exactly as ordinary ranks
    candidates += sum(sum(1 for o in job.origin if o >= 0) for job in vnpu.jobs)
    priorities = sorted({job.priority for job in problem.jobs}
                        | {job.priority for job in vnpu.jobs})
    prio_rank = {p: i for i, p in enumerate(priorities)}
    notes: list[str] = []
    frag_w = weights.fragment
    use_levels = weights.priority_levels
    lower_on = True
    automatic = weights.placed is None and weights.origin_hit is None
    while True:
        lower = (weights.fault_return * fault_bound + weights.affinity_spill * spill_bound
                 + weights.subhealthy * sub_bound + weights.reserve * reserve_bound
                 + frag_w * frag_bound + image_bound) if lower_on else 0
        if weights.origin_hit is not None:
            hit = weights.origin_hit
        else:
            hit = lower + 1 if problem.prefer_previous_node else 0
        base = weights.placed if weights.placed is not None else hit * candidates + lower + 1
        job_w = tuple(
            base * (1 + prio_rank[job.priority]) if use_levels else base for job in problem.jobs
        )
        vnpu_w = tuple(
            base * (1 + prio_rank[job.priority]) if use_levels else base for job in vnpu.jobs
        )
        total = sum(job_w) + sum(vnpu_w) + hit * candidates + lower
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
                         "the objective, nor image locality (2^31 limit); placed jobs and "
                         "origin hits still do")
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
        vnpu_placed=vnpu_w,
        image=image_w if lower_on else tuple(0 for _ in image_w),
        vnpu_image=vnpu_image_w if lower_on else tuple(0 for _ in vnpu_image_w),
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
        if job.partly_running:  # running ranks stay; the placement lists the others
            out[j] = [int(job.running[r]) if job.running[r] >= 0
                      else problem.node_index[jp.ranks[str(r)]] for r in range(job.tasks)]
        else:
            out[j] = [problem.node_index[jp.ranks[str(r)]] for r in range(job.tasks)]
    return out


def evaluate(
    scenario: Scenario | Problem,
    placement: PlacementFile | dict[int, list[int]],
    weights: Weights | ResolvedWeights | None = None,
    vnpu: dict[int, list[int]] | None = None,
    tick: Callable[[], None] | None = None,
) -> Metrics:
    """Measure a placement: every metric and the scalar objective.

    Parameters
    ----------
    scenario
        The scenario or its compiled view.
    placement
        A placement file, or a mapping job index → node index per rank (a partly
        running job's running ranks included, on their nodes).  The placement should
        pass :func:`models.check.check`; evaluation assumes a valid placement.  Running
        ranks take no chips (``free`` already excludes them), host no counted node and
        are never origin candidates.
    weights
        Objective weights (default: automatic lexicographic weights).
    vnpu
        With a mapping: the placed ``vnpu-jobs`` (vNPU job index → node index per rank);
        none when absent.  A placement file carries its vNPU jobs itself.
    tick
        Called before each job is measured (a caller that must be able to stop between
        jobs passes its cancellation checkpoint: a 65,536-node batch takes tens of
        milliseconds in all).
    """
    problem = _as_problem(scenario)
    resolved = (weights if isinstance(weights, ResolvedWeights)
                else resolve_weights(problem, weights))
    placed = (placement_nodes(problem, placement) if isinstance(placement, PlacementFile)
              else placement)
    if isinstance(placement, PlacementFile):
        vnpu = vnpu_hosts(problem, placement)
    used = np.zeros(problem.num_nodes, dtype=np.int64)
    for j, nodes in placed.items():
        if tick is not None:
            tick()
        np.add.at(used, problem.jobs[j].placed_nodes(nodes), problem.jobs[j].npu_per_task)
    metrics = Metrics()
    placed_value = 0
    image_value = 0
    hosting_any = np.zeros(problem.num_nodes, dtype=bool)
    sp_hosts = np.zeros(problem.num_nodes, dtype=bool)
    ml_hosts = np.zeros(problem.num_nodes, dtype=bool)
    for job in problem.jobs:
        if tick is not None:
            tick()
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
        placed_value += resolved.job_placed[job.index]
        arr = np.asarray(nodes, dtype=np.int64)
        on_origin = (arr == job.origin) & (job.origin >= 0)
        hits = int((on_origin & ~job.fault).sum())
        metrics.per_job_hits[job.name] = hits
        metrics.origin_hits += hits
        metrics.fault_returns += int((on_origin & job.fault).sum())
        own = job.placed_nodes(arr)
        hosting_any[own] = True
        image_nodes = job_image_hits(problem, job, own)
        if image_nodes:
            metrics.image_hits += image_nodes
            metrics.image_hit_gb += image_nodes * job.image_size_gb
            image_value += resolved.image_of(job.index) * image_nodes
        if job.family is Family.SUPERPOD:
            sp_hosts[own] = True
        elif job.rules.in_tree:
            ml_hosts[own] = True
        tree = int(problem.node_tree[nodes[0]]) if job.rules.in_tree else None
        frag = job_fragment(problem, job, used, nodes, tree)
        metrics.per_job_fragment[job.name] = frag
        metrics.fragment_score += frag
        if job.soft and job.rules.in_super_pod:
            metrics.affinity_spill += block_spill(problem, job, nodes)
    vnpu_placed, vnpu_image = _add_vnpu_terms(problem, vnpu or {}, resolved, metrics,
                                              hosting_any)
    placed_value += vnpu_placed
    image_value += vnpu_image
    if tick is not None:
        tick()
    metrics.subhealthy_nodes = int((hosting_any & (problem.health == SUBHEALTHY)).sum())
    metrics.reserve_used = _reserve_used(problem, sp_hosts, ml_hosts)
    metrics.terms = [ObjectiveTerm("placed-jobs", metrics.placed_jobs, None, placed_value)]
    for name, count, weight, sign in (
            ("origin-hits", metrics.origin_hits, resolved.origin_hit, 1),
            ("fault-returns", metrics.fault_returns, resolved.fault_return, -1),
            ("affinity-spill", metrics.affinity_spill, resolved.affinity_spill, -1),
            ("subhealthy-nodes", metrics.subhealthy_nodes, resolved.subhealthy, -1),
            ("reserve-used", metrics.reserve_used, resolved.reserve, -1),
            ("fragment-score", metrics.fragment_score, resolved.fragment, -1)):
        metrics.terms.append(ObjectiveTerm(name, count, weight, sign * weight * count))
    metrics.terms.append(ObjectiveTerm("image-hits", metrics.image_hits, None, image_value))
    metrics.objective = sum(term.value for term in metrics.terms)
    return metrics


def _add_vnpu_terms(problem: Problem, placed: dict[int, list[int]], resolved: ResolvedWeights,
                    metrics: Metrics, hosting_any: np.ndarray) -> tuple[int, int]:
    """Count the vNPU jobs into ``metrics`` (placed, candidates, hits, hosting nodes, image
    hits) and return their placement weight and their image reward; their origin hits are
    weighted with everyone's."""
    view = compile_vnpu(problem)
    placed_value = 0
    image_value = 0
    for job in view.jobs:
        candidates = sum(1 for o in job.origin if o >= 0)
        metrics.origin_candidates += candidates
        metrics.per_job_candidates[job.name] = candidates
        metrics.achievable_origin_hits += achievable_vnpu_hits(view, job)
        nodes = placed.get(job.index)
        if nodes is None:
            metrics.per_job_hits[job.name] = 0
            continue
        metrics.placed_jobs += 1
        placed_value += resolved.vnpu_placed[job.index]
        hits = sum(1 for r, n in enumerate(nodes) if n == job.origin[r])
        metrics.per_job_hits[job.name] = hits
        metrics.origin_hits += hits
        hosting_any[np.asarray(nodes, dtype=np.int64)] = True
        image = job.spec.image
        mask = problem.image_mask(image.name if image is not None else None)
        if mask is not None:
            found = int(mask[distinct(np.asarray(nodes, dtype=np.int64))].sum())
            metrics.image_hits += found
            metrics.image_hit_gb += found * (image.size_gb if image is not None
                                             and image.size_gb is not None
                                             else job.image_size_gb)
            image_value += resolved.vnpu_image_of(job.index) * found
    return placed_value, image_value


def job_image_hits(problem: Problem, job: JobView, own: np.ndarray) -> int:
    """Distinct nodes of ``own`` (the nodes of a job's placed ranks) that hold the job's
    image: the image term's count (0 when the term does not apply)."""
    mask = problem.image_mask(job.image)
    if mask is None or not len(own):
        return 0
    return int(mask[distinct(np.asarray(own, dtype=np.int64))].sum())


def block_spill(problem: Problem, job: JobView, nodes: list[int]) -> int:
    """Affinity spill of a placed soft job (0 for hard jobs): see the module docstring."""
    if not job.soft or not job.rules.in_super_pod:
        return 0
    spill = 0
    size = job.sp_block
    for b in range(job.tasks // size):
        pods = Counter(int(problem.super_pod[n]) for n in nodes[b * size:(b + 1) * size])
        spill += size - max(pods.values())
    if job.rules.in_rack:
        window = job.tp_block
        for w in range(job.tasks // window):
            racks = Counter(int(problem.rack[n]) for n in nodes[w * window:(w + 1) * window])
            spill += window - max(racks.values())
    return spill


def _reserve_used(problem: Problem, sp_hosts: np.ndarray, ml_hosts: np.ndarray) -> int:
    """Reserve used by super-pod and multilevel jobs (masks of the nodes hosting them)."""
    whole = derived_arrays(problem).whole
    total = 0
    if sp_hosts.any() and problem.reserve_nodes > 0:
        in_pod = whole & (problem.super_pod >= 0)
        free_per_pod = np.bincount(problem.super_pod[in_pod])
        used_per_pod = np.bincount(problem.super_pod[in_pod & sp_hosts],
                                   minlength=len(free_per_pod))
        spare = np.maximum(0, free_per_pod - problem.reserve_nodes)
        total += int(np.maximum(0, used_per_pod - spare)[used_per_pod > 0].sum())
    if ml_hosts.any():
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            if view.reserved_nodes <= 0:
                continue
            l1 = domain_keys(problem, t, 1)
            inside = whole & view.member
            free_per = np.bincount(l1[inside], minlength=int(l1.max(initial=-1)) + 1)
            used_per = np.bincount(l1[inside & ml_hosts], minlength=len(free_per))
            spare = np.maximum(0, free_per - view.reserved_nodes)
            total += int(np.maximum(0, used_per - spare)[used_per > 0].sum())
    return total
