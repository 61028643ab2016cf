"""Greedy placement of ordinary NPU jobs: the base handler pipeline (reference §2.0, §2.1.1).

Every ordinary policy (``chip8-node8``, ``chip1-node8``, ``chip1-node16``, ``chip4-node4``,
``chip1-node2`` and also ``chip8-node16``, ``chip2-node16``, ``chip2-node8``,
``module-a3-16``, ``chip4-node8``, ``chip4-node16``, ``chip1-softShareDev``) is placed with the
base handler.  The chip-level scoring of the 910A rings (``module910x8``), the A2 Box16 rings
(``module910bx16``), the A3 cards (``module910a3x16``) and the 4-chip meshes (``chip4nodex``)
is not modelled: scenarios carry a count of free chips per node, not chip IDs, so ring, card
and mesh fits cannot be computed.  Their request validity rules are still checked by
:mod:`models.validation`.

One task at a time, in :func:`task_order`, the pipeline is upstream's ``BatchNodeOrderFn``:

1. **Predicate**: the node is not unhealthy and has ``free >= request`` chips left (free
   counts of the job's own earlier ranks included: several ranks may share a node).
2. **Policy score** (base handler): ``healthyCards × 100 − usable``.  ``usable`` is the
   node's free chip count; ``healthyCards = MaxNodeNPUNum − unhealthy chips`` where
   ``MaxNodeNPUNum`` is the policy's node size (``JobView.node_npus``) and the unhealthy chip
   count is 0 because scenarios have node-level health only.  For nodes whose ``npus`` equal
   the policy's size (every bundled scenario) this is ``npus × 100 − free``.  A node with more
   free chips than ``MaxNodeNPUNum`` keeps score 0, as upstream.
3. **Previous-node bonus** (§3.4, :func:`previous_node_bonus`): self / peer / other
   categories, the chosen node's score is *set* to ``max + 100``.
4. **Fault adjustments** (§4.3, :func:`fault_adjust`): −1 on sub-healthy nodes; when the job
   is a fault job, −64 on every node that hosted one of its fault ranks; both floored at 0.
5. ``× 100``, then the best node.  Ties are broken by natural node-name order
   (``problem.natural_pos``; upstream's Go map order is random).

The job takes all its ranks in one transaction or none: the ranks are placed on a local copy
of the free counts and the strategy never touches ``state``.

The pipeline is not evaluated node by node for every rank.  Whenever step 3 boosts a node,
that node wins step 5, so the bonus target *is* the pick: its adjusted score is at least
``(max(0, top) + 100 − 1 − 64) × 100`` for the top policy score ``top``, and every other
node's is at most ``top × 100`` (policy scores are ≥ 0 and step 4 only lowers them).
Every other search ("best other node by policy score", "best peer node by policy score",
"best node by adjusted score") runs on a :class:`ScoreClasses` index: the scores depend
only on a node's free count and flags, take a few distinct values, and only the node just
picked changes between two ranks.  The index returns the very node the per-node
computation (:func:`best_node` on the arrays) would, so the placements are the same.

Deviations from the released code, following the RFC (reference §3.7):

* Row 3 — the RFC says the −64 fault penalty is applied after the bonus so that a fault
  rank's old node is not forced; in the released code the bonus (``max + 100``) always
  survives the penalty.  Here a fault rank never receives the bonus on its own old node
  while another candidate exists (upstream boosts it when no "other" node exists, even if a
  peer node does), and that node then gets −64 like every fault node of the job.
* Row 4 — upstream's ``TaskOrderFn`` is not antisymmetric (two ranks with different cached
  nodes both claim to go first) and leaves uncached ranks unordered.  Here the order is
  total: ranks with a cached (non-fault) previous node first, then fault ranks with a
  cached node, then every other rank, each tier by number.  Fault ranks go before the
  uncached ranks so that those cannot take the last node a fault rank could use instead
  of its old one (every rank of a fault job avoids the fault nodes, −64): the RFC's fault
  pod prefers not to return, and the uncached ranks have no preference to lose.  A final
  pass (:func:`keep_faults_away`) takes a fault rank still on its old node off it by a
  swap with a rank not on its own cached node (**our choice:** first one whose cached node
  it is, then the lowest rank), else by a move to a node with room (healthy first).
"""

from __future__ import annotations

import bisect
import heapq
import math

import numpy as np

from heuristics.base import JobOutcome
from heuristics.images import image_first, tie_positions
from heuristics.state import ClusterState
from models.compiled import SUBHEALTHY, UNHEALTHY, JobView, Problem, distinct

#: Upstream ``defaultPreferPreviousScore``: the preferred node's score becomes max + 100.
PREFER_PREVIOUS_BONUS = 100.0
#: Sub-healthy node penalty (``AffScore1``).
SUBHEALTHY_PENALTY = 1.0
#: Penalty on a node that hosted a fault task of a fault job (``AffScore8 × AffScore8``).
FAULT_NODE_PENALTY = 64.0
#: Weight applied to the NPU plugin's scores (``scoreWeight``).
SCORE_WEIGHT = 100.0
#: Multiplier of the healthy chip count in the base handler's score.
HEALTHY_CARD_WEIGHT = 100.0


def policy_scores(
    usable: np.ndarray, max_npus: int, unhealthy_chips: np.ndarray | None = None
) -> np.ndarray:
    """Base handler score ``healthyCards × 100 − usable`` per node (reference §2.1.1).

    Parameters
    ----------
    usable
        Free (usable) chips per node.
    max_npus
        The handler's ``MaxNodeNPUNum`` (the policy's node size).
    unhealthy_chips
        Unhealthy chips per node (default none; scenarios have node-level health only).

    Returns
    -------
    numpy.ndarray
        float64 scores; nodes with more usable chips than ``max_npus`` score 0.
    """
    usable = np.asarray(usable, dtype=np.float64)
    healthy = np.full(usable.shape, float(max_npus))
    if unhealthy_chips is not None:
        healthy -= np.asarray(unhealthy_chips, dtype=np.float64)
    scores = healthy * HEALTHY_CARD_WEIGHT - usable
    return np.where(usable > max_npus, 0.0, scores)


def best_node(scores: np.ndarray, mask: np.ndarray, order: np.ndarray) -> int:
    """Index of the highest score among ``mask``; ties go to the lowest ``order``.

    ``order`` is the natural node-name position, the documented tie-break (upstream's
    ``nodeWithMaxScore`` iterates a Go map, which is random).  Returns -1 for an empty mask.
    """
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return -1
    values = scores[idx]
    top = idx[values == values.max()]
    return int(top[np.argmin(order[top])])


def previous_node_bonus(
    scores: np.ndarray,
    candidate: np.ndarray,
    self_node: int,
    peer: np.ndarray,
    fault_rank: bool,
    order: np.ndarray,
) -> int:
    """Apply ``addPreferPreviousNodeScore`` to one task's scores, in place (reference §3.4).

    Parameters
    ----------
    scores
        Policy scores per node (only entries under ``candidate`` matter).
    candidate
        Nodes that passed the predicate (upstream's score map keys).
    self_node
        Index of this rank's cached node, or -1.
    peer
        Nodes cached for *another* rank of the same owner.
    fault_rank
        Whether this rank is a fault rank of a fault job.
    order
        Tie-break order (natural node-name position).

    Returns
    -------
    int
        The node that received the bonus, or -1.

    Notes
    -----
    ``bonus = max(0, max candidate score) + 100`` and the chosen node's score is *set* to
    it.  Categories: ``self``; ``peer`` (cached for another rank, self excluded); ``other``
    (every remaining candidate).  A non-fault rank boosts self, else the best other, else
    the best peer.  A fault rank boosts the best other; its own node only when it is the
    only candidate (RFC §3.1.2: a fault node is never forced — upstream would also boost it
    when only peers remain); peers never.
    """
    if not candidate.any():
        return -1
    bonus = max(0.0, float(scores[candidate].max())) + PREFER_PREVIOUS_BONUS
    self_ok = self_node >= 0 and bool(candidate[self_node])
    peers = candidate & peer
    others = candidate & ~peer
    if self_node >= 0:
        peers[self_node] = False
        others[self_node] = False
    target = -1
    if fault_rank:
        if others.any():
            target = best_node(scores, others, order)
        elif self_ok and not peers.any():
            target = self_node
    elif self_ok:
        target = self_node
    elif others.any():
        target = best_node(scores, others, order)
    elif peers.any():
        target = best_node(scores, peers, order)
    if target >= 0:
        scores[target] = bonus
    return target


def fault_adjust(
    scores: np.ndarray, subhealthy: np.ndarray, fault_nodes: np.ndarray | None
) -> np.ndarray:
    """The fault handler's adjustments (reference §4.3), each floored at 0.

    −1 on sub-healthy nodes, then −64 on nodes that hosted a fault task when the job is a
    fault job (``fault_nodes`` is ``None`` or all false otherwise).
    """
    out = np.where(subhealthy, np.maximum(0.0, scores - SUBHEALTHY_PENALTY), scores)
    if fault_nodes is not None:
        out = np.where(fault_nodes, np.maximum(0.0, out - FAULT_NODE_PENALTY), out)
    return out


def compare_tasks(left: int, right: int, cached: np.ndarray,
                  avoiding: np.ndarray | None = None) -> int:
    """``TaskOrderFn`` as a total, antisymmetric comparator (RFC §3.7 row 4).

    ``cached[r]`` is rank ``r``'s previous node (-1 when none, for fault ranks, and for
    every rank when prefer-previous-node is off).  ``avoiding[r]`` (optional) tells whether
    rank ``r`` is a fault rank with a live cache entry (a node it should not return to).
    Ranks with a cached node come first, then fault ranks avoiding a node, then the rest;
    inside a tier the lower rank comes first.  Returns -1 when ``left`` goes first, 1 when
    ``right`` does, 0 only when equal.
    """

    def tier(r: int) -> int:
        if int(cached[r]) >= 0:
            return 0
        return 1 if avoiding is not None and bool(avoiding[r]) else 2

    lt, rt = tier(left), tier(right)
    if lt != rt:
        return -1 if lt < rt else 1
    return (left > right) - (left < right)


def task_order(job: JobView) -> np.ndarray:
    """Ranks of ``job`` in :func:`compare_tasks` order: cached ranks, then fault ranks with
    a cached node, then the others, each tier by rank."""
    cached = job.preferred >= 0
    avoiding = job.fault & (job.origin >= 0) & ~cached
    ranks = np.arange(job.tasks)
    return np.concatenate([ranks[cached], ranks[avoiding], ranks[~cached & ~avoiding]])


class ScoreClasses:
    """The best node of a set of candidates by a score that takes few distinct values.

    Candidates are numbered in natural node-name order (local index = tie-break order).
    Members are grouped by their exact score (a *class*); each class is a min-heap of local
    indices, so its top is the class's tie-break winner, and :meth:`best` reads the top of
    the highest non-empty class: the node :func:`best_node` returns for the members' scores.
    A node whose score changes is pushed to its new class and left in the old one (lazy
    deletion: an entry counts only while the node's current score is the class's score; a
    node taken out has score NaN, equal to none).  A class's heap (a Python list) is built
    only when the class is first used, from its members at construction in ascending order
    (a sorted list is a heap): a job with few ranks looks at the top classes only.

    Parameters
    ----------
    size
        Number of candidates (local indices ``0 .. size - 1``).
    members
        Local indices of the members, ascending.
    scores
        Score of each member (float64, the exact values the arrays would hold).
    """

    def __init__(self, size: int, members: np.ndarray, scores: np.ndarray) -> None:
        #: Score per candidate at construction; NaN for non-members.
        self.initial = np.full(size, np.nan)
        self.initial[members] = scores
        #: Current score of the members moved since construction (NaN: taken out).
        self.moved: dict[int, float] = {}
        self.members = members
        self.scores = scores
        #: Scores of the classes whose heap is not built yet.
        self.unused: set[float] = set(distinct(scores).tolist())
        self.heaps: dict[float, list[int]] = {}
        #: Scores of the classes, ascending (the best class is last).
        self.values: list[float] = sorted(self.unused)

    def heap(self, value: float) -> list[int]:
        """The heap of class ``value`` (empty for a new class)."""
        heap = self.heaps.get(value)
        if heap is None:
            heap = self.heaps[value] = []
            if value in self.unused:
                self.unused.remove(value)
                heap += self.members[self.scores == value].tolist()
        return heap

    def score(self, n: int) -> float:
        """Current score of candidate ``n``; NaN for non-members and members taken out."""
        score = self.moved.get(n)
        return float(self.initial[n]) if score is None else score

    def best(self) -> int:
        """Member with the highest score, lowest local index among ties; -1 when none."""
        values, moved = self.values, self.moved
        while values:
            value = values[-1]
            heap = self.heap(value)
            # An entry is stale when its node moved since (to another class or out).
            while heap and moved.get(heap[0], value) != value:
                heapq.heappop(heap)
            if heap:
                return heap[0]
            del self.heaps[value]
            values.pop()
        return -1

    def move(self, n: int, score: float | None) -> None:
        """Give member ``n`` a new score, or take it out (``None``); non-members are ignored.

        A member taken out never comes back (free counts only shrink during a job).
        """
        old = self.score(n)
        if math.isnan(old) or old == score:
            return
        if score is None:
            self.moved[n] = math.nan
            return
        self.moved[n] = score
        if score not in self.heaps and score not in self.unused:
            bisect.insort(self.values, score)
        heapq.heappush(self.heap(score), n)


def place_ordinary(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Place ordinary job ``j`` with the base handler pipeline, all ranks or none.

    Parameters
    ----------
    problem
        The compiled scenario.
    j
        Job index.
    state
        Free chips left by jobs placed earlier in the batch (not modified).

    Returns
    -------
    JobOutcome
        Node index per rank (several ranks may share a node), or upstream's
        ``NPUResourceShortage`` reason.

    Notes
    -----
    Per rank this is :func:`previous_node_bonus` then :func:`fault_adjust` and
    :func:`best_node` over every candidate, computed with :class:`ScoreClasses` (module
    docstring): O(distinct scores) per rank instead of O(nodes).
    """
    return place_ordinary_job(problem, problem.jobs[j], state)


def place_ordinary_job(problem: Problem, job: JobView, state: ClusterState) -> JobOutcome:
    """:func:`place_ordinary` for a job view (the pod-level path passes the view of a
    partly running job's pending ranks)."""
    if job.rules.grouped:
        raise ValueError(f"job '{job.name}' is a {job.family.value} job, not an ordinary one")
    request = job.npu_per_task
    # Free counts only shrink while the job's ranks are placed: the nodes that can host a
    # rank now are the only candidates for every rank, so work on that subset, numbered in
    # natural node-name order (a lower local index wins a tie).
    usable0 = state.free >= request
    usable0 &= problem.health != UNHEALTHY
    cand = problem.natural_order[usable0[problem.natural_order]]
    # npu-place addition: among equal scores, nodes holding the job's image
    # first (a lower local index wins a tie); natural order without image locality
    cand = image_first(problem, job.image, cand)
    room = int((state.free[cand] // request).sum()) if cand.size else 0
    if room < job.tasks:
        idle = int(state.free[problem.health != UNHEALTHY].max(initial=0))
        return JobOutcome.fail(
            f"NPUResourceShortage: node don't have enough resource, req<{request}>, "
            f"idle<{idle}>: job '{job.name}' needs {job.tasks} tasks x {request} NPUs but the "
            f"healthy nodes have room for only {room} such tasks"
        )
    free = state.free[cand].astype(np.int64)
    order = tie_positions(problem, job.image)[cand]
    subhealthy = problem.health[cand] == SUBHEALTHY
    local = np.full(problem.num_nodes, -1, dtype=np.int64)
    local[cand] = np.arange(cand.size)

    fault_job = bool(job.fault.any())
    fault_mask = np.zeros(cand.size, dtype=bool)
    if fault_job:
        fault_origins = job.origin[job.fault & (job.origin >= 0)]
        hosted = local[fault_origins]
        fault_mask[hosted[hosted >= 0]] = True

    # The bonus step runs only when the feature is on and the owner has cache entries
    # (upstream's PrefNodeMap, which holds every cached rank, fault ranks included).
    use_bonus = job.prefer_previous and bool((job.origin >= 0).any())
    peer_mask = np.zeros(cand.size, dtype=bool)
    self_local = np.full(job.tasks, -1, dtype=np.int64)
    if use_bonus:
        cached = job.origin >= 0
        mapped = local[job.origin[cached]]
        peer_mask[mapped[mapped >= 0]] = True
        self_local[cached] = mapped

    # A node's policy score depends only on its free count, its adjusted score also on its
    # sub-healthy and fault flags: tabulate both per free count (row 2 × sub + fault of
    # ``adjusted_of`` for a node's flags: ``adjusted_row``).
    counts = np.arange(int(free.max(initial=0)) + 1)
    raw_of = policy_scores(counts, job.node_npus)
    adjusted_of = np.stack([
        fault_adjust(raw_of, np.full(counts.size, sub), np.full(counts.size, fault))
        * SCORE_WEIGHT
        for sub in (False, True) for fault in (False, True)
    ])
    adjusted_row = 2 * subhealthy.astype(np.int64) + fault_mask

    def index(members: np.ndarray, adjusted: bool, left: np.ndarray) -> ScoreClasses:
        """A :class:`ScoreClasses` of the ``members`` with room left, on free counts ``left``."""
        members = members[left[members] >= request]
        scores = (adjusted_of[adjusted_row[members], left[members]] if adjusted
                  else raw_of[left[members]])
        return ScoreClasses(cand.size, members, scores)

    raw_by_count = raw_of.tolist()
    adjusted_by_count = adjusted_of.tolist()
    self_node_of = self_local.tolist()
    is_fault_rank = job.fault.tolist()
    free_left = free.tolist()
    usable = cand.size  # candidates with room for one more rank (upstream's score map)
    usable_peers = int(peer_mask.sum())  # ... of them cached for a rank of the owner
    others = index(np.flatnonzero(~peer_mask), False, free) if use_bonus else None
    peers: ScoreClasses | None = None  # built when first needed (rare)
    # With the bonus step on, the adjusted scores decide only when no node gets the bonus
    # (rare): built when first needed, on the free counts of that moment.
    by_adjusted = None if use_bonus else index(np.arange(cand.size), True, free)
    picks = [-1] * job.tasks  # local index per rank
    for rank in task_order(job).tolist():
        if usable == 0:  # unreachable after the room check; kept as a guard
            return JobOutcome.fail(
                f"NPUResourceShortage: node don't have enough resource, req<{request}>, "
                f"idle<{max(free_left, default=0)}>: rank {rank} of job '{job.name}' fits "
                "on no node"
            )
        # previous_node_bonus's choice of target; the target is then the pick.
        pick = -1
        if others is not None:
            self_node = self_node_of[rank]
            self_ok = self_node >= 0 and free_left[self_node] >= request
            has_others = usable > usable_peers
            if is_fault_rank[rank]:
                if has_others:
                    pick = others.best()
                elif self_ok and usable_peers == 1:  # no peer but itself
                    pick = self_node
            elif self_ok:
                pick = self_node
            elif has_others:
                pick = others.best()
            else:
                if peers is None:
                    peers = index(np.flatnonzero(peer_mask), False, np.asarray(free_left))
                pick = peers.best()
        if pick < 0:  # no bonus: the best adjusted score
            if by_adjusted is None:
                by_adjusted = index(np.arange(cand.size), True, np.asarray(free_left))
            pick = by_adjusted.best()
        left = free_left[pick] - request
        free_left[pick] = left
        if left < request:
            usable -= 1
            usable_peers -= int(peer_mask[pick])
            raw = adjusted = None
        else:
            raw = raw_by_count[left]
            adjusted = adjusted_by_count[int(adjusted_row[pick])][left]
        for classes in (others, peers):
            if classes is not None:
                classes.move(pick, raw)
        if by_adjusted is not None:
            by_adjusted.move(pick, adjusted)
        picks[rank] = pick
    nodes = cand[picks].astype(np.int32)
    if fault_job:
        free = np.asarray(free_left, dtype=np.int64)
        keep_faults_away(job, nodes, cand, free, order, subhealthy)
    return JobOutcome(nodes)


def keep_faults_away(job: JobView, nodes: np.ndarray, cand: np.ndarray, free: np.ndarray,
                     order: np.ndarray, subhealthy: np.ndarray) -> None:
    """Take every fault rank still on its old node off it when no hit is lost, in place.

    The pipeline scores one rank at a time, so a rank placed earlier may have taken the
    last node a fault rank could use instead of its old one.  Per fault rank in rank order:
    swap with a rank that is not on its own cached node (first one whose cached node the
    fault rank's node is, then the lowest rank; a fault rank avoiding that node is never a
    partner), else move to a candidate with room left (healthy before sub-healthy, then
    natural order).  Neither changes any other rank's hit.

    Parameters
    ----------
    job
        The job being placed.
    nodes
        Node index per rank (modified).
    cand, free, order, subhealthy
        Candidate node indices, their chips left after the job, natural positions and
        sub-healthy flags (``free`` is modified on a move).
    """
    origin = job.origin.tolist()
    fault = job.fault.tolist()
    for r in range(job.tasks):
        x = origin[r]
        if not fault[r] or x < 0 or int(nodes[r]) != x:
            continue
        best, best_key = -1, (2, 0)
        for q in range(job.tasks):
            nq = int(nodes[q])
            hit = origin[q] == nq and not fault[q]  # q would lose its hit
            if q == r or nq == x or hit or (fault[q] and origin[q] == x):
                continue
            key = (0 if origin[q] == x and not fault[q] else 1, q)
            if key < best_key:
                best, best_key = q, key
        if best >= 0:
            nodes[r], nodes[best] = nodes[best], x
            continue
        room = np.flatnonzero((free >= job.npu_per_task) & (cand != x))
        if room.size:
            pick = int(room[np.lexsort((order[room], subhealthy[room]))[0]])
            free[pick] -= job.npu_per_task
            free[np.flatnonzero(cand == x)] += job.npu_per_task
            nodes[r] = cand[pick]
