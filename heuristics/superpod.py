"""Greedy fast path for super-pod jobs: A3 (``chip2-node16-sp``, ``chip2-node8-sp``) and 850
(``chip8-node8-sp``), :attr:`models.scenario.Family.SUPERPOD`.

A deterministic port of upstream ``selectSuperPodForJob`` (reference §2.2–§2.4) with the
RFC's two-level origin-node preference (seed ``000`` §2.4.1, §3.1.3, §3.1.5, §3.1.11).  One
call places one job on the nodes ``state`` still offers:

1. **Candidates** (the predicate, §2.2 steps 4–5): nodes not unhealthy with
   ``super-pod-id >= 0``; for a distributed job (``tasks > 1``) the node must be wholly free
   in ``state`` and have exactly ``npu-per-task`` chips; a single-task job takes nodes with
   ``free >= npu-per-task``, restricted to the least-idle ones (minimum ``state.free``),
   sub-healthy ones dropped when others remain.  ``tasks > #candidates`` fails with
   "not enough node, ...".
2. **RFC level 1, preferOriginSuperPods** (only when ``prefer-previous-node`` is on): for
   every block, in ascending block ID, the cached node of its first non-fault rank with a
   live cache entry names its origin super pod; when that super pod still has at least
   ``spBlock`` candidate nodes the block is carved there (the reserve may be used, as in the
   RFC pseudocode) and those nodes leave the pool; otherwise the block is left to step 4.
3. **Classification** (``classifySuperPod``): a table of ``spBlock`` rows × ``size/spBlock +
   1`` columns; a super pod with ``n`` candidates goes to cell ``[e % spBlock][e // spBlock]``
   with ``e = n - reserve`` (column 0, remainder ``n % spBlock`` when ``e < 0``).  Hard jobs
   skip super pods with ``n < spBlock``.  ``countVSuperPod = Σ n // spBlock``; a hard job
   with ``countVSuperPod < #unplaced blocks`` fails with upstream's text.
4. **The four passes** of §2.3.1: tight fits without touching the reserve, bigger super pods
   without touching the reserve, super pods whose reserve may be used (one block per super
   pod), and the catch-up pass (pass 4) that hard jobs reach too and in which soft jobs build
   short blocks.
5. **Carving one block** is the RFC's level 2, ``selectNodesFromSuperPod``: each rank whose
   cached node is still in the pool of the chosen super pod gets exactly that node
   (prefill); the other positions are filled in bucket order — healthy nodes no rank of the
   job mentions, other healthy nodes, sub-healthy nodes, and last the nodes that ranks of
   blocks not yet placed prefer (so later blocks still find their origins).  Without any
   cache this is upstream's "healthy first, then sub-healthy" carving.

Rank convention (§2.2): block ``b`` holds ranks ``[b*spBlock, (b+1)*spBlock)``; the first
block carved by the passes gets the smallest unplaced block ID (upstream sorts ``unReadyID``
descending and takes the last entry).  The result is a node index per rank.

Deterministic tie-breaks (upstream iterates Go maps in these places):

* super pods inside one classification cell: ascending super-pod ID, after the size sort
  (descending current size) of passes 3 and 4;
* nodes inside one super pod: natural order of node names (``problem.natural_pos``), inside
  each bucket of the carving;
* block IDs: ascending (also for ``chip8-node8-sp``, whose ``unReadyID`` is unsorted
  upstream);
* the dump in the A3 capacity error: ascending super-pod ID, node names sorted as strings.

With ``prefer-previous-node`` off (or no live cache entry for the owner) the cache and
``fault-ranks`` play no part: the answer is the plain upstream port.

Deviations from upstream (the first three keep every answer complete and valid):

* **Pass 4 carves whole blocks first.**  Upstream's pass 4 visits each super pod once and
  carves up to ``spBlock`` nodes, so it can leave a hard job with ranks that have no node
  (they then land wherever Volcano's other plugins put them) or build a short block for a
  hard job (A3) or for a soft job that whole blocks would have fitted.  Here pass 4 first
  repeats its sweep, in upstream's cell order, carving only whole blocks, until every block
  is placed or no super pod has ``spBlock`` nodes left; only a soft job then carves short
  pieces (at most the nodes still needed) in the same order.  Whenever
  ``countVSuperPod >= #unplaced blocks`` every block is therefore whole, soft or hard.
* **Short pieces of soft jobs** fill the ranks of the still-unplaced blocks in ascending
  rank order, in carving order.  This is §2.2's cumulative mapping (groups sorted
  numerically, cumulative ranges): upstream hands out piece IDs in ascending order after
  every block it already carved, so both agree.  They differ only when the RFC's level 1
  placed a block whose ID is larger than a piece's; such a block keeps its own ranks here
  (and its origin hits) instead of being shifted.  A piece's nodes share one super pod, a
  block made of pieces may span super pods (allowed for soft jobs).
* **A3 super pods larger than ``super-pod-size``** (a Go index-out-of-range panic upstream):
  the column is clamped to the last column.  ``chip8-node8-sp`` returns upstream's error
  "super-pod-size is smaller than superPod's node size".  (Input validation already rejects
  such scenarios; this only guards hand-built problems.)
* The fault-job pre-selection of §2.3.3 (``selectNodesForFaultJob``) runs for partly
  running jobs (``running-ranks``) in :mod:`heuristics.podlevel`, which fills their blocks
  with this module's carving; for a job with no running rank (job-level rescheduling:
  waiting for resource release and the rescheduler's own fault cache are not modelled)
  ``fault-ranks`` act through the RFC's rule instead (a fault pod prefers not to return,
  never banned): a fault rank is never prefilled onto its cached node, and the carving
  gives it another node whenever the block has one (swapping with another gap rank) or the
  pool has a spare node that no rank of an unplaced block prefers.  After all blocks, a
  fault rank still on its node swaps with a rank of another block in the same super pod
  (any super pod when spBlock is 1 or the job is soft) that is not on its own cached node
  (**our choice:** first one whose cached node it is, then the lowest rank), else moves to
  a candidate left unused in that super pod (healthy first).  Ranks that got their origin
  are never moved for it: one origin hit outweighs a fault return.  A single-task fault
  job leaves its old node out of the candidates while another one exists.
* A sub-healthy origin node is not prefilled (RFC §3.1.5/§3.1.9: "preferred node
  sub-healthy → use a regular node"); inside the sub-healthy bucket the block's own
  ranks' origins come first, and a rank whose origin the block takes gets it.
* Claims (step 5's last bucket) only count for blocks that can still land in the super
  pod: level 1's placements are fixed before carving, so the cached node of a rank whose
  block returns to another super pod is an ordinary node of its health bucket.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from heuristics.base import JobOutcome
from heuristics.images import tie_positions
from heuristics.state import ClusterState
from models.compiled import SUBHEALTHY, UNHEALTHY, JobView, Problem
from models.scenario import Family, Policy

#: RFC §3.1.9: a sub-healthy preferred node is not prefilled; a regular node is used instead.
PREFILL_SUBHEALTHY_ORIGINS = False


def superpod_candidates(problem: Problem, job: JobView, state: ClusterState) -> np.ndarray:
    """The nodes a super-pod job may use, as a boolean mask (reference §2.2 steps 4–5).

    Parameters
    ----------
    problem
        The compiled scenario.
    job
        A :attr:`~models.scenario.Family.SUPERPOD` job of ``problem``.
    state
        Free chips per node.

    Returns
    -------
    numpy.ndarray
        ``True`` for every candidate node.
    """
    free = state.free
    usable = (problem.health != UNHEALTHY) & (problem.super_pod >= 0)
    if job.tasks > 1:
        return usable & (free == problem.npus) & (problem.npus == job.npu_per_task)
    mask = usable & (free >= job.npu_per_task)
    x = int(job.origin[0])
    if job.prefer_previous and job.fault[0] and x >= 0 and mask[x] and mask.sum() > 1:
        # RFC: a fault pod prefers another node; its old node stays only when alone.
        mask[x] = False
    if not mask.any():
        return mask
    # selectNodesWithLeastResourceForSingle: only the least-idle nodes (ties kept) ...
    mask &= free == free[mask].min()
    # ... and sub-healthy ones dropped when others remain.
    healthy = mask & (problem.health != SUBHEALTHY)
    return healthy if healthy.any() else mask


def place_superpod(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Place super-pod job ``j`` greedily (upstream ``selectSuperPodForJob`` + RFC preference).

    Parameters
    ----------
    problem
        The compiled scenario.
    j
        Index of a :attr:`~models.scenario.Family.SUPERPOD` job.
    state
        Free chips per node; not modified.

    Returns
    -------
    JobOutcome
        A node index per rank (rank ``r`` at position ``r``), or upstream's reason text.
    """
    job = problem.jobs[j]
    if job.family is not Family.SUPERPOD:
        raise ValueError(f"job '{job.name}' is a {job.family.value} job, not a super-pod job")
    mask = superpod_candidates(problem, job, state)
    count = int(np.count_nonzero(mask))
    if job.tasks > count:
        return JobOutcome.fail(f"not enough node, npuTaskNum: {job.tasks}, nodes: {count}")
    return select_super_pod_for_job(problem, j, mask)


def select_super_pod_for_job(problem: Problem, j: int, candidates: np.ndarray) -> JobOutcome:
    """Run the selection on a given candidate mask (upstream ``selectSuperPodForJob``).

    This skips the candidate predicate and the "not enough node" check of
    :func:`place_superpod`, as upstream's unit tests of ``selectSuperPodForJob`` do.

    Parameters
    ----------
    problem
        The compiled scenario.
    j
        Index of a super-pod job.
    candidates
        Boolean mask of the nodes the job may use.

    Returns
    -------
    JobOutcome
        A node index per rank, or upstream's reason text.
    """
    return _Selection(problem, problem.jobs[j], candidates).run()


def classify_super_pods(
    problem: Problem, j: int, candidates: np.ndarray
) -> tuple[list[list[list[int]]], int]:
    """Upstream ``classifySuperPod`` on a candidate mask, without any preference step.

    Parameters
    ----------
    problem
        The compiled scenario.
    j
        Index of a super-pod job.
    candidates
        Boolean mask of the nodes the job may use.

    Returns
    -------
    tuple
        ``(table, countVSuperPod)``: ``table[remainder][column]`` lists super-pod IDs in
        ascending order.

    Raises
    ------
    ValueError
        With upstream's text, when a ``chip8-node8-sp`` super pod has more candidates than
        ``super-pod-size``.
    """
    selection = _Selection(problem, problem.jobs[j], candidates)
    table, count, error = selection.classify()
    if error is not None:
        raise ValueError(error)
    return table, count


class _Selection:
    """Working state of one ``selectSuperPodForJob`` call."""

    def __init__(self, problem: Problem, job: JobView, candidates: np.ndarray) -> None:
        self.problem = problem
        self.job = job
        self.sp = job.sp_block
        self.k = job.tasks // self.sp
        self.is_850 = job.policy is Policy.CHIP8_NODE8_SP
        self.reserve = problem.reserve_nodes
        self.ncols = problem.super_pod_size // self.sp + 1
        self.avail = bytearray(np.ascontiguousarray(candidates, dtype=np.uint8).tobytes())
        self.sub = bytearray((problem.health == SUBHEALTHY).astype(np.uint8).tobytes())
        self.super_pod = problem.super_pod
        # totalNodes = getSuperPodTop(nodes): candidates grouped by super pod; inside a super
        # pod nodes are kept in natural name order (upstream iterates a Go map).
        order = problem.topology_order(by_rack=False)
        cand = order[np.asarray(candidates, dtype=bool)[order]]
        sps = problem.super_pod[cand]
        # npu-place addition: holders of the job's image first in a super pod
        self.tie = tie_positions(problem, job.image)
        if self.tie is not problem.natural_pos:  # else the topology order is the order
            order = np.lexsort((self.tie[cand], sps))
            cand = cand[order]
            sps = sps[order]
        cuts = np.flatnonzero(np.diff(sps)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*starts[1:], len(cand)]
        cand_l: list[int] = cand.tolist()
        self.pods: dict[int, list[int]] = dict(zip(
            sps[starts].tolist(), [cand_l[a:b] for a, b in zip(starts, ends)], strict=True
        )) if len(cand) else {}
        self.pod_ids = sorted(self.pods)  # keys of totalNodes, ascending
        self.blocks: dict[int, list[int]] = {}
        self.pieces: list[tuple[list[int], list[int]]] = []
        self.unready: list[int] = []
        self.next = 0  # unready[next] is the smallest block ID still to carve
        # Ranks that never move (running ranks of a partly running job); their
        # blocks are put in ``blocks`` before :meth:`run` by ``heuristics.podlevel``.
        self.fixed: set[int] = set()
        # Origin-node preference (only with prefer-previous-node on).
        self.use_pref = bool(job.prefer_previous and (job.origin >= 0).any())
        if self.use_pref:
            self.pref: list[int] = job.preferred.tolist()
            self.origin: list[int] = job.origin.tolist()
            self.fault: list[bool] = job.fault.tolist()
            self.claims: Counter[int] = Counter(p for p in self.pref if p >= 0)
            self.released = bytearray(job.tasks)
            self.mentioned = {o for o in self.origin if o >= 0}

    # ------------------------------------------------------------------ driver

    @property
    def remaining(self) -> int:
        return len(self.unready) - self.next

    def run(self) -> JobOutcome:
        if self.use_pref:
            self.prefer_origin_super_pods()
        self.unready = [b for b in range(self.k) if b not in self.blocks]
        if not self.unready:
            return self.result()
        table, count, error = self.classify()
        if error is not None:
            return JobOutcome.fail(error)
        if count < len(self.unready) and not self.job.soft:
            return JobOutcome.fail(self.capacity_error(count))
        self.select_from_smaller_super_pods(table)
        self.select_from_bigger_super_pods(table)
        self.select_from_super_pods_with_reserve(table)
        self.select_catch_up(table)
        return self.result()

    def result(self) -> JobOutcome:
        out = np.full(self.job.tasks, -1, dtype=np.int64)
        for b, nodes in self.blocks.items():
            out[b * self.sp:(b + 1) * self.sp] = nodes
        for ranks, nodes in self.pieces:
            out[ranks] = nodes
        if self.use_pref and not (out < 0).any():
            self.keep_faults_away(out)
        if (out < 0).any():  # unreachable: the capacity checks guarantee completion
            missing = int(np.count_nonzero(out < 0))
            return JobOutcome.fail(
                f"select super pod failed, {missing} of {self.job.tasks} ranks got no node"
            )
        return JobOutcome(out)

    def capacity_error(self, count: int) -> str:
        required = len(self.unready)
        if self.is_850:
            return f"select super pod failed, required vitural-super-pod {required}, total {count}"
        names = self.problem.node_names
        top = "".join(
            f"super-pod-id: {s}, node count: {len(self.pods[s])} detail: "
            f"[{' '.join(sorted(names[n] for n in self.pods[s]))}], "
            for s in self.pod_ids
        )
        return f"select super pod failed, required {required}, total {count}, node top: {top}"

    # ------------------------------------------------------------- RFC level 1

    def origin_super_pod(self, b: int) -> int:
        """RFC ``getOriginSuperPodID``: the super pod of block ``b``'s first pod (-1: none).

        The first non-fault rank with a live cache entry names it.
        """
        for r in range(b * self.sp, (b + 1) * self.sp):
            if self.pref[r] >= 0:
                return int(self.super_pod[self.pref[r]])
        return -1

    def prefer_origin_super_pods(self) -> None:
        """RFC ``preferOriginSuperPods``: each block back into its origin super pod.

        Which blocks level 1 places, and where, is known before any carving (each takes
        exactly ``spBlock`` nodes of its origin super pod), so a cached node of a rank whose
        block goes to another super pod is not held back for it: it is an ordinary node of
        its health bucket (RFC case f7 in ``tests/data/rfc/``: health before claims of blocks placed
        elsewhere).
        """
        sp = self.sp
        left = {s: len(nodes) for s, nodes in self.pods.items()}
        plan: dict[int, int] = {}
        for b in range(self.k):  # ascending block ID
            if b in self.blocks:  # already placed (pod-level path)
                continue
            s = self.origin_super_pod(b)
            if s >= 0 and left.get(s, 0) >= sp:
                plan[b] = s
                left[s] -= sp
        for b, s in plan.items():
            for r in range(b * sp, (b + 1) * sp):
                p = self.pref[r]
                if p >= 0 and int(self.super_pod[p]) != s:
                    self.claims[p] -= 1
                    self.released[r] = 1
        for b, s in plan.items():  # ascending block ID
            self.blocks[b] = self.carve(s, range(b * sp, (b + 1) * sp))

    # ---------------------------------------------------------- classification

    def classify(self) -> tuple[list[list[list[int]]], int, str | None]:
        """Upstream ``classifySuperPod`` over the current pool."""
        sp = self.sp
        table: list[list[list[int]]] = [[[] for _ in range(self.ncols)] for _ in range(sp)]
        count = 0
        for s in self.pod_ids:  # ascending super-pod ID: the order inside each cell
            n = len(self.pods[s])
            if n == 0 or (n < sp and not self.job.soft):
                continue
            if self.is_850 and n > self.problem.super_pod_size:
                return table, count, "super-pod-size is smaller than superPod's node size"
            count += n // sp
            e = n - self.reserve
            if e < 0:
                column, remainder = 0, n % sp
            else:
                column, remainder = e // sp, e % sp
            # A3 has no size check upstream (a Go panic); clamp to the last column.
            column = min(column, self.ncols - 1)
            table[remainder][column].append(s)
        return table, count, None

    # ------------------------------------------------------------------ passes

    def carve_except_reserve(self, cell: list[int]) -> None:
        """``selectNodesFromSuperPodsExceptReserve``: blocks while the reserve stays."""
        for s in cell:  # ascending super-pod ID
            while self.remaining > 0 and len(self.pods[s]) - self.reserve >= self.sp:
                self.carve_block(s)
            if self.remaining == 0:
                return

    def select_from_smaller_super_pods(self, table: list[list[list[int]]]) -> None:
        """Pass 1: remainders ascending, columns 1..remaining (re-read each step)."""
        for r in range(self.sp):
            c = 1
            while c < self.ncols and c <= self.remaining:
                self.carve_except_reserve(table[r][c])
                c += 1
            if self.remaining == 0:
                return

    def select_from_bigger_super_pods(self, table: list[list[list[int]]]) -> None:
        """Pass 2: columns from remaining+1 upward, remainders ascending."""
        for c in range(self.remaining + 1, self.ncols):
            for r in range(self.sp):
                if self.remaining == 0:
                    return
                self.carve_except_reserve(table[r][c])

    def by_size(self, cell: list[int]) -> list[int]:
        # Size descending; ties (random upstream) by ascending super-pod ID.
        cell.sort(key=lambda s: (-len(self.pods[s]), s))
        return cell

    def select_from_super_pods_with_reserve(self, table: list[list[list[int]]]) -> None:
        """Pass 3: remainders descending, all columns; one block per super pod, reserve usable."""
        for r in range(self.sp - 1, -1, -1):
            for c in range(self.ncols):
                for s in self.by_size(table[r][c]):
                    if self.remaining == 0:
                        return
                    if len(self.pods[s]) >= self.sp:
                        self.carve_block(s)

    def catch_up_cells(self) -> list[tuple[int, int]]:
        """Pass 4's cell order: rows spBlock-1..reserve, then rows 0..min(spBlock,reserve)-1."""
        rows = [r for r in range(self.sp - 1, -1, -1) if r >= self.reserve]
        rows += [r for r in range(min(self.sp, self.reserve))]
        return [(r, c) for r in rows for c in range(self.ncols)]

    def select_catch_up(self, table: list[list[list[int]]]) -> None:
        """Pass 4 (``selectFromSuperPodsWithSoftStrategy``), whole blocks first.

        Reached by hard and soft jobs alike.  Sweeps in upstream's cell order, carving a
        whole block from every super pod that still has ``spBlock`` nodes, until all blocks
        are placed or no sweep makes progress; then, for soft jobs only, one more sweep
        carves short pieces (upstream's soft behaviour) from what is left.
        """
        cells = self.catch_up_cells()
        while self.remaining > 0:
            progress = False
            for r, c in cells:
                for s in self.by_size(table[r][c]):
                    if self.remaining == 0:
                        return
                    if len(self.pods[s]) >= self.sp:
                        self.carve_block(s)
                        progress = True
            if not progress:
                break
        if self.remaining == 0 or not self.job.soft:
            return
        sp = self.sp
        ranks = [r for b in self.unready[self.next:] for r in range(b * sp, (b + 1) * sp)]
        self.next = len(self.unready)
        taken = 0
        for r, c in cells:
            for s in self.by_size(table[r][c]):
                n = len(self.pods[s])
                if n == 0:
                    continue  # A3 skips empty super pods; 850 stops (same: sorted by size)
                take = min(n, sp, len(ranks) - taken)
                piece = ranks[taken:taken + take]
                self.pieces.append((piece, self.carve(s, piece)))
                taken += take
                if taken == len(ranks):
                    return

    # ---------------------------------------------------------- fault safety net

    def keep_faults_away(self, out: np.ndarray) -> None:
        """Take every fault rank still on its old node off it when no hit is lost.

        Carving fills one block at a time, so a block carved earlier may have taken the
        node a fault rank of a later block could have used.  Per fault rank in rank order:
        swap with a rank of another block whose node is in the same super pod (any super
        pod when ``spBlock`` is 1 or the job is soft) and that is not on its own cached
        node (first one whose cached node the fault rank's node is, then the lowest
        rank); else move to a candidate left unused in the same super pod (healthy first,
        then natural order).
        """
        sp_of = self.super_pod
        free_sp = self.sp == 1 or self.job.soft
        for r in range(self.job.tasks):
            x = self.origin[r]
            if not self.fault[r] or x < 0 or int(out[r]) != x:
                continue
            best, best_key = -1, (2, 0)
            for q in range(self.job.tasks):
                nq = int(out[q])
                if (q == r or q in self.fixed or self.pref[q] == nq
                        or (self.fault[q] and self.origin[q] == x)
                        or not (free_sp or sp_of[nq] == sp_of[x])):
                    continue
                key = (0 if self.pref[q] == x else 1, q)
                if key < best_key:
                    best, best_key = q, key
            if best >= 0:
                out[r], out[best] = out[best], x
                continue
            spare = [n for n in self.pods.get(int(sp_of[x]), []) if self.avail[n]]
            if free_sp:
                spare = [n for s in self.pod_ids for n in self.pods[s] if self.avail[n]]
            if spare:
                n = min(spare, key=lambda m: (self.sub[m], int(self.tie[m])))
                self.avail[n] = 0
                self.avail[x] = 1
                out[r] = n

    # ------------------------------------------------------------- RFC level 2

    def carve_block(self, s: int) -> None:
        """Carve the smallest unplaced block ID from super pod ``s``."""
        b = self.unready[self.next]
        self.next += 1
        self.blocks[b] = self.carve(s, range(b * self.sp, (b + 1) * self.sp))

    def carve(self, s: int, ranks: Sequence[int]) -> list[int]:
        """RFC ``selectNodesFromSuperPod``: nodes of super pod ``s`` for ``ranks``, in order.

        Takes ``len(ranks)`` nodes out of the pool of ``s`` (which must hold that many).
        """
        pool = self.pods[s]
        avail = self.avail
        sub = self.sub
        m = len(ranks)
        out = [-1] * m
        if not self.use_pref:
            # Upstream: the first non-sub-healthy nodes (natural order), then sub-healthy.
            chosen = [n for n in pool if not sub[n]][:m]
            if len(chosen) < m:
                chosen += [n for n in pool if sub[n]][:m - len(chosen)]
            for n in chosen:
                avail[n] = 0
            self.pods[s] = [n for n in pool if avail[n]]
            return chosen
        pref = self.pref
        super_pod = self.super_pod
        # This block's ranks are being placed: their claims no longer protect nodes.
        for r in ranks:
            if not self.released[r]:
                self.released[r] = 1
                if pref[r] >= 0:
                    self.claims[pref[r]] -= 1
        # Step 1 (prefill): a rank whose cached node is still in this pool gets it.  Fault
        # ranks have no preferred node; sub-healthy origins are left to the buckets.
        for i, r in enumerate(ranks):
            p = pref[r]
            if (p >= 0 and avail[p] and super_pod[p] == s
                    and (PREFILL_SUBHEALTHY_ORIGINS or not sub[p])):
                out[i] = p
                avail[p] = 0
        gaps = [i for i in range(m) if out[i] < 0]
        if gaps:
            claims = self.claims
            mentioned = self.mentioned
            # Step 2 (buckets): healthy nodes no rank mentions, other healthy nodes,
            # sub-healthy nodes (the block's own ranks' origins first, then nodes no rank
            # mentions, then the others); nodes still preferred by ranks of other
            # unplaced blocks last.  Stable sort: natural name order inside each bucket.
            own = {pref[r] for r in ranks if pref[r] >= 0}
            rest = sorted(
                (n for n in pool if avail[n]),
                key=lambda n: (claims[n] > 0, sub[n], n not in own, n in mentioned),
            )
            self.assign(out, ranks, gaps, rest)
        self.pods[s] = [n for n in pool if avail[n]]
        return out

    def assign(self, out: list[int], ranks: Sequence[int], gaps: list[int],
               rest: list[int]) -> None:
        """Give the first ``len(gaps)`` nodes of ``rest`` to the gap positions.

        A rank whose (sub-healthy) cached node is among them gets it; the other ranks take
        the remaining nodes in bucket order, by ascending rank, except that a fault rank
        skips its cached node.  A fault rank left with only its cached node swaps with
        another gap rank of the block, else takes the next spare node of the pool that no
        rank of an unplaced block prefers.
        """
        g = len(gaps)
        chosen = rest[:g]
        free_set = set(chosen)
        pref = self.pref
        fault = self.fault
        origin = self.origin
        todo: list[int] = []
        for i in gaps:
            p = pref[ranks[i]]
            if p >= 0 and p in free_set:
                out[i] = p
                free_set.discard(p)
            else:
                todo.append(i)
        left = [n for n in chosen if n in free_set]
        for i in todo:
            r = ranks[i]
            pick = 0
            if fault[r]:
                pick = next((k for k, n in enumerate(left) if n != origin[r]), 0)
            out[i] = left.pop(pick)
        for i in todo:
            r = ranks[i]
            o = origin[r]
            if not fault[r] or out[i] != o:
                continue
            for k in todo:
                if k != i and (not fault[ranks[k]] or origin[ranks[k]] != o):
                    out[i], out[k] = out[k], o
                    break
            else:
                # Never a node another unplaced rank still prefers: a hit outweighs this.
                alt = next((n for n in rest[g:] if n != o and self.claims[n] <= 0), -1)
                if alt >= 0:
                    out[i] = alt
        for i in gaps:
            self.avail[out[i]] = 0
