"""Greedy fast path for Atlas 950 super pods (``chip8-node8-ra64-sp``, :attr:`Family.RACK`).

A deterministic port of upstream ``selectNodesForJob`` (``chip8node8ra64sp``, reference
§2.5 and §2.2) with the origin-node preference of the RFC (seed ``000``, §3.1.4 and
``selectSpBlockFromOriginSuperPod`` in §3.1.11).

Flow of :func:`place_rack`
--------------------------
1. **Candidates** (upstream predicate): healthy or sub-healthy nodes with ``super-pod-id``
   and ``rack-id`` >= 0.  A distributed job needs whole-free nodes of exactly
   ``npu-per-task`` NPUs; a single-task job needs ``free >= npu-per-task`` and keeps only
   the least-idle candidates (§2.2 step 4: upstream filters before selecting, so the
   origin preference only sees those nodes).  Every node counts as carrying the
   ``NetworkUnhealthy`` annotation with no unhealthy chip (our scenarios have none).
2. **First level, ``preferOriginSuperPods``** (RFC; only with ``prefer-previous-node``):
   each block, in ascending block id, goes back to its origin super pod (RFC
   ``getOriginSuperPodID``; see "Tie-breaks" for which one) when that super pod can still
   hold a whole block in
   tpBlock-aligned racks (``Σ_racks ⌊free/tpBlock⌋ >= spBlock/tpBlock``); otherwise it
   stays for the strategies.  Its windows are then filled by
   ``selectSpBlockFromOriginSuperPod``: each window takes the rack holding most of its
   ranks' still free cached nodes (ties: rank order) if that rack has tpBlock free nodes;
   pass 1 puts every rank on its exact cached node when that node is in the window's
   rack; pass 2 fills the rest from the same rack, taking first the nodes no unplaced rank
   of the job prefers (``allPreferredNodes``).  A window whose rack cannot complete it
   moves to another rack of the same super pod: the first rack in best-fit order (fewest
   free nodes, then rack id) that completes it without taking another rank's origin and
   without forcing a fault rank of the window back onto its node, else the one taking
   fewest origins, then forcing fewest returns.  Every window lowers the super pod's
   capacity by exactly one, so once the capacity check passed every window finds a rack:
   a block degrades only when no choice of racks could hold it.
3. **Order table** (``getSuperPodsInfo``) over what is left: super pods by ascending
   candidate count; ``spCount = Σ ⌊n/spBlock⌋``.  Reserve nodes are not used (upstream).
4. **Start strategy** from the task count: ``<= 8`` RackSchedule; UB memory
   UBMemSchedule; ``<= super-pod-size`` SuperPodSchedule; else MultiSuperPodsSchedule.
   The chain RackSchedule → SuperPodSchedule → MultiSuperPodsSchedule runs on one shared
   selection, so blocks an earlier level or a failed strategy selected stay selected
   (upstream): MultiSuperPodsSchedule's whole blocks stay when its soft fallback runs,
   and the soft pass only gathers the missing nodes.  UBMemSchedule has no fallback.
   Failure texts are upstream's.
5. ``selectOneSpBlock`` (SuperPod, Multi, UBMem) carves the smallest unready block id from
   racks in best-fit order (ascending free count, then rack id), ``min(need,
   ⌊free/tpBlock⌋)`` windows per rack.  The RFC's rack-internal preference applies inside
   it: which racks and how many windows each is upstream's choice, but the block's windows
   go to the carved rack holding their cached nodes first (the others fill the remaining
   slots in carving order), and inside a rack pass 1 / pass 2 as above.  RackSchedule's
   single rack is filled the same way.  Without any cached node the answer is exactly
   upstream's (list order).

Upstream behaviour kept on purpose
----------------------------------
* Walks start at the table cell of the job's *full* task count even when the first level
  already placed some blocks; RackSchedule needs a rack with at least ``tasks`` free
  nodes, and a rack with more than 8 free nodes is only taken on an exact match
  (``bestRackIdLen`` starts at 9).
* The capacity pre-check ("before scheduling, required sp-block count ...") exists in
  RackSchedule only, and is skipped for soft jobs, as upstream.

Tie-breaks (upstream iterates Go maps here; we fix one order)
-------------------------------------------------------------
* Nodes inside a rack: natural node-name order (``problem.natural_pos``).
* Super pods inside one cell of the order table: ascending super-pod id (ascending and
  descending walks alike).
* Racks of equal free count (``sortRackIdByLengthInOneSuperPod``, unstable upstream):
  ascending rack id.  RackSchedule's best rack: the lowest rack id with exactly ``tasks``
  free nodes, else the smallest free count above ``tasks`` (lowest id on ties).
* UB-memory domains of equal size: ascending domain id (``rack-id // 16``).
* Origin super pod of a block: the RFC reads it from the block's first pod.  We let the
  block's cached nodes that are still free to take vote (busy or unusable origins give no
  hit, so they do not count); ties go to the super pod of the first such rank, i.e. the
  RFC's first pod whenever its origin is usable.  When no cached node of the block is
  usable, the RFC's rule: the super pod of the first rank with a cached node.
  Window rack: most free cached nodes of its ranks, then the rack of the lowest such rank.
* Blocks are preferred, and carved, in ascending block id.
* Pass 2 fillers: nodes nobody unplaced prefers, then cached nodes of fault ranks, then
  other ranks' origins (each tier in natural order).  Fault ranks of the window choose
  first; a fault rank skips its own node but takes it before another rank's origin.

Ranks and block ids
-------------------
The answer is a node per rank: block ``b`` holds ranks ``[b*spBlock, (b+1)*spBlock)``
and window ``w`` holds ranks ``[w*tpBlock, (w+1)*tpBlock)``, upstream's ``r / spBlock``,
``r % spBlock`` pinning.  Upstream block id ``"b"`` is our block ``b``.  RackSchedule hands
out ids in *descending* order (``unReadyIds[0]`` is the largest), so when it places a job
in one rack the first nodes of the rack (natural order) carry the highest ranks: with no
cache, an 8-rank job with spBlock 1 puts rank 7 on the rack's first node and rank 0 on its
last.  The other strategies carve the smallest id first.

Deviations from upstream (and why)
----------------------------------
* **Soft mode** (``super-pod-affinity: soft``).  Upstream's soft fallback gives every
  non-empty rack a new block id (counting down from ``tasks``) and blocks shorter than
  ``spBlock``, so some ranks get no node pinned (reference E14).  Here every rank of a
  placed job gets exactly one node: the nodes the soft pass gathers (same walk: largest
  super pods first, racks by ascending free count, up to the missing count; in the last,
  partly taken rack cached nodes first) go to the ranks of the still unplaced blocks in
  rank order: each rank to its cached node when that node was gathered, then window by
  window, the rack the window already uses first, else the next gathered node.  Blocks
  may span super pods and windows may span racks (the contract allows it for soft jobs
  only; the objective counts it as spill).  The second number of "soft schedule job
  failed, need <n> nodes, could only schedule <m> nodes" is the number of nodes gathered
  (upstream prints already-selected minus still-missing, which means nothing).
* **UB memory**: the contract requires the whole job in one UB-memory domain.  The first
  level therefore returns a UB-memory job as a whole to the domain (inside one super pod)
  holding most of its cached nodes among those that can hold every block, or not at all
  (an origin outside that domain is given up); and a job of <= 8 tasks whose RackSchedule
  fails falls to UBMemSchedule (upstream chains it so only for larger jobs) instead of
  SuperPodSchedule, which could span domains.
* **Fault ranks** (``fault-ranks``) prefer not to return to their cached node, whether
  or not ``prefer-previous-node`` is on, but are never banned from it (RFC: "不会强制调度到
  故障节点", "不作为硬性的 node affinity"): they are not preferred, their cached node is
  their filler of last resort before other ranks' origins, and a final pass swaps a fault
  rank still on its cached node with a rank of its window (else of the same rack, else of
  the same super pod when tpBlock is 1).  **Our choice:** the partner must not be on its
  own cached node (a swap never costs a healthy rank its hit: hits outrank fault returns,
  as in the objective); among the others, first one whose cached node the fault rank's
  node is (it gains a hit), then a rank of the same window, then rank order.  With no such
  partner it moves to a pool node left unused that keeps the window and block rules
  (healthy and unwanted nodes first, then natural order); else it stays (a counted fault
  return).  A single-task fault job skips its cached node while any other candidate
  exists, and takes it when it is the only one.  Upstream's pending-session-staged fault
  path (``reschedule.go``, reference E23) runs for partly running jobs
  (``running-ranks``, ``pending-sessions``) in :mod:`heuristics.podlevel`, which fills
  its windows with this module's ``_fill``; for a job with no running rank (job-level
  rescheduling) nothing is preselected, as upstream.
* ``allPreferredNodes`` counts only ranks not placed yet: the origin of a rank already
  placed elsewhere no longer holds pass 2 back.
* The ``not found the 1 count of ra-block:%d ...`` text prints the job's ``ra-block``
  (upstream's unit test prints 0 because it sets tpBlock directly; some upstream versions
  say ``tp-block``).

Why this file is long: it is one port of one upstream function.  ``_Selector`` holds the
selection that upstream's strategy chain (RackSchedule → SuperPodSchedule →
MultiSuperPodsSchedule, UBMemSchedule, the origin-first level) builds together: a later
strategy keeps what an earlier or failed one selected, so the strategies share that state
and its tie-breaks and are read side by side with upstream's code; split into modules they
would pass the selector's internals across files.  About 130 of the lines are this
docstring, the port's flow and tie-breaks.
"""

from __future__ import annotations

from bisect import insort
from collections import Counter
from collections.abc import Iterable, Iterator

import numpy as np

from heuristics.base import JobOutcome
from heuristics.images import tie_positions
from heuristics.state import ClusterState
from models.compiled import UNHEALTHY, JobView, Problem
from models.validation import DEFAULT_RA_BLOCK, RACK_NODES, UB_MEM_RACKS

#: Upstream strategy names (``strategyKey``), used in its failure texts.
RACK_SCHEDULE = "RackSchedule"
SUPER_POD_SCHEDULE = "SuperPodSchedule"
MULTI_SCHEDULE = "MultiSuperPodsSchedule"
UB_MEM_SCHEDULE = "UBMemSchedule"
#: Jobs of at most this many tasks start with RackSchedule (``npuTaskNum8``).
RACK_TASKS = 8

_SUCCESS: tuple[bool, str | None] = (False, None)


class _Fail(Exception):
    """An upstream error that ends the selection."""


class _BestFit:
    """Racks of one super pod in ``sortRackIdByLengthInOneSuperPod`` order, kept up to date.

    Ascending free-node count, ties by ascending rack id.  Carving block after block from
    the same racks re-sorts upstream; here only the racks a block touched move.
    """

    def __init__(self, racks: dict[int, list[int]], ids: Iterable[int]) -> None:
        self.racks = racks
        self.ids = set(ids)
        self.buckets: dict[int, list[int]] = {}  # free count -> rack ids, ascending
        for k in sorted(self.ids):
            self.buckets.setdefault(len(racks[k]), []).append(k)

    def order(self, least: int) -> Iterator[int]:
        """Rack ids in best-fit order, skipping racks with fewer than ``least`` nodes."""
        for size in sorted(self.buckets):
            if size >= least:
                yield from self.buckets[size]

    def moved(self, k: int, old: int) -> None:
        """Rack ``k`` had ``old`` free nodes before the last carve."""
        bucket = self.buckets[old]
        bucket.remove(k)
        if not bucket:
            del self.buckets[old]
        insort(self.buckets.setdefault(len(self.racks[k]), []), k)


class _Selector:
    """State of one selection: the candidate pool, the shared selection, the preferences."""

    def __init__(self, problem: Problem, job: JobView, state: ClusterState) -> None:
        self.problem = problem
        self.job = job
        self.tasks = job.tasks
        self.spb = job.sp_block
        self.tpb = job.tp_block
        self.windows = self.spb // self.tpb  # windows per block
        self.blocks = self.tasks // self.spb
        self.soft = job.soft
        self.ub = job.ub_memory and job.tasks > 1
        self.size = problem.super_pod_size_configured or problem.super_pod_size
        self.sp_of: list[int] = problem.super_pod_list  # shared: never changed
        self.rack_of: list[int] = problem.rack_list
        self.pref: list[int] = job.preferred.tolist()
        origin: list[int] = job.origin.tolist()
        fault: list[bool] = job.fault.tolist()
        # Cached node a fault rank must not return to (-1: none).
        self.avoid: list[int] = [o if f else -1 for o, f in zip(origin, fault)]
        self.fault_nodes = {o for o in self.avoid if o >= 0}
        # allPreferredNodes as a count of *unplaced* ranks preferring each node.
        self.prot: dict[int, int] = {}
        for p in self.pref:
            if p >= 0:
                self.prot[p] = self.prot.get(p, 0) + 1
        self.nodes: list[int] = [-1] * self.tasks
        self.in_pool = bytearray(problem.num_nodes)  # 1 while a node is still free to take
        # The pool: super pod -> rack -> free candidate nodes in natural order.
        self.racks: dict[int, dict[int, list[int]]] = {}
        # Pool nodes some unplaced rank prefers, per (super pod, rack).
        self.prot_in_rack: Counter[tuple[int, int]] = Counter()
        self._build_pool(state)
        # Filled by run(): the order table and the shared selection's unready block ids.
        self.counts: dict[int, int] = {}
        self.ascending: list[int] = []
        self.descending: list[int] = []
        self.sp_count = 0
        self.unready: list[int] = []
        # Blocks already placed and ranks that never move (a partly running job's:
        # filled by ``heuristics.podlevel`` before :meth:`run`).
        self.done: set[int] = set()
        self.fixed: set[int] = set()

    # ----------------------------------------------------------------- candidates
    def _build_pool(self, state: ClusterState) -> None:
        problem, job = self.problem, self.job
        free = state.free
        ok = (problem.health != UNHEALTHY) & (problem.super_pod >= 0) & (problem.rack >= 0)
        if job.tasks > 1:
            ok &= (free == problem.npus) & (problem.npus == job.npu_per_task)
        else:
            ok &= free >= job.npu_per_task
            a = self.avoid[0]
            if a >= 0 and ok[a] and ok.sum() > 1:
                # RFC: a fault pod prefers another node, but its old node is never banned:
                # it stays a candidate only when it is the only one.
                ok[a] = False
            if ok.any():
                # §2.2 step 4: a single task only sees the least-idle candidates.
                ok &= free == free[ok].min()
        # Tie-break: inside a rack, nodes in natural name order (upstream: Go map order).
        order = problem.topology_order()
        cand = order[ok[order]]
        if cand.size == 0:
            return
        # npu-place addition: holders of the job's image first inside a rack
        tie = tie_positions(problem, self.job.image)
        if tie is not problem.natural_pos:  # else the topology order is already the order
            cand = cand[np.lexsort((tie[cand], problem.rack[cand], problem.super_pod[cand]))]
        self.in_pool = bytearray(ok.tobytes())  # ok is exactly the candidate mask
        sp = problem.super_pod[cand]
        rk = problem.rack[cand]
        cuts = np.flatnonzero((np.diff(sp) != 0) | (np.diff(rk) != 0)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), int(cand.size)]
        cand_l: list[int] = cand.tolist()
        racks = [cand_l[s:e] for s, e in zip(starts, ends)]
        rk_l: list[int] = rk[starts].tolist()
        # racks of one super pod are consecutive: one dict per super pod
        sp_at = sp[starts]
        sp_cuts = [0, *(np.flatnonzero(np.diff(sp_at)) + 1).tolist(), len(starts)]
        sp_l: list[int] = sp_at[sp_cuts[:-1]].tolist()
        for i, sp_id in enumerate(sp_l):
            a, b = sp_cuts[i], sp_cuts[i + 1]
            self.racks[sp_id] = dict(zip(rk_l[a:b], racks[a:b], strict=True))
        self.prot_in_rack.update(
            (self.sp_of[p], self.rack_of[p]) for p in self.prot if self.in_pool[p]
        )

    # ----------------------------------------------------------------- helpers
    def _block_ranks(self, b: int) -> range:
        return range(b * self.spb, (b + 1) * self.spb)

    def _assign(self, r: int, n: int) -> None:
        prot = self.prot
        self.nodes[r] = n
        self.in_pool[n] = 0
        if prot.get(n, 0) > 0:  # a protected node leaves the pool
            self.prot_in_rack[(self.sp_of[n], self.rack_of[n])] -= 1
        p = self.pref[r]
        if p >= 0:
            prot[p] -= 1
            if prot[p] == 0 and self.in_pool[p]:  # nobody unplaced wants p any more
                self.prot_in_rack[(self.sp_of[p], self.rack_of[p])] -= 1

    def _filler(self, left: list[int], avoid: int) -> int:
        """Index in ``left`` (tier order) of the node pass 2 gives a rank avoiding ``avoid``.

        The first node other than ``avoid`` that no unplaced rank prefers; else ``avoid``
        itself (a fault return) rather than another rank's origin (a lost hit): the RFC
        prefers a fault pod away from its node but never at a healthy pod's expense.
        """
        if avoid < 0:
            return 0
        for i, n in enumerate(left):
            if n != avoid and self._tier(n) < 2:
                return i
        if avoid in left:
            return left.index(avoid)
        return 0

    def _tier(self, n: int) -> int:
        if self.prot.get(n, 0) > 0:
            return 2
        return 1 if n in self.fault_nodes else 0

    def _capacity(self, sp: int, rack_ids: list[int] | None = None) -> int:
        """Windows (tpBlock-aligned) the racks of super pod ``sp`` can still hold."""
        racks = self.racks.get(sp, {})
        ids = racks.keys() if rack_ids is None else rack_ids
        return sum(len(racks[k]) // self.tpb for k in ids)

    def _fill(self, sp: int, rk: int, positions: list[int]) -> None:
        """Put ``positions`` (ranks) on nodes of rack ``rk``: pass 1 exact, pass 2 fillers."""
        avail = self.racks[sp][rk]
        if len(positions) > len(avail):
            raise AssertionError("rack window overfilled; this is a bug")
        pref, sp_of, rack_of, in_pool = self.pref, self.sp_of, self.rack_of, self.in_pool
        rest: list[int] = []
        for r in positions:  # pass 1: exact cached node inside this rack
            p = pref[r]
            if p >= 0 and in_pool[p] and sp_of[p] == sp and rack_of[p] == rk:
                self._assign(r, p)
            else:
                rest.append(r)
        if rest:  # pass 2: nodes no unplaced rank prefers first (allPreferredNodes)
            left = [n for n in avail if in_pool[n]]
            if len(left) > len(rest):
                left.sort(key=self._tier)  # stable: natural order inside a tier
            # Fault ranks choose first, so that a node they avoid goes to another rank.
            rest.sort(key=lambda r: 0 if self.avoid[r] >= 0 else 1)
            for r in rest:
                self._assign(r, left.pop(self._filler(left, self.avoid[r])))
        self.racks[sp][rk] = [n for n in avail if in_pool[n]]

    def _origin_counts(self, ranks: range | list[int]) -> Counter[tuple[int, int]]:
        """(super pod, rack) of the ranks' cached nodes still in the pool, in rank order."""
        counts: Counter[tuple[int, int]] = Counter()
        for r in ranks:
            p = self.pref[r]
            if p >= 0 and self.in_pool[p]:
                counts[(self.sp_of[p], self.rack_of[p])] += 1
        return counts

    # ----------------------------------------------------------------- first level
    def prefer_origin_super_pods(self) -> list[int]:
        """RFC ``preferOriginSuperPods``; returns the still unready block ids (ascending)."""
        if not any(p >= 0 for p in self.pref):
            return [b for b in range(self.blocks) if b not in self.done]
        if self.ub:
            return self._prefer_origin_ub_domain()
        unready: list[int] = []
        orders: dict[int, _BestFit] = {}
        room: dict[int, int] = {}  # windows each super pod can still hold
        for b in range(self.blocks):
            if b in self.done:
                continue
            sp = self._origin_super_pod(b)
            if sp < 0:
                unready.append(b)
                continue
            if sp in self.racks and sp not in room:
                room[sp] = self._capacity(sp)
                orders[sp] = _BestFit(self.racks[sp], self.racks[sp])
            if room.get(sp, 0) >= self.windows:
                self._origin_block(b, sp, orders[sp])
                room[sp] -= self.windows  # every window lowers the capacity by one
            else:
                unready.append(b)
        return unready

    def _origin_super_pod(self, b: int) -> int:
        """RFC ``getOriginSuperPodID`` for block ``b`` (-1: none).

        The super pod holding most of the block's cached nodes that are still free to
        take (busy or unusable origins give no hit, so they do not vote); ties go to the
        super pod of the first such rank.  Without any usable cached node: the RFC's rule,
        the super pod of the block's first rank with a cached node.
        """
        usable: Counter[int] = Counter()
        first: dict[int, int] = {}
        fallback = -1
        for r in self._block_ranks(b):
            p = self.pref[r]
            if p < 0 or self.sp_of[p] < 0:
                continue
            if fallback < 0:
                fallback = self.sp_of[p]
            if self.in_pool[p]:
                usable[self.sp_of[p]] += 1
                first.setdefault(self.sp_of[p], r)
        if not usable:
            return fallback
        return min(usable, key=lambda s: (-usable[s], first[s]))

    def _prefer_origin_ub_domain(self) -> list[int]:
        """First level of a UB-memory job: the whole job into one UB domain, or nothing."""
        domains: Counter[tuple[int, int]] = Counter()
        for p in self.pref:
            if p >= 0 and self.sp_of[p] >= 0 and self.rack_of[p] >= 0:
                domains[(self.sp_of[p], self.rack_of[p] // UB_MEM_RACKS)] += 1
        todo = [b for b in range(self.blocks) if b not in self.done]
        need = len(todo) * self.windows
        # Most cached nodes first; tie-break: lowest (super pod, domain).
        for sp, dom in sorted(domains, key=lambda d: (-domains[d], d)):
            racks = self.racks.get(sp)
            if racks is None:
                continue
            ids = [k for k in racks if k // UB_MEM_RACKS == dom]
            if self._capacity(sp, ids) < need:
                continue
            order = _BestFit(racks, ids)
            for b in todo:
                self._origin_block(b, sp, order)
            return []
        return todo

    def _origin_block(self, b: int, sp: int, order: _BestFit) -> None:
        """RFC ``selectSpBlockFromOriginSuperPod``: fill block ``b`` window by window in ``sp``.

        ``order`` holds the racks the block may use.  The caller checked that they hold
        ``spBlock/tpBlock`` windows; filling a window from any rack lowers that count by
        exactly one, so every window finds a rack: a block degrades (stays unready) exactly
        when no choice of racks could hold its windows.
        """
        racks = self.racks[sp]
        for w in range(self.windows):
            lo = b * self.spb + w * self.tpb
            ranks = list(range(lo, lo + self.tpb))
            target = -1
            # The rack holding most of the window's cached nodes (ties: rank order) ...
            for (s, k), _ in self._origin_counts(ranks).most_common():
                if s == sp and k in order.ids and len(racks[k]) >= self.tpb:
                    target = k
                    break
            if target < 0:  # ... else the window moves to another rack of the super pod.
                target = self._move_rack(sp, order, ranks)
            if target < 0:
                raise AssertionError("origin super pod ran out of windows; capacity was checked")
            old = len(racks[target])
            self._fill(sp, target, ranks)
            order.moved(target, old)

    def _move_rack(self, sp: int, order: _BestFit, ranks: list[int]) -> int:
        """The rack a window moves to: fewest other ranks' origins taken, then fewest
        forced fault returns, then best fit."""
        best_key: tuple[int, int, int, int] | None = None
        best = -1
        racks = self.racks[sp]
        protected = self.prot_in_rack
        tpb = self.tpb
        avoided = Counter(self.avoid[r] for r in ranks if self.avoid[r] >= 0)
        for k in order.order(tpb):  # best-fit order: the first clean rack wins
            size = len(racks[k])
            spare = size - protected[(sp, k)]  # nodes no unplaced rank prefers
            stolen = max(0, tpb - spare)
            # With exactly tpb spare nodes, a node every rank of the window avoids
            # (tpBlock 1: the fault rank's own node) would be a forced return.
            forced = 0
            if spare == tpb and avoided:
                forced = int(any(c == tpb and self.in_pool[n] and self.prot.get(n, 0) == 0
                                 and self.rack_of[n] == k and self.sp_of[n] == sp
                                 for n, c in avoided.items()))
            if stolen == 0 and forced == 0:
                return k
            key = (stolen, forced, size, k)
            if best_key is None or key < best_key:
                best_key, best = key, k
        return best

    # ----------------------------------------------------------------- selectOneSpBlock
    def select_one_sp_block(self, b: int, sp: int, order: _BestFit) -> None:
        """Upstream ``selectOneSpBlock`` for block ``b`` in ``sp`` with the rack preference.

        Racks are walked best fit (``order``); racks with fewer than tpBlock nodes give
        nothing, so they are skipped.
        """
        racks = self.racks[sp]
        need = self.windows
        slots: list[list[int]] = []  # [rack id, windows it gives]
        for k in order.order(self.tpb):
            if need == 0:
                break
            take = min(need, len(racks[k]) // self.tpb)
            slots.append([k, take])
            need -= take
        if need:
            raise AssertionError("selectOneSpBlock ran short; callers check capacity first")
        # Windows go to the carved rack holding most of their cached nodes first...
        where: list[int] = [-1] * self.windows
        slot_of = {k: i for i, (k, _) in enumerate(slots)}
        room = [t for _, t in slots]
        base = b * self.spb
        for w in range(self.windows):
            counts = self._origin_counts(range(base + w * self.tpb, base + (w + 1) * self.tpb))
            for (s, k), _ in counts.most_common():
                i = slot_of.get(k, -1)
                if s == sp and i >= 0 and room[i] > 0:
                    where[w] = i
                    room[i] -= 1
                    break
        # ...the others fill the slots in carving order (exactly upstream without a cache).
        i = 0
        for w in range(self.windows):
            if where[w] < 0:
                while room[i] == 0:
                    i += 1
                where[w] = i
                room[i] -= 1
        for i, (k, _) in enumerate(slots):
            positions = [
                r
                for w in range(self.windows)
                if where[w] == i
                for r in range(base + w * self.tpb, base + (w + 1) * self.tpb)
            ]
            old = len(racks[k])
            self._fill(sp, k, positions)
            order.moved(k, old)

    # ----------------------------------------------------------------- strategies
    def run(self) -> str | None:
        """Select nodes for every rank; returns upstream's error text or None."""
        unready = self.prefer_origin_super_pods()
        # getSuperPodsInfo: the order table over what is left.
        counts = {sp: sum(map(len, racks.values())) for sp, racks in self.racks.items()}
        for sp in sorted(counts):
            if counts[sp] > self.size:
                return "super-pod-size is smaller than superPod's node size"
        present = [sp for sp in counts if counts[sp] > 0]
        # Tie-break: super pods in one table cell (same count) by ascending id, both walks.
        self.ascending = sorted(present, key=lambda s: (counts[s], s))
        self.descending = sorted(present, key=lambda s: (-counts[s], s))
        self.counts = counts
        self.sp_count = sum(c // self.spb for c in counts.values())
        self.unready = unready
        if not unready:
            return None
        if self.tasks <= RACK_TASKS:
            name = RACK_SCHEDULE
        elif self.ub:
            name = UB_MEM_SCHEDULE
        elif self.tasks <= self.size:
            name = SUPER_POD_SCHEDULE
        else:
            name = MULTI_SCHEDULE
        chain = {RACK_SCHEDULE: UB_MEM_SCHEDULE if self.ub else SUPER_POD_SCHEDULE,
                 SUPER_POD_SCHEDULE: MULTI_SCHEDULE}
        strategies = {
            RACK_SCHEDULE: self._rack_schedule,
            SUPER_POD_SCHEDULE: self._super_pod_schedule,
            MULTI_SCHEDULE: self._multi_schedule,
            UB_MEM_SCHEDULE: self._ub_mem_schedule,
        }
        while True:
            try_next, err = strategies[name]()
            if err is None:
                return None
            if not try_next or name not in chain:
                return err
            name = chain[name]

    def _from(self, tasks: int) -> list[int]:
        """Super pods walked ascending from the table cell of ``tasks`` nodes."""
        return [sp for sp in self.ascending if self.counts[sp] >= tasks]

    def _rack_schedule(self) -> tuple[bool, str | None]:
        """RackSchedule (``oneRackStrategy``): the whole job in one rack."""
        if self.sp_count < len(self.unready) and not self.soft:
            return False, (
                f"before scheduling, required sp-block count={len(self.unready)}, "
                f"but total sp-block count={self.sp_count}"
            )
        for sp in self._from(self.tasks):
            racks = self.racks[sp]
            best, best_len = -1, RACK_NODES + 1
            for k in sorted(racks):  # tie-break: lowest rack id (upstream: Go map order)
                size = len(racks[k])
                if size == self.tasks:
                    best, best_len = k, size
                    break
                if size > self.tasks and best_len > size:
                    best, best_len = k, size
            if best < 0:
                continue
            # Upstream hands unReadyIds[0], [1], ... (descending ids) to the rack's nodes.
            positions = [r for b in reversed(self.unready) for r in self._block_ranks(b)]
            self._fill(sp, best, positions)
            self.unready = []
            return _SUCCESS
        if self.tasks // self.tpb == 1 and not self.soft and self._selected() == 0:
            ra = self.problem.scenario.jobs[self.job.index].ra_block or DEFAULT_RA_BLOCK
            return False, (
                f"not found the 1 count of ra-block:{ra} in all racks of every super-pod, "
                "exit select process"
            )
        return True, f"scheduling failed in {RACK_SCHEDULE} strategy"

    def _selected(self) -> int:
        return sum(1 for n in self.nodes if n >= 0)

    def _carve_all(self, sp: int, rack_ids: list[int] | None = None) -> None:
        order = _BestFit(self.racks[sp], self.racks[sp] if rack_ids is None else rack_ids)
        while self.unready:
            self.select_one_sp_block(self.unready.pop(0), sp, order)

    def _super_pod_schedule(self) -> tuple[bool, str | None]:
        """SuperPodSchedule (``oneSuperPodStrategy``): every unready block in one super pod."""
        need = len(self.unready) * self.windows
        for sp in self._from(self.tasks):
            if self._capacity(sp) >= need:
                self._carve_all(sp)
                return _SUCCESS
        return True, f"scheduling failed in {SUPER_POD_SCHEDULE} strategy"

    def _multi_schedule(self) -> tuple[bool, str | None]:
        """MultiSuperPodsSchedule: largest super pods first, block by block; soft fallback."""
        for sp in self.descending:
            room = self._capacity(sp)  # each carved block takes exactly `windows` of it
            order = _BestFit(self.racks[sp], self.racks[sp])
            while self.unready and room >= self.windows:
                self.select_one_sp_block(self.unready.pop(0), sp, order)
                room -= self.windows
            if not self.unready:
                return _SUCCESS
        if self.soft:
            return self._soft_fallback()
        return True, f"scheduling failed in {MULTI_SCHEDULE} strategy"

    def _ub_mem_schedule(self) -> tuple[bool, str | None]:
        """UBMemSchedule: every unready block in one UB-memory domain; no fallback."""
        need_nodes = self.spb * len(self.unready)
        for sp in self._from(self.tasks):
            racks = self.racks[sp]
            domains: dict[int, list[int]] = {}
            for k in racks:
                domains.setdefault(k // UB_MEM_RACKS, []).append(k)
            best_dom, best_total = -1, 0
            for dom in sorted(domains):  # tie-break: strict '<' keeps the lowest domain id
                ids = domains[dom]
                usable = sum((len(racks[k]) // self.tpb) * self.tpb for k in ids)
                if usable < need_nodes:
                    continue
                total = sum(len(racks[k]) for k in ids)
                if best_dom < 0 or total < best_total:
                    best_dom, best_total = dom, total
            if best_dom >= 0:
                self._carve_all(sp, domains[best_dom])
                return _SUCCESS
        return False, f"scheduling failed in {UB_MEM_SCHEDULE} strategy"

    def _soft_fallback(self) -> tuple[bool, str | None]:
        """Upstream's soft pass, fixed so that every rank gets exactly one node."""
        positions = [r for b in self.unready for r in self._block_ranks(b)]
        need = len(positions)
        wanted = {self.pref[r] for r in positions if self.pref[r] >= 0}
        stream: list[int] = []
        for sp in self.descending:
            racks = self.racks[sp]
            # Racks by ascending size; tie-break: rack id (upstream: unstable sort).
            for k in sorted(racks, key=lambda k: (len(racks[k]), k)):
                if len(stream) == need:
                    break
                nodes = racks[k]
                room = need - len(stream)
                if len(nodes) > room:  # the last rack: cached nodes first, then tiers
                    nodes = sorted(nodes, key=lambda n: (0 if n in wanted else 1 + self._tier(n)))
                stream.extend(nodes[:room])
            if len(stream) == need:
                break
        if len(stream) < need:
            return True, (
                f"soft schedule job failed, need <{need}> nodes, could only schedule "
                f"<{len(stream)}> nodes"
            )
        taken = set(stream)
        in_pool, sp_of, rack_of = self.in_pool, self.sp_of, self.rack_of
        for r in positions:  # pass 1: exact cached nodes among the gathered ones
            p = self.pref[r]
            if p >= 0 and p in taken and in_pool[p]:
                self._assign(r, p)
        # Pass 2, window by window: the rack the window already uses first, else the next
        # gathered node in walk order (never a fault rank's own cached node if avoidable).
        by_rack: dict[tuple[int, int], list[int]] = {}
        for n in stream:
            by_rack.setdefault((sp_of[n], rack_of[n]), []).append(n)
        head = 0  # stream[:head] is used up

        def pick(home: tuple[int, int] | None, avoid: int) -> int:
            nonlocal head
            if home is not None:
                for n in by_rack[home]:
                    if in_pool[n] and n != avoid:
                        return n
            while not in_pool[stream[head]]:
                head += 1
            for i in range(head, len(stream)):
                if in_pool[stream[i]] and stream[i] != avoid:
                    return stream[i]
            return stream[head]  # only the avoided node is left: the safety net swaps

        for w0 in range(0, len(positions), self.tpb):
            window = positions[w0:w0 + self.tpb]
            used = Counter((sp_of[self.nodes[r]], rack_of[self.nodes[r]])
                           for r in window if self.nodes[r] >= 0)
            home = used.most_common(1)[0][0] if used else None
            for r in window:
                if self.nodes[r] < 0:
                    n = pick(home, self.avoid[r])
                    self._assign(r, n)
                    if home is None:
                        home = (sp_of[n], rack_of[n])
        for racks in self.racks.values():
            for k in racks:
                racks[k] = [n for n in racks[k] if self.in_pool[n]]
        self.unready = []
        return _SUCCESS

    # ----------------------------------------------------------------- fault safety net
    def keep_faults_away(self) -> None:
        """Swap every fault rank still on its cached node with a rank that keeps all rules."""
        for r, a in enumerate(self.avoid):
            if a < 0 or self.nodes[r] != a or r in self.fixed:
                continue
            best_q, best_key = -1, (9, 9)
            for q in range(self.tasks):
                if q == r or q in self.fixed or not self._swappable(r, q):
                    continue
                if self.avoid[q] == a:
                    continue
                nq = self.nodes[q]
                if self.pref[q] == nq:
                    continue  # the partner would lose its hit: the fault rank stays
                gain = 0 if self.pref[q] == a else 1
                key = (gain, 0 if q // self.tpb == r // self.tpb else 1)
                if key < best_key:
                    best_q, best_key = q, key
                    if key == (0, 0):
                        break
            if best_q >= 0:
                self.nodes[r], self.nodes[best_q] = self.nodes[best_q], a
                continue
            spare = self._spare_for(a)
            if spare >= 0:  # an unused pool node that keeps every rule
                self.nodes[r] = spare
                self.in_pool[spare] = 0
                self.in_pool[a] = 1

    def _spare_for(self, a: int) -> int:
        """An unused pool node a fault rank on node ``a`` may move to (-1: none).

        Same rack (the window stays whole), or same super pod when tpBlock is 1, or any
        rack when blocks are single nodes or the job is soft, always inside the job's
        UB-memory domain; healthy nodes and nodes no rank prefers first, then natural
        order.
        """
        sp, rk = self.sp_of[a], self.rack_of[a]
        best, best_key = -1, (2, 2, 0)
        natural = self.problem.natural_pos
        sub = self.problem.health
        for s, racks in self.racks.items():
            if s != sp and not (self.spb == 1 or self.soft):
                continue
            for k, nodes in racks.items():
                if (s, k) != (sp, rk) and not (self.tpb == 1 or self.spb == 1 or self.soft):
                    continue
                if self.ub and k // UB_MEM_RACKS != rk // UB_MEM_RACKS:
                    continue  # the job stays in its UB-memory domain (contract: rack // 16)
                for n in nodes:
                    if not self.in_pool[n] or n == a:
                        continue
                    wanted = self.prot.get(n, 0) > 0 or n in self.fault_nodes
                    key = (int(sub[n] != 0), int(wanted), int(natural[n]))
                    if key < best_key:
                        best, best_key = n, key
        return best

    def _swappable(self, r: int, q: int) -> bool:
        if r // self.tpb == q // self.tpb:
            return True
        nr, nq = self.nodes[r], self.nodes[q]
        same_sp = self.sp_of[nr] == self.sp_of[nq]
        if same_sp and self.rack_of[nr] == self.rack_of[nq]:
            return True
        if same_sp and self.tpb == 1:
            return True
        if self.spb == 1:
            return True  # windows and blocks of one node each
        return self.soft


def place_rack(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Place a ``chip8-node8-ra64-sp`` job: upstream ``selectNodesForJob`` plus the RFC.

    Parameters
    ----------
    problem
        The compiled scenario.
    j
        Index of the job (its family must be :attr:`Family.RACK`).
    state
        Free chips per node now; not modified.

    Returns
    -------
    JobOutcome
        A node index per rank (position ``r`` = rank ``r``) such that every block of
        ``spBlock`` ranks sits in one super pod and every window of ``tpBlock`` ranks in
        one rack (soft jobs: best effort), or upstream's failure text.
    """
    job = problem.jobs[j]
    sel = _Selector(problem, job, state)
    err = sel.run()
    if err is not None:
        return JobOutcome.fail(err)
    sel.keep_faults_away()
    if any(n < 0 for n in sel.nodes):
        raise AssertionError(f"rack strategy left ranks of job '{job.name}' without a node")
    return JobOutcome(np.asarray(sel.nodes, dtype=np.int64))
