"""Origin-first construction: a second warm start for the solver (not an upstream strategy).

The faithful greedy ports decide block by block in upstream's order, so a block that
comes first can take the rack or super pod that a later block's ranks ran on.  This
construction instead places the blocks (and 950 rack windows) with the most reachable
origins first, each into the domain holding its origins, and only then fills the rest.
It is used only as an extra CP-SAT hint when it scores better than greedy; the ``greedy``
engine stays a faithful port.

Super-pod (A3/850) and 950 jobs without UB memory, hard and soft alike, are re-placed
block by block (a soft job as a hard one: no spill).
Ordinary jobs are re-placed together: first every rank whose cached node still has room
goes back to it, for all ordinary jobs of the batch (greedy places job after job, so an
early job's uncached ranks can take a later job's cached nodes), then each job's other
ranks fill the fullest nodes first (upstream's best fit), keeping off nodes other ranks
still want and fault ranks off their old node.  Multilevel jobs are re-placed last, by
upstream's own strategy in an origin-first order (:mod:`heuristics.multilevel.first`).
Every other job keeps greedy's answer, and so does every partly running job
(``running-ranks``).
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from heuristics.state import ClusterState
from models.check import check
from models.compiled import SUBHEALTHY, UNHEALTHY, JobView, Problem
from models.documents import paused_gc
from models.errors import OutOfTime
from models.objective import ResolvedWeights, evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from models.search_size import search_size

#: The multilevel passes of the construction, in the order they run (a wall-clock
#: deadline keeps the best of those finished): ``(hold_back, guided, smallest_first)`` of
#: :func:`heuristics.multilevel.first.multilevel_pass`, ``hold_back`` ``None`` for
#: :func:`heuristics.multilevel.first.relabel_plan` of the base plan.  The guided pass
#: that places the jobs of fewest ranks first comes right after the relabelling: a large
#: job placed first takes the level domains a small job's cached nodes need as a whole
#: group, where the small job placed first costs the large one a few ranks (multilevel,
#: 16,384 nodes, seed 4242: a 512-rank job kept a 64-rank job off all 64 of its cached
#: nodes; this pass gave 86 % of the 10-s search's gain over greedy, the best of the
#: others 28 %, at 0.16-0.24 s of CPU).  Where that pass is the search's start
#: (:func:`smallest_first_pays`) it runs first (:func:`multilevel_passes`).
MULTILEVEL_PASSES: tuple[tuple[bool | None, bool, bool], ...] = (
    (None, False, False), (False, True, True), (False, False, False), (True, False, False),
    (False, True, False), (True, True, False))
#: The pass with the smallest jobs first runs when the multilevel jobs' part of a
#: whole-batch model would hold at least this many (job, cell) pairs
#: (:attr:`models.search_size.SearchSize.tree_pairs`), not by the node count.  Below it
#: the search from the older start repairs what that start misses, and the start of
#: this pass led it to a worse optimum: on 8,192-node batches (seeds 5151 and 6262, not
#: tuned on; 31,933 and 33,638 pairs) it raised the answers at deterministic time 0.2
#: but the 10-s answer ended 14 % and 5 % of the gain below the older start's.  From
#: there the start decides: on 16,384-node batches (78,448 and 82,288 pairs) the steps
#: that repair the older start come after a short budget's end (the whole-batch phase
#: found nothing better in 9.1 deterministic seconds on seed 4242), and this pass kept
#: the 10-s answer (0 % and -0.25 %) and raised the 1-s CPU share from 85 % to 99 % on
#: one of them (docs/scale.md, *Multilevel short budgets*).
SMALLEST_FIRST_MIN_PAIRS = 50_000


def multilevel_passes(pays: bool) -> tuple[tuple[bool | None, bool, bool], ...]:
    """:data:`MULTILEVEL_PASSES` in the order they run: with ``pays``
    (:func:`smallest_first_pays`) the smallest-first pass before the relabelling.  On
    the batches where it pays it holds most of the construction's gain (65,536-node
    multilevel, seed 8803: 98 %, the relabelling 13 %), and a wall-clock deadline that
    cuts the construction keeps the passes finished: the relabelling and its check
    before it cost that pass 20-30 ms of a 0.2-s budget."""
    if not pays:
        return MULTILEVEL_PASSES
    first = [p for p in MULTILEVEL_PASSES if p[2]]
    return (*first, *(p for p in MULTILEVEL_PASSES if not p[2]))


def smallest_first_pays(problem: Problem) -> bool:
    """Whether the multilevel construction runs its pass with the smallest jobs first on
    ``problem`` (:data:`SMALLEST_FIRST_MIN_PAIRS`)."""
    return search_size(problem).tree_pairs >= SMALLEST_FIRST_MIN_PAIRS


def _usable(problem: Problem, job: JobView, free: np.ndarray) -> np.ndarray:
    mask = (free == problem.npus) & (problem.npus == job.npu_per_task)
    mask &= problem.health != 2
    mask &= problem.super_pod >= 0
    if job.rules.in_rack:
        mask &= problem.rack >= 0
    return mask


def _order_nodes(problem: Problem, nodes: list[int], wanted: set[int]) -> list[int]:
    """Nodes nobody prefers first, healthy before sub-healthy, natural order."""
    health, natural = problem.health_list, problem.natural_pos_list
    return sorted(nodes, key=lambda n: (n in wanted, int(health[n] == SUBHEALTHY),
                                        natural[n]))


def _place_job(problem: Problem, job: JobView, free: np.ndarray, wanted: set[int],
               spare: bool = False, deadline: float | None = None) -> np.ndarray | None:
    """Blocks to super pods by reachable origins, then windows to racks, then nodes.

    Blocks without an origin go to the fullest super pod that fits them, windows without
    an origin to the fullest rack (super pod) that fits them; with ``spare``, windows
    first to those where they must take the fewest nodes that ranks of other jobs
    prefer (nodes nobody else wants are taken first inside a rack), and so do the
    blocks of a job without racks (A3/850: a 950 job's blocks keep their super pods, as
    on ``950-n32768-batch16-s9403`` sparing them too cost the search's start 141,612
    under deterministic time 0.2).  Raises :class:`OutOfTime` past ``deadline``, checked
    per block and per window that looks for room (one A3 job of 65,536 nodes: 35-40 ms).

    The racks (super pods) are numbered in the order of their keys, so every tie is
    broken as by the keys; the work per node is numpy's, and Python's per rank, per bin
    and per block (a 65,536-node batch has 8,192 racks).
    """
    usable = _usable(problem, job, free)
    preferred: list[int] = job.preferred.tolist()
    block = job.sp_block
    window = job.rules.window(job)
    per_window = block // window
    # racks (950) or whole super pods (A3/850) are the "bins" windows go into
    at = np.flatnonzero(usable)
    pods_at = problem.super_pod[at].astype(np.int64)
    # racks may repeat across pods: a bin is (rack or pod, pod), numbered by that key
    keys = (problem.rack[at] if job.rules.in_rack else pods_at) * 100003 + pods_at
    _, group_of = np.unique(keys, return_inverse=True)
    group_of = group_of.astype(np.int64)
    size = np.bincount(group_of)
    bins = len(size)
    by_group = np.argsort(group_of, kind="stable")
    starts: list[int] = np.concatenate(([0], np.cumsum(size))).tolist()
    pod_arr = np.zeros(bins, dtype=np.int64)
    pod_arr[group_of] = pods_at
    pod_of_bin: list[int] = pod_arr.tolist()
    bin_of_node = np.full(problem.num_nodes, -1, dtype=np.int64)
    bin_of_node[at] = group_of
    # free nodes per bin that no other job's rank prefers (only counted with ``spare``)
    own = {o for o in preferred if o >= 0}
    if spare:
        taken = np.isin(at, np.fromiter(wanted - own, dtype=np.int64, count=len(wanted - own)))
        clean: list[int] = np.bincount(group_of, weights=~taken,
                                       minlength=bins).astype(np.int64).tolist()
    else:
        clean = [window] * bins
    room: list[int] = size.tolist()
    capacity: dict[int, int] = {}  # windows each pod can still take
    pods, per_pod = np.unique(pod_arr, return_inverse=True)
    pod_windows = np.bincount(per_pod, weights=size // window).astype(np.int64)
    capacity.update(zip(pods.tolist(), pod_windows.tolist(), strict=True))
    windows = job.tasks // window
    # the bin of each rank's reachable origin (-1: none)
    origin_bin: list[int] = np.where(job.preferred >= 0,
                                     bin_of_node[np.maximum(job.preferred, 0)], -1).tolist()
    window_bins: list[Counter[int]] = []
    for w in range(windows):
        counts: Counter[int] = Counter()
        for r in range(w * window, (w + 1) * window):
            k = origin_bin[r]
            if k >= 0:
                counts[k] += 1
        window_bins.append(counts)
    blocks = job.tasks // block
    potential = []
    for b in range(blocks):
        votes: Counter[int] = Counter()
        for w in range(b * per_window, (b + 1) * per_window):
            for k, c in window_bins[w].items():
                votes[pod_of_bin[k]] += c
        best = min(votes.items(), key=lambda kv: (-kv[1], kv[0])) if votes else (-1, 0)
        potential.append((-best[1], b, best[0]))
    potential.sort()
    # with ``spare`` (a super-pod job's blocks; a 950 job's spare only racks): free nodes
    # per pod that no other job's rank prefers, as blocks take them (those first)
    spare_pods = spare and not job.rules.in_rack
    clean_of_pod: dict[int, int] = {}
    if spare_pods:
        for k, c in enumerate(clean):
            clean_of_pod[pod_of_bin[k]] = clean_of_pod.get(pod_of_bin[k], 0) + c

    def pod_key(pod: int) -> tuple[int, int, int]:
        spill = max(0, block - clean_of_pod[pod]) if spare_pods else 0
        return spill, capacity[pod], pod

    pod_of_block: dict[int, int] = {}
    for _, b, pod in potential:
        if pod >= 0 and capacity[pod] >= per_window:
            pod_of_block[b] = pod
            capacity[pod] -= per_window
            if spare_pods:
                clean_of_pod[pod] = max(0, clean_of_pod[pod] - block)
    # the other blocks, each to the pod with the least room that fits it (lowest pod
    # first; with ``spare_pods`` first those where it takes the fewest nodes other jobs'
    # ranks prefer): capacities only fall from here, so a pod that cannot fit a block is
    # out, and a pod's entry whose key changed since is stale
    fitting = [pod_key(p) for p, c in capacity.items() if c >= per_window]
    heapq.heapify(fitting)
    for _, b, _ in potential:
        if b in pod_of_block:
            continue
        _check_deadline(deadline)
        while fitting and pod_key(fitting[0][2]) != fitting[0]:
            heapq.heappop(fitting)
        if not fitting:
            return None
        *_, pod = heapq.heappop(fitting)
        pod_of_block[b] = pod
        capacity[pod] -= per_window
        if spare_pods:
            clean_of_pod[pod] = max(0, clean_of_pod[pod] - block)
        if capacity[pod] >= per_window:
            heapq.heappush(fitting, pod_key(pod))
    # windows to bins: those with origins first (most origins first), then best fit
    bin_of_window: dict[int, int] = {}
    ranked = sorted(
        (-(max(window_bins[w].values()) if window_bins[w] else 0), w) for w in range(windows))
    for score, w in ranked:
        if score == 0:
            break
        pod = pod_of_block[w // per_window]
        options = sorted(((-c, k) for k, c in window_bins[w].items()
                          if pod_of_bin[k] == pod and room[k] >= window))
        if options:
            k = options[0][1]
            bin_of_window[w] = k
            room[k] -= window
    wanted_bins = Counter(k for w in range(windows) if w not in bin_of_window
                          for k in window_bins[w])
    bins_of_pod = _bins_of_pods(pod_arr, set(pod_of_block.values()))
    for w in range(windows):
        if w in bin_of_window:
            continue
        _check_deadline(deadline)
        pod = pod_of_block[w // per_window]
        fits = [k for k in bins_of_pod[pod] if room[k] >= window]
        if not fits:
            return None
        k = min(fits, key=lambda k: (wanted_bins[k] > 0, max(0, window - clean[k]), room[k], k))
        if spare:
            clean[k] = max(0, clean[k] - window)
        bin_of_window[w] = k
        room[k] -= window
    # nodes: every window first takes its own origins in its bin, then the rest
    nodes = np.full(job.tasks, -1, dtype=np.int32)
    left_in: dict[int, set[int]] = {k: set(at[by_group[starts[k]:starts[k + 1]]].tolist())
                                    for k in set(bin_of_window.values())}
    origin: list[int] = job.origin.tolist()
    fault: list[bool] = job.fault.tolist()
    for w in range(windows):
        k = bin_of_window[w]
        for r in range(w * window, (w + 1) * window):
            o = preferred[r]
            if o >= 0 and o in left_in[k]:
                nodes[r] = o
                left_in[k].discard(o)
    for w in range(windows):
        k = bin_of_window[w]
        ranks = [r for r in range(w * window, (w + 1) * window) if nodes[r] < 0]
        if not ranks:
            continue
        order = _order_nodes(problem, list(left_in[k]), wanted)
        for r in ranks:
            avoid = origin[r] if fault[r] else -1
            choice = next((n for n in order if n != avoid), None)
            if choice is None:
                choice = next(iter(order), None)
            if choice is None:
                return None
            nodes[r] = choice
            order.remove(choice)
            left_in[k].discard(choice)
    return nodes


def _bins_of_pods(pod_of_bin: np.ndarray, pods: set[int]) -> dict[int, list[int]]:
    """The bins (ascending) of each pod of ``pods``, from the pod of every bin."""
    order = np.argsort(pod_of_bin, kind="stable")
    ordered = pod_of_bin[order]
    out: dict[int, list[int]] = {}
    for pod in pods:
        lo, hi = np.searchsorted(ordered, [pod, pod + 1])
        out[pod] = order[lo:hi].tolist()
    return out


def _fits(problem: Problem, job: JobView, free: np.ndarray) -> np.ndarray:
    """Nodes that can take one more rank of node-level job ``job`` now."""
    mask = problem.health != UNHEALTHY
    if job.whole_node:
        return mask & (free == problem.npus) & (problem.npus == job.npu_per_task)
    return mask & (free >= job.npu_per_task)


def _fits_one(problem: Problem, job: JobView, free: np.ndarray, n: int) -> bool:
    """Whether node ``n`` can take one more rank of node-level job ``job`` now."""
    if problem.health[n] == UNHEALTHY:
        return False
    if job.whole_node:
        return bool(free[n] == problem.npus[n] == job.npu_per_task)
    return bool(free[n] >= job.npu_per_task)


def _return_to_cached(problem: Problem, job: JobView, nodes: np.ndarray,
                      free: np.ndarray) -> None:
    """Put every unplaced rank of ``job`` whose cached node has room back on it (both
    ``nodes``, node per rank, and ``free`` are changed)."""
    for r in np.flatnonzero((job.preferred >= 0) & (nodes < 0)).tolist():
        n = int(job.preferred[r])
        if _fits_one(problem, job, free, n):
            nodes[r] = n
            free[n] -= job.npu_per_task


def _ordinary_pass(problem: Problem, plan: Plan, free: np.ndarray, jobs: list[int],
                   deadline: float | None = None) -> bool:
    """Re-place ordinary ``jobs`` (queue order) origin-first into ``plan`` on ``free``.

    Every job's cached ranks are pinned first; when a job that ``plan`` had placed then
    no longer fits, the pins of the last pinned job after it in the queue are released
    and the pass starts again.  Returns false, changing neither ``plan`` nor ``free``, when
    no release helps (the base answers of these jobs then stay).
    """
    pinning = list(jobs)
    while True:
        attempt = _ordinary_attempt(problem, plan, free, jobs, set(pinning), deadline)
        if isinstance(attempt, dict):
            break
        later = [j for j in pinning if jobs.index(j) > jobs.index(attempt)]
        if not later:
            return False
        pinning.remove(later[-1])
    work = free.copy()
    for j, nodes in attempt.items():
        if (nodes >= 0).all():
            plan.nodes[j] = nodes
            plan.reasons[j] = None
            np.subtract.at(work, nodes.astype(np.int64), problem.jobs[j].npu_per_task)
        elif plan.nodes[j] is None:
            plan.reasons[j] = plan.reasons[j] or "not placed by the origin-first pass"
    free[:] = work
    return True


def _ordinary_attempt(problem: Problem, plan: Plan, free: np.ndarray, jobs: list[int],
                      pinning: set[int],
                      deadline: float | None = None) -> dict[int, np.ndarray] | int:
    """One try of :func:`_ordinary_pass`: node per rank per job, or the job that failed."""
    work = free.copy()
    nodes = {j: np.full(problem.jobs[j].tasks, -1, dtype=np.int32) for j in jobs}
    # 1. every rank whose cached node has room goes back to it, all (pinning) jobs first
    for j in jobs:
        _check_deadline(deadline)
        if j in pinning:
            _return_to_cached(problem, problem.jobs[j], nodes[j], work)
    still_wanted = np.zeros(problem.num_nodes, dtype=bool)
    for j in jobs:
        job = problem.jobs[j]
        missing = (job.preferred >= 0) & (nodes[j] < 0)
        still_wanted[job.preferred[missing]] = True
    # 2. the other ranks, job by job: fullest nodes first (best fit), nodes still wanted
    #    by another rank and sub-healthy nodes last, natural order; a job that is not
    #    pinning takes its cached nodes first
    for j in jobs:
        _check_deadline(deadline)
        job = problem.jobs[j]
        request = job.npu_per_task
        ranks = np.flatnonzero(nodes[j] < 0).tolist()
        if not ranks:
            continue
        if j not in pinning:
            _return_to_cached(problem, job, nodes[j], work)
            ranks = np.flatnonzero(nodes[j] < 0).tolist()
        avoid = {int(job.origin[r]) for r in ranks if job.fault[r] and job.origin[r] >= 0}
        cand = np.flatnonzero(_fits(problem, job, work))
        order = cand[np.lexsort((problem.natural_pos[cand], work[cand],
                                 problem.health[cand] == SUBHEALTHY, still_wanted[cand]))]
        slots: list[int] = []
        for n in order.tolist():
            room = 1 if job.whole_node else int(work[n]) // request
            slots.extend([n] * room)
            if len(slots) >= len(ranks) + len(avoid):
                break
        if len(slots) < len(ranks):
            if plan.nodes[j] is not None:
                return j
            for r in np.flatnonzero(nodes[j] >= 0).tolist():  # unplaced before: stays so
                work[int(nodes[j][r])] += request
            nodes[j][:] = -1
            continue
        # fault ranks take the first slots that are not their old node
        for r in sorted(ranks, key=lambda r: not job.fault[r]):
            old = int(job.origin[r]) if job.fault[r] else -1
            pick = next((i for i, n in enumerate(slots) if n != old), 0)
            n = slots.pop(pick)
            nodes[j][r] = n
            work[n] -= request
    return nodes


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise OutOfTime


def origin_first_plan(problem: Problem, base: Plan, deadline: float | None = None,
                      weights: ResolvedWeights | None = None, multilevel: bool = True,
                      search_start: bool = False) -> Plan:
    """Re-place the hard super-pod, 950 and ordinary jobs of ``base`` origin-first
    (:func:`_block_plan`), then the multilevel jobs (:func:`_multilevel_plans`).

    The result is checked by the caller before use.  With a ``deadline``
    (``time.perf_counter()`` value) the construction raises :class:`OutOfTime` when the
    first part passes it; when the multilevel part does, the first part's plan stands.
    ``weights`` score alternatives (default: the problem's automatic weights).  With
    ``multilevel`` off the multilevel jobs keep their ``base`` answer.  With
    ``search_start`` the plan is the one a search should start from
    (:class:`Construction`), else the best.  Runs with the garbage collector paused, as
    :func:`heuristics.greedy.greedy_plan` does.
    """
    with paused_gc():
        blocks, block_start = _block_plan(problem, base, deadline, weights)
        if not multilevel:
            return block_start if search_start else blocks
        best, start = _multilevel_plans(problem, block_start, deadline, weights)
        return start if search_start else _with_blocks(problem, best, block_start, blocks,
                                                       weights)


@dataclass(frozen=True)
class Construction:
    """The origin-first construction of one problem, in the parts its callers use.

    Attributes
    ----------
    blocks
        Its first part as a search starts from it (:func:`_block_plan`): the multilevel
        jobs as the base plan has them.
    best
        The best plan it found (the answer, and the fallback of a search).
    start
        The plan a search starts from: ``best``, except where the multilevel pass with
        the smallest jobs first does not pay as a start (:func:`smallest_first_pays`):
        there it is the best of the other passes; and except where the first part's
        spare pass won in a batch without a re-placed 950 job (:func:`_block_plan`):
        there it is built on the first part without that pass.  ``best`` then only
        stands as the answer until the search beats it.
    """

    blocks: Plan
    best: Plan
    start: Plan


def origin_first_parts(problem: Problem, base: Plan, deadline: float | None = None,
                       weights: ResolvedWeights | None = None) -> Construction:
    """:func:`origin_first_plan` in its parts (:class:`Construction`), from one
    construction.

    Raises :class:`~models.errors.OutOfTime` as :func:`origin_first_plan` does.  The
    facade keeps the first part for the whole-batch search of small multilevel batches,
    which starts from it (:data:`solver.phases.FULL_MODEL_OLD_START`).
    """
    with paused_gc():
        blocks, block_start = _block_plan(problem, base, deadline, weights)
        best, start = _multilevel_plans(problem, block_start, deadline, weights)
        return Construction(block_start, _with_blocks(problem, best, block_start, blocks,
                                                      weights), start)


def _with_blocks(problem: Problem, best: Plan, block_start: Plan, blocks: Plan,
                 weights: ResolvedWeights | None) -> Plan:
    """The construction's answer: ``best`` (built on ``block_start``), or ``blocks`` (the
    first part's best, :func:`_block_plan`) when that is another plan and scores
    higher."""
    if blocks is block_start:
        return best
    if best is block_start:  # no multilevel pass improved it: blocks scored higher
        return blocks
    return _better(problem, best, blocks, weights or resolve_weights(problem))


def _multilevel_plans(problem: Problem, base: Plan, deadline: float | None,
                      weights: ResolvedWeights | None) -> tuple[Plan, Plan]:
    """The best by the objective of ``base``, ``base`` with its multilevel jobs' ranks
    reordered, and its five multilevel origin-first passes (:mod:`heuristics.multilevel.first`,
    with and without holding back later jobs' cached nodes, with and without the
    origin-guided layouts, and one with the smallest jobs first) that pass the validator,
    in the order of :func:`multilevel_passes`; and the best without the smallest-first
    pass where that pass does not pay as a search's start (:func:`smallest_first_pays`).
    That pass runs first where it pays and second elsewhere: a deadline that cuts the
    construction comes with a budget too short for a search, where its answer matters
    most."""
    if not any(job.rules.in_tree and not job.partly_running
               for job in problem.jobs):
        return base, base
    # loaded here (or by the solver's preload): a batch without multilevel jobs does not
    # load the multilevel strategy
    from heuristics.multilevel.first import (
        multilevel_pass,
        relabel_plan,
    )

    weights = weights or resolve_weights(problem)
    as_start = smallest_first_pays(problem)
    start, start_objective = base, evaluate(problem, base.as_mapping(), weights).objective
    # the smallest-first pass's plan where it is no start: the answer if it beats ``start``
    aside: Plan | None = None
    for hold_back, guided, smallest_first in multilevel_passes(as_start):
        try:
            # the relabelling and the scoring and checking of a pass's plan (about 25 ms
            # of CPU together at 32,768 nodes) check the deadline only before they start
            _check_deadline(deadline)
            candidate = (relabel_plan(problem, base) if hold_back is None
                         else multilevel_pass(problem, base, hold_back, deadline,
                                              guided=guided, smallest_first=smallest_first))
            _check_deadline(deadline)
        except OutOfTime:
            break
        objective = _improves(problem, candidate, start_objective, weights)
        if objective is None:
            continue
        if smallest_first and not as_start:
            aside, aside_objective = candidate, objective
        else:
            start, start_objective = candidate, objective
    if aside is not None and aside_objective > start_objective:
        return aside, start
    return start, start


def _block_plan(problem: Problem, base: Plan, deadline: float | None = None,
                weights: ResolvedWeights | None = None) -> tuple[Plan, Plan]:
    """Re-place the super-pod and 950 jobs (:func:`_reblocked`) and the ordinary jobs of
    ``base`` origin-first.

    Jobs of other families and jobs the construction cannot place keep their ``base``
    answer; with soft jobs, the plans with and without re-placing them compete (the
    better by the objective; without when a job is left out); the result is checked by
    the caller before use.  With a ``deadline`` (``time.perf_counter()`` value) the
    construction raises :class:`OutOfTime` when it passes it (checked between jobs and
    between the steps of a job, so it overruns by one job's step at most).

    The re-placed jobs go in queue order.  When that leaves one of them out, a second
    pass places the left-out jobs first, then the others by window size (largest first,
    then in queue order: the sort is stable), and the better
    valid plan of the two by the objective is returned: a large job of low priority that
    needs whole racks (``950-n4096-batch10-s0``: 128 rack windows of 8) is otherwise left
    out because earlier jobs' windows of one node break the racks it needs.  Then one more
    pass in queue order whose windows, and A3/850 blocks, without an origin go first to
    the racks and super pods where they take the fewest nodes other jobs' ranks prefer
    (``spare``), and the better valid plan is kept again.  ``weights`` score the plans (default: the
    problem's automatic weights).

    Returns the best plan and the plan a search starts from.  They differ only in
    batches without a re-placed 950 job where the spare pass won: there a search starts
    from the plan without it, as before that pass ran for them (from its plan, the
    neighbourhoods of 850-n4096-batch10-s9403 ended at +468,203 over greedy under
    deterministic time 5, from the older one at +583,230; the spare pass itself gave
    +438,367), and the spare pass's plan is the answer until the search beats it.
    """
    weights = weights or resolve_weights(problem)
    redo = [j for j in problem.queue if _reblocked(problem.jobs[j])]
    hard = [j for j in redo if not problem.jobs[j].soft]
    best, start = _block_passes(problem, base, redo, deadline, weights)
    if len(hard) == len(redo):
        return best, start
    # with soft jobs, the plan without re-placing them (as before they were) competes:
    # their places can cost other jobs more than they win (950-n4096-batch16-s8: 1,262
    # origin hits with them re-placed, 1,286 without), and it keeps a soft job placed
    # that no pass placed; past the deadline the plan with them stands
    try:
        hard_best, hard_start = _block_passes(problem, base, hard, deadline, weights)
        _check_deadline(deadline)
    except OutOfTime:
        return best, start
    dropped = any(base.nodes[j] is not None and best.nodes[j] is None for j in redo)
    if dropped or _better(problem, best, hard_best, weights) is hard_best:
        return hard_best, hard_start
    return best, start


def _reblocked(job: JobView) -> bool:
    """Whether :func:`_block_plan` re-places ``job`` block by block: a whole-node job of
    a super-pod family (A3/850, 950) without UB memory, not partly running.

    Soft jobs (``super-pod-affinity: soft``) too, as hard ones: every block in one super
    pod, every window in one rack is a valid placement of a soft job without spill.
    Left as greedy had them, they can hold most of a batch's missed hits (950, 12,288
    nodes, seed 5309: a soft 1,024-rank job and a soft 512-rank job held 1,299 of the
    batch's 1,797 achievable origin hits, greedy's plan 4 of them; the construction's
    plan had 52 hits in all and the neighbourhoods needed seconds to move those two
    jobs; re-placed, the construction has 906).
    """
    return (job.rules.in_super_pod and job.whole_node and not job.ub_memory
            and not job.partly_running)


def _block_passes(problem: Problem, base: Plan, redo: list[int], deadline: float | None,
                  weights: ResolvedWeights) -> tuple[Plan, Plan]:
    """The passes of :func:`_block_plan` re-placing the jobs ``redo``: its best plan and
    the plan a search starts from."""
    plan = _origin_first_pass(problem, base, redo, deadline)
    left_out = [j for j in redo if plan.nodes[j] is None]
    if left_out:
        # second pass: the left-out jobs, then the largest windows (whole racks) first;
        # past the deadline the first pass's plan stands
        order = sorted(redo, key=lambda j: (j not in left_out, -_window(problem.jobs[j])))
        try:
            again = _origin_first_pass(problem, base, order, deadline)
            _check_deadline(deadline)
        except OutOfTime:
            return plan, plan
        plan = _better(problem, plan, again, weights)
    if not redo:
        return plan, plan
    # a pass in queue order whose windows without an origin go first to the racks, and
    # A3/850 blocks without an origin to the super pods, where they take the fewest nodes
    # other jobs' ranks prefer.  950-n8192-batch11-s0: 768 origin hits against 710, as a job of
    # 512 ranks in windows of 4 no longer fills its windows with the cached nodes of a job
    # of 256 ranks in windows of 1.  a3-n32768-batch16-s8803: the first pass's blocks
    # without origins filled the super pods a 512-rank job's 32-rank blocks had run on
    # (its blocks there kept 273 hits, greedy's 290); this pass's plan has 559 origin hits
    # in all against 519, and beats greedy, which the first pass did not
    try:
        spared = _origin_first_pass(problem, base, redo, deadline, spare=True)
        _check_deadline(deadline)
    except OutOfTime:
        return plan, plan
    best = _better(problem, plan, spared, weights)
    if any(problem.jobs[j].rules.in_rack for j in redo):
        return best, best
    return best, plan


def _better(problem: Problem, plan: Plan, other: Plan, weights: ResolvedWeights) -> Plan:
    """``other`` when it is valid and scores above ``plan``; else ``plan``."""
    to_beat = evaluate(problem, plan.as_mapping(), weights).objective
    return plan if _improves(problem, other, to_beat, weights) is None else other


def _improves(problem: Problem, candidate: Plan, to_beat: int,
              weights: ResolvedWeights) -> int | None:
    """``candidate``'s objective when it scores above ``to_beat`` and passes the validator
    (scored first: the validator is the dearer of the two); else ``None``."""
    objective = evaluate(problem, candidate.as_mapping(), weights).objective
    if objective <= to_beat:
        return None
    placement = to_placement(problem, candidate, engine="origin-first", status=Status.GREEDY)
    return None if check(problem, placement, include_vnpu=False) else objective


def _window(job: JobView) -> int:
    """Nodes of one rack window (950) or block (super pod) of a re-placed job."""
    return job.rules.window(job)


def _origin_first_pass(problem: Problem, base: Plan, redo: list[int],
                       deadline: float | None, spare: bool = False) -> Plan:
    """One pass of :func:`origin_first_plan`, re-placing the jobs ``redo`` in that order
    (``spare``: see :func:`_place_job`)."""
    plan = base.copy()
    state = ClusterState.initial(problem)
    # node-level and other-family jobs keep their places
    for j, nodes in enumerate(plan.nodes):
        if nodes is not None and j not in redo:
            state.commit(problem.jobs[j].placed_nodes(nodes), problem.jobs[j].npu_per_task)
    wanted = {int(n) for job in problem.jobs for n in job.preferred if n >= 0}
    for j in redo:
        _check_deadline(deadline)
        job = problem.jobs[j]
        placed = _place_job(problem, job, state.free, wanted, spare, deadline)
        previous = plan.nodes[j]
        if placed is None:
            if previous is not None and (state.free[previous] == problem.npus[previous]).all():
                placed = previous
            else:
                plan.nodes[j] = None
                plan.reasons[j] = plan.reasons[j] or "not placed by the origin-first pass"
                continue
        plan.nodes[j] = placed
        plan.reasons[j] = None
        state.commit(np.asarray(placed), job.npu_per_task)
    # ordinary jobs: their base answers held room while the blocks moved; release it and
    # re-place them together (when one no longer fits, the base answers stay, and fit)
    ordinary = [j for j in problem.queue if not problem.jobs[j].rules.grouped
                and not problem.jobs[j].partly_running]  # partly running: base answer
    if ordinary:
        free = state.free.copy()
        for j in ordinary:
            if plan.nodes[j] is not None:
                np.add.at(free, np.asarray(plan.nodes[j], dtype=np.int64),
                          problem.jobs[j].npu_per_task)
        _ordinary_pass(problem, plan, free, ordinary, deadline)
    return plan
